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

	"github.com/glint-llm/glint/backend/opencl/cl"
)

func main() {
	// The environment names the OpenCL library; backend/opencl reads none.
	cl.SetLibrary(os.Getenv(cl.LibEnv))
	app := &cli.App{
		Name:      "generate",
		Usage:     "generate text with a Llama-family model on the CPU, OpenCL or ONNX Runtime",
		UsageText: "generate -m MODEL [-b cpu|opencl|onnx] [-p PROMPT | -f FILE | --prompt-ids IDS] [-n N] [options]",
		Flags:     generateFlags(),
		Action:    runGenerate,
		Commands: []*cli.Command{
			tokenizeCommand(),
			synthCommand(),
			quantizeCommand(),
			devicesCommand(),
			parityCommand(),
			reportCommand(),
			templateCommand(),
			chatCommand(),
			serveCommand(),
			serveBenchCommand(),
			batchedBenchCommand(),
		},
		HideHelpCommand: true,
		// A word the commands do not know is an error (exit 2, as go and git
		// do), so that a script can tell a typo from success.
		Before:       rejectStrayArgs,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return usageError("%v (see generate --help)", err) },
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

// usageError is a command-line mistake: exit status 2, as go and git use.
func usageError(format string, a ...any) error {
	return cli.Exit(fmt.Sprintf(format, a...), 2)
}

// takesArgs are the commands with positional arguments.
var takesArgs = map[string]bool{"quantize": true}

// rejectStrayArgs makes every command that takes no positional arguments
// refuse them, naming the first. It runs before any command does, so it
// covers commands added later too.
func rejectStrayArgs(c *cli.Context) error {
	for _, cmd := range c.App.Commands {
		name := cmd.Name
		cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return usageError("%s: %v (see generate %s --help)", name, err, name)
		}
		if takesArgs[cmd.Name] || cmd.Action == nil {
			continue
		}
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError("%s: unexpected argument %q", c.Command.Name, c.Args().First())
			}
			return action(c)
		}
	}
	return nil
}
