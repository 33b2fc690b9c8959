package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/engine"
)

// specFlags are speculative decoding's, named and defaulted as llama.cpp
// names them (common/arg.cpp): a draft model (-md) or an n-gram lookup
// over the context (--spec-type ngram-simple) drafts, the target verifies.
func specFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model-draft", Aliases: []string{"md"}, Usage: "draft model for speculative decoding (its vocabulary must match the model's)"},
		&cli.StringFlag{Name: "spec-type", Usage: "speculative decoding's drafts: " + strings.Join(glint.SpecTypes, " or ") + " (default: draft with -md, else none)"},
		&cli.IntFlag{Name: "draft-max", Aliases: []string{"draft", "draft-n"}, Value: glint.DefaultDraftMax, Usage: "most tokens drafted per step"},
		&cli.IntFlag{Name: "draft-min", Aliases: []string{"draft-n-min"}, Usage: "fewest drafted tokens worth verifying"},
		&cli.Float64Flag{Name: "draft-p-min", Value: glint.DefaultDraftPMin, Usage: "a draft model stops drafting after a token it gives less probability (greedy)"},
		&cli.IntFlag{Name: "spec-ngram-size-n", Value: engine.NgramSizeN, Usage: "ngram-simple: tokens of the pattern looked up in the context"},
		&cli.IntFlag{Name: "spec-ngram-size-m", Value: engine.NgramSizeM, Usage: "ngram-simple: most tokens drafted from a match"},
		&cli.IntFlag{Name: "spec-ngram-min", Value: engine.NgramSizeMin, Usage: "ngram-simple: shortest pattern tried when the longest recurs nowhere"},
		&cli.BoolFlag{Name: "draft-adaptive", Usage: "draft, each step, the length up to --draft-max that measured acceptance and verification cost say pays best"},
	}
}

// specOpts are the speculative options the flags give (off where a command
// has none of them).
func specOpts(c *cli.Context) glint.SpecOptions {
	pMin := float32(c.Float64("draft-p-min"))
	if pMin == 0 && c.IsSet("draft-p-min") {
		pMin = -1 // an explicit 0: never stop early
	}
	return glint.SpecOptions{DraftModel: c.String("model-draft"), Type: c.String("spec-type"),
		DraftMax: c.Int("draft-max"), DraftMin: c.Int("draft-min"), DraftPMin: pMin,
		NgramN: c.Int("spec-ngram-size-n"), NgramM: c.Int("spec-ngram-size-m"), NgramMin: c.Int("spec-ngram-min"), Adaptive: c.Bool("draft-adaptive")}
}

// printSpeculative reports what speculative decoding did, or why it did
// not run.
func printSpeculative(w io.Writer, tm engine.Timing) {
	if tm.SpecOff != "" {
		fmt.Fprintf(w, "speculative: off (%s)\n", tm.SpecOff)
		return
	}
	fmt.Fprintf(w, "speculative: %d tokens in %d target passes (drafted %d, accepted %d)\n",
		len(tm.Generated), tm.Passes, tm.Drafted, tm.Accepted)
}
