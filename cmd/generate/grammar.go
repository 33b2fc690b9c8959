package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/glint-llm/glint/grammar"
	"github.com/urfave/cli/v2"
)

// grammarFlags are llama-cli's constrained-decoding flags.
func grammarFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "grammar", Usage: "GBNF grammar the output must follow (llama.cpp's format; the rule root starts it)"},
		&cli.StringFlag{Name: "grammar-file", Usage: "read the GBNF grammar from a file"},
		&cli.StringFlag{Name: "json-schema", Aliases: []string{"j"}, Usage: "JSON Schema the output must follow (e.g. '{}' for any JSON value)"},
	}
}

// grammarOf is the grammar the flags give, or nil.
func grammarOf(c *cli.Context) (*grammar.Grammar, error) {
	var set []string
	for _, f := range []string{"grammar", "grammar-file", "json-schema"} {
		if c.IsSet(f) {
			set = append(set, "--"+f)
		}
	}
	if len(set) > 1 {
		return nil, fmt.Errorf("%s: give one of them", set)
	}
	switch {
	case c.IsSet("grammar"):
		return grammar.Parse(c.String("grammar"))
	case c.IsSet("grammar-file"):
		b, err := os.ReadFile(c.String("grammar-file"))
		if err != nil {
			return nil, err
		}
		g, err := grammar.Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("--grammar-file %s: %w", c.String("grammar-file"), err)
		}
		return g, nil
	case c.IsSet("json-schema"):
		g, err := grammar.FromJSONSchema([]byte(c.String("json-schema")), grammar.SchemaOptions{})
		if err != nil {
			return nil, fmt.Errorf("--json-schema: %w", err)
		}
		return g, nil
	}
	return nil, nil
}

var errGrammarNeedsTokenizer = errors.New("a grammar needs the model's tokenizer")
