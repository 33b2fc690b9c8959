package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/internal/progress"
	"github.com/glint-llm/glint/numerics"
	"github.com/glint-llm/glint/report"
)

// workerFlag starts the hidden child side of the report: each backend is
// measured in its own process (peak RSS of that backend alone; a crash
// costs one row), which re-executes this binary with it.
const workerFlag = "worker"

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "measure load time, TTFT, TBT, peak memory (and op times) across backends; write a table, report.json and report.svg",
		UsageText: "generate report -b cpu,opencl,onnx -m MODEL [-m onnx=DIR] -p PROMPT -n N --runs R --out DIR " +
			"[-t threads] [--device D] [--profile] [--spec-type ngram-simple | -md DRAFT] [--draft-max N]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "backends", Aliases: []string{"b"}, Value: "cpu,opencl", Usage: "comma-separated backends to measure, in order"},
			&cli.StringSliceFlag{Name: "model", Aliases: []string{"m"}, Usage: "model for every backend, or BACKEND=PATH for one (onnx needs an ONNX model directory); repeatable"},
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Value: "Once upon a time", Usage: "prompt text"},
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the prompt from a file"},
			&cli.StringFlag{Name: "prompt-ids", Usage: "prompt as token ids (1,2,3) instead of text"},
			&cli.IntFlag{Name: "n-predict", Aliases: []string{"n"}, Value: 32, Usage: "tokens generated per run (EOS is ignored)"},
			&cli.IntFlag{Name: "runs", Value: 3, Usage: "timed runs per backend, after one warm-up run"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: filepath.Join("out", "report"), Usage: "folder for report.json and report.svg"},
			&cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Usage: "CPU threads (0: all cores)"},
			&cli.StringFlag{Name: "device", Usage: "OpenCL device: index or name substring"},
			tuneFlag(),
			&cli.IntFlag{Name: "ctx-size", Aliases: []string{"c"}, Value: 4096, Usage: "context size in tokens (0: the model's)"},
			cacheTypeFlag("k"), cacheTypeFlag("v"), flashAttnFlag(),
			&cli.StringFlag{Name: "ort-lib", Usage: "path of libonnxruntime.so (default: $ONNXRUNTIME_LIB, then third_party/onnxruntime)"},
			&cli.BoolFlag{Name: "profile", Usage: "also time each op kind, in as many extra runs (second table; ops are synchronised one by one, except on OpenCL, which times its launches on the device, fused ones by name)"},
			&cli.BoolFlag{Name: workerFlag, Hidden: true, Usage: "internal: measure the job on stdin, write JSON to stdout"},
		}, specFlags()...),
		Action: runReport,
	}
}

// parseModels splits the -m values into the per-backend map report.Options
// wants: "BACKEND=PATH" names one backend's model, anything else is the
// default (a path with "=" in it stays a path unless it starts with a
// backend's name).
func parseModels(vals []string) (map[string]string, error) {
	models := map[string]string{}
	for _, v := range vals {
		key, path := "", v
		if k, p, ok := strings.Cut(v, "="); ok && slices.Contains(glint.Backends, k) {
			key, path = k, p
		}
		if path == "" {
			return nil, fmt.Errorf("-m %q: empty path", v)
		}
		if old, dup := models[key]; dup {
			what := "the default model"
			if key != "" {
				what = "the model of " + key
			}
			return nil, fmt.Errorf("-m %q: %s is already %q", v, what, old)
		}
		models[key] = path
	}
	if len(models) == 0 {
		return nil, fmt.Errorf("no model: give -m MODEL (and -m onnx=DIR for onnx)")
	}
	return models, nil
}

func runReport(c *cli.Context) error {
	if c.Bool(workerFlag) {
		return report.Worker(os.Stdin, os.Stdout)
	}
	if c.NArg() > 0 {
		return fmt.Errorf("report: unexpected argument %q", c.Args().First())
	}
	models, err := parseModels(c.StringSlice("model"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	o := report.Options{
		Models: models, Prompt: c.String("prompt"), N: c.Int("n-predict"), Runs: c.Int("runs"),
		Threads: c.Int("threads"), Device: c.String("device"), Tune: c.String("tune"), Context: c.Int("ctx-size"),
		CacheTypeK: c.String("cache-type-k"), CacheTypeV: c.String("cache-type-v"), FlashAttn: c.String("flash-attn"),
		OrtLib: c.String("ort-lib"), Profile: c.Bool("profile"), Spec: specOpts(c),
		Numerics: numerics.FromEnv(), // as loadOpts
	}
	if err := o.Spec.Check(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for _, b := range strings.Split(c.String("backends"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.Backends = append(o.Backends, b)
		}
	}
	if f := c.String("file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		o.Prompt = string(b)
	}
	if s := c.String("prompt-ids"); s != "" {
		if o.PromptIDs, err = parseIDs(s); err != nil {
			return fmt.Errorf("report: --prompt-ids: %w", err)
		}
		o.Prompt = ""
	}
	if progress.IsTerminal(os.Stderr) {
		o.Progress = func(b string, i, n int) {
			fmt.Fprintf(os.Stderr, "report: measuring %s (%d/%d): 1 warm-up + %d runs of %d tokens\n", b, i+1, n, o.Runs, o.N)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("report: cannot re-run this program for the per-backend processes: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := report.Run(ctx, o, report.Exec([]string{exe, "report", "--" + workerFlag}))
	if err != nil {
		return err
	}
	if err := report.WriteTable(os.Stdout, r); err != nil {
		return err
	}
	if err := report.WriteProfileTable(os.Stdout, r); err != nil {
		return err
	}
	out := c.String("out")
	if err := report.WriteFiles(out, r); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s and %s\n", filepath.Join(out, report.JSONName), filepath.Join(out, report.SVGName))
	failed := 0
	for _, b := range r.Backends {
		if b.Status == report.StatusFailed {
			failed++
		}
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("report: %d backend(s) failed (see the status column)", failed), 3)
	}
	return nil
}
