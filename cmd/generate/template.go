package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint/chattemplate"
)

// chatTemplateFlags choose the template for template, chat and serve;
// tokenizes adds, for the commands that generate from the rendered
// conversation, how they read control-token text in its messages and what
// a reply's think block becomes.
func chatTemplateFlags(tokenizes bool) []cli.Flag {
	fl := []cli.Flag{
		&cli.StringFlag{Name: "chat-template-file", Usage: "Jinja chat template file (overrides the model's)"},
		&cli.StringFlag{Name: "chat-template", Usage: "built-in chat template, for models that carry none: chatml, llama3, gemma, phi3 or mistral"},
		&cli.StringFlag{Name: "chat-template-kwargs", Usage: `extra template variables as a JSON object, e.g. '{"date_string": "26 Jul 2024"}'`},
	}
	if tokenizes {
		fl = append(fl, &cli.BoolFlag{Name: "chat-special-in-content",
			Usage: "control-token text in chat messages (such as <|eot_id|>) becomes control tokens; by default it is tokenized as text, so that a message cannot forge a turn"},
			&cli.StringFlag{Name: "reasoning-format", Value: "deepseek",
				Usage: "a reasoning model's leading <think>…</think> block: deepseek (serve: message.reasoning_content, delta.reasoning_content when streamed; chat: shown on stderr) or none (left in the reply); auto is deepseek"})
	}
	return fl
}

func templateCommand() *cli.Command {
	return &cli.Command{
		Name:      "template",
		Usage:     "print the prompt a chat template makes of a conversation, exactly",
		UsageText: "generate template [-m MODEL | --chat-template-file FILE | --chat-template NAME] --messages MSGS.json [--no-generation-prompt] [--bos-token T] [--eos-token T] [--chat-template-kwargs JSON]",
		Flags: append(chatTemplateFlags(false),
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "GGUF file or Hugging Face folder: its template and BOS/EOS text"},
			&cli.StringFlag{Name: "messages", Usage: `the conversation: a JSON file holding [{"role": ..., "content": ...}, ...] ("-": stdin)`, Required: true},
			&cli.BoolFlag{Name: "no-generation-prompt", Usage: "do not open the assistant's turn at the end"},
			&cli.StringFlag{Name: "bos-token", Usage: "BOS text (default: the model's)"},
			&cli.StringFlag{Name: "eos-token", Usage: "EOS text (default: the model's)"},
		),
		Action: runTemplate,
	}
}

// chatTemplate resolves the template flags against the model at path ("":
// none), returning the template and the model's BOS/EOS text.
func chatTemplate(c *cli.Context, path string) (*chattemplate.Template, chattemplate.ModelTemplate, map[string]any, error) {
	var mt chattemplate.ModelTemplate
	if path != "" {
		var err error
		if mt, err = chattemplate.FromModel(path); err != nil {
			return nil, mt, nil, err
		}
	}
	t, err := chattemplate.Resolve(chattemplate.Choice{File: c.String("chat-template-file"), Builtin: c.String("chat-template")}, mt)
	if err != nil {
		return nil, mt, nil, err
	}
	kw, err := templateKwargs(c)
	if err != nil {
		return nil, mt, nil, err
	}
	return t, mt, kw, nil
}

// templateKwargs reads --chat-template-kwargs.
func templateKwargs(c *cli.Context) (map[string]any, error) {
	s := c.String("chat-template-kwargs")
	if s == "" {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("--chat-template-kwargs: want a JSON object: %w", err)
	}
	kw := map[string]any{}
	for k, v := range raw {
		kw[k] = v
	}
	return kw, nil
}

func runTemplate(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("template: unexpected argument %q", c.Args().First()), 2)
	}
	t, mt, kw, err := chatTemplate(c, c.String("model"))
	if err != nil {
		return err
	}
	name := c.String("messages")
	var msgs []byte
	if name == "-" {
		msgs, err = io.ReadAll(os.Stdin)
	} else {
		msgs, err = os.ReadFile(name)
	}
	if err != nil {
		return fmt.Errorf("--messages: %w", err)
	}
	in := chattemplate.Input{Messages: json.RawMessage(msgs), AddGenerationPrompt: !c.Bool("no-generation-prompt"),
		BOS: mt.BOS, EOS: mt.EOS, Kwargs: kw}
	if c.IsSet("bos-token") {
		in.BOS = c.String("bos-token")
	}
	if c.IsSet("eos-token") {
		in.EOS = c.String("eos-token")
	}
	out, err := t.Render(c.Context, in)
	if err != nil {
		var re *chattemplate.RaiseError
		var te *chattemplate.TemplateError
		if errors.As(err, &re) {
			return fmt.Errorf("%s: %s", t.Origin, re.Msg)
		}
		if errors.As(err, &te) {
			return err // it names the template
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	_, err = os.Stdout.WriteString(out)
	return err
}
