package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint/internal/progress"
	"github.com/glint-llm/glint/model/quant"
)

func quantizeCommand() *cli.Command {
	return &cli.Command{
		Name:      "quantize",
		Usage:     "quantize a GGUF file or Hugging Face folder as llama-quantize does (same types, same bytes)",
		UsageText: "generate quantize [--allow-requantize] [--vocab VOCAB.gguf] IN OUT TYPE\n\nTYPE: " + strings.Join(quant.FileTypeNames(), ", "),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "allow-requantize", Usage: "accept already-quantized input tensors (dequantized, then quantized again)"},
			&cli.StringFlag{Name: "vocab", Usage: "for a Hugging Face folder: copy the tokenizer metadata from this GGUF file"},
			&cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Usage: "threads (default: all cores)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 3 {
				return fmt.Errorf("quantize: want IN OUT TYPE, got %d arguments (TYPE: %s)", c.NArg(), strings.Join(quant.FileTypeNames(), ", "))
			}
			in, out := c.Args().Get(0), c.Args().Get(1)
			ft, err := quant.LookupFileType(c.Args().Get(2))
			if err != nil {
				return err
			}
			bar := progress.New("quantizing " + out)
			err = quant.Quantize(in, out, ft, quant.Options{
				AllowRequantize: c.Bool("allow-requantize"), Vocab: c.String("vocab"),
				Threads: c.Int("threads"), Progress: bar.Update,
			})
			bar.Finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s (%s)\n", out, ft.Name)
			if st, err := os.Stat(in); err == nil && st.IsDir() && c.String("vocab") == "" {
				fmt.Fprintf(os.Stderr, "note: %s has no tokenizer (glint cannot convert tokenizer.json yet); add one with --vocab VOCAB.gguf\n", out)
			}
			return nil
		},
	}
}
