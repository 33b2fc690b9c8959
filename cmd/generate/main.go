// Command generate runs text generation with glint, llama.cpp-style:
//
//	generate -m model.gguf -b opencl -n 20 -p "Once upon a time"
//
// stdout carries only the generated text (or ids), streamed as it is made;
// load information and timings go to stderr. Subcommands tokenize text,
// write synthetic models, list OpenCL devices, compare backends and report
// timings.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	app := &cli.App{
		Name:      "generate",
		Usage:     "generate text with a Llama-family model on the CPU, OpenCL or ONNX Runtime",
		UsageText: "generate -m MODEL [-b cpu|opencl|onnx] [-p PROMPT | -f FILE | --prompt-ids IDS] [-n N] [options]",
		Flags:     generateFlags(),
		Action:    runGenerate,
		Commands: []*cli.Command{
			tokenizeCommand(),
			synthCommand(),
			devicesCommand(),
			parityCommand(),
			reportCommand(),
		},
		HideHelpCommand: true,
		// Errors are printed once, below, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if err := app.Run(os.Args); err != nil {
		var ec cli.ExitCoder
		code := 1
		if errors.As(err, &ec) && ec.ExitCode() != 0 {
			code = ec.ExitCode()
		}
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "generate:", msg)
		}
		os.Exit(code)
	}
}
