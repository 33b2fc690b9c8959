package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/internal/progress"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/quant"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/tokenizer"
)

func tokenizeCommand() *cli.Command {
	return &cli.Command{
		Name:      "tokenize",
		Usage:     "print the token ids of a text (works on vocab-only GGUF files)",
		UsageText: "generate tokenize -m MODEL -p TEXT [--no-bos]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "GGUF file or directory with tokenizer.json"},
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "text"},
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the text from a file"},
			&cli.BoolFlag{Name: "no-bos", Usage: "do not add BOS/EOS"},
		},
		Action: func(c *cli.Context) error {
			tok, err := openTokenizer(c.String("model"))
			if err != nil {
				return err
			}
			text := c.String("prompt")
			if f := c.String("file"); f != "" {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				text = string(b)
			}
			ids := tok.Encode(text, !c.Bool("no-bos"))
			s := make([]string, len(ids))
			for i, id := range ids {
				s[i] = fmt.Sprint(id)
			}
			fmt.Println(strings.Join(s, " "))
			return nil
		},
	}
}

// openTokenizer reads only the tokenizer of a GGUF file or HF directory.
func openTokenizer(path string) (*tokenizer.Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return tokenizer.FromHF(path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return tokenizer.FromGGUF(f)
}

func synthCommand() *cli.Command {
	return &cli.Command{
		Name:      "synth",
		Usage:     "write a deterministic random-weight model of a named shape and architecture",
		UsageText: "generate synth [--arch llama] --shape llama3.2-1b --type Q4_0 [--vocab ggml-vocab-llama3-bpe.gguf] [--hf|--onnx] -o model.gguf",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "arch", Value: "llama", Usage: "architecture: " + strings.Join(model.Archs, ", ")},
			&cli.StringFlag{Name: "shape", Value: "tiny", Usage: "shape name: " + strings.Join(synth.ShapeNames(), ", ")},
			&cli.StringFlag{Name: "type", Value: "F32", Usage: strings.Join(quant.FileTypeNames(), ", ") + " (llama-quantize's mixes) or Q4_0-pure"},
			&cli.StringFlag{Name: "vocab", Usage: "copy the tokenizer from this vocab GGUF (default: a small built-in byte-level BPE)"},
			&cli.Uint64Flag{Name: "seed", Value: 1},
			&cli.Float64Flag{Name: "std", Value: 0.02, Usage: "standard deviation of the weights"},
			&cli.BoolFlag{Name: "hf", Usage: "write a Hugging Face directory (config.json + model.safetensors) instead of GGUF"},
			&cli.BoolFlag{Name: "onnx", Usage: "gemma3 (F32): write the same weights as an ONNX decoder directory for -b onnx instead of GGUF"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "output file (or directory with --hf)"},
		},
		Action: func(c *cli.Context) error {
			bar := progress.New("writing " + c.String("out"))
			o := synth.Options{
				Arch: c.String("arch"), Shape: c.String("shape"), Type: c.String("type"), Seed: c.Uint64("seed"),
				Std: float32(c.Float64("std")), VocabGGUF: c.String("vocab"), Progress: bar.Update,
			}
			var err error
			switch {
			case c.Bool("hf") && c.Bool("onnx"):
				err = fmt.Errorf("synth: --hf and --onnx exclude each other")
			case c.Bool("hf"):
				err = synth.WriteHF(c.String("out"), o)
			case c.Bool("onnx"):
				err = synth.WriteONNX(c.String("out"), o)
			default:
				err = synth.WriteGGUF(c.String("out"), o)
			}
			bar.Finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s (%s %s %s, seed %d)\n", c.String("out"), o.Arch, o.Shape, o.Type, o.Seed)
			return nil
		},
	}
}

func devicesCommand() *cli.Command {
	return &cli.Command{
		Name:  "devices",
		Usage: "list every OpenCL platform and device",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "register", Usage: "write to this folder ICD files for OCL_ICD_VENDORS: the loader's own and one per GPU driver it does not list; prints the export line"},
		},
		Action: func(c *cli.Context) error {
			if dir := c.String("register"); dir != "" {
				ds, err := loaderICD().WriteRegistry(dir)
				if err != nil {
					return err
				}
				for _, d := range ds {
					fmt.Fprintf(os.Stderr, "registered %s's driver %s\n", d.Vendor, d.Path)
				}
				abs, err := filepath.Abs(dir)
				if err != nil {
					return err
				}
				fmt.Printf("export OCL_ICD_VENDORS=%s\n", abs)
				return nil
			}
			devs, err := opencl.Devices()
			if err != nil {
				if hint := loaderICD().RegisterHint(); hint != "" {
					fmt.Fprint(os.Stderr, hint)
				}
				return err
			}
			gpu := false
			for i, d := range devs {
				fmt.Printf("%d: %s\n", i, d)
				gpu = gpu || d.Type == "GPU"
			}
			if !gpu {
				fmt.Fprint(os.Stderr, loaderICD().RegisterHint())
			}
			return nil
		},
	}
}
