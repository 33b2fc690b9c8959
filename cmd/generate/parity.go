package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/sample"
)

func parityCommand() *cli.Command {
	flags := append(modelFlags(), promptFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "backends", Value: "cpu,opencl", Usage: "backends to compare; the first is the reference"},
		&cli.Float64Flag{Name: "tol", Value: 1e-3, Usage: "largest acceptable max |Δlogit| for float weights (F32, F16, BF16)"},
		&cli.Float64Flag{Name: "tol-quant", Value: 1, Usage: "largest acceptable max |Δlogit| when weights are quantised"},
		&cli.Float64Flag{Name: "gap", Value: 1e-3, Usage: "a top-1 disagreement is accepted only where the reference's top-1/top-2 gap is below this"},
	)
	return &cli.Command{
		Name:  "parity",
		Usage: "run backends side by side and compare their logits step by step",
		Description: "Every backend is fed the first backend's greedy choice, so they never drift apart. A step fails\n" +
			"when max |Δlogit| exceeds the tolerance, or when the top-1 tokens differ where the reference's\n" +
			"top-1/top-2 gap is at least --gap. Quantised weights see activations rounded to 8 bits: an activation\n" +
			"on a rounding boundary may round the other way after float sums in another order, which moves logits\n" +
			"by up to ~0.1-1 in small random models; for them --tol-quant applies and the greedy ids must agree.",
		UsageText: "generate parity -m MODEL -p TEXT -n N [--backends cpu,opencl]",
		Flags:     flags,
		Action:    runParity,
	}
}

// runParity feeds every backend the same tokens (the reference's greedy
// choice, so they never drift apart) and compares the logits of each step.
func runParity(c *cli.Context) error {
	names := strings.Split(c.String("backends"), ",")
	if len(names) < 2 {
		return fmt.Errorf("--backends %q: name at least two", c.String("backends"))
	}
	var models []*glint.Model
	defer func() {
		for _, l := range models {
			l.Close()
		}
	}()
	for _, name := range names {
		o := loadOpts(c)
		o.Backend = strings.TrimSpace(name)
		l, err := openModel(o, c.String("model"), true)
		if err != nil {
			return fmt.Errorf("%s: %w", o.Backend, err)
		}
		fmt.Fprintln(os.Stderr, l.Info)
		models = append(models, l)
	}
	prompt, err := promptIDs(c, models[0])
	if err != nil {
		return err
	}
	vocab := models[0].Vocab()
	logits := make([][]float32, len(models))
	for i, l := range models {
		if l.Vocab() != vocab {
			return fmt.Errorf("%s has %d logits, %s has %d", names[i], l.Vocab(), names[0], vocab)
		}
		logits[i] = make([]float32, vocab)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "step\tmax|Δlogit|\ttop-1 (%s)\tgap\tresult\n", strings.Join(names, ", "))
	tol, gapTol := c.Float64("tol"), c.Float64("gap")
	if models[0].Quantized {
		tol = c.Float64("tol-quant")
	}
	var worst float64
	failed := 0
	batch := prompt
	for step := 0; step < c.Int("n-predict"); step++ {
		for i, l := range models {
			if err := l.Eval(batch); err != nil {
				return fmt.Errorf("%s: step %d: %w", names[i], step, err)
			}
			if err := l.Logits(logits[i]); err != nil {
				return fmt.Errorf("%s: step %d: %w", names[i], step, err)
			}
		}
		ref := logits[0]
		top, gap := sample.TopGap(ref)
		var maxDiff float64
		tops := []string{fmt.Sprint(top)}
		agree := true
		for _, l := range logits[1:] {
			for j := range ref {
				maxDiff = math.Max(maxDiff, math.Abs(float64(l[j]-ref[j])))
			}
			t := sample.Argmax(l)
			tops = append(tops, fmt.Sprint(t))
			agree = agree && t == top
		}
		worst = math.Max(worst, maxDiff)
		result := "ok"
		switch {
		case maxDiff > tol:
			result, failed = fmt.Sprintf("FAIL: max|Δ| > %g", tol), failed+1
		case !agree && gap >= gapTol:
			result, failed = fmt.Sprintf("FAIL: top-1 differs with gap %.2g ≥ %g", gap, gapTol), failed+1
		case !agree:
			result = fmt.Sprintf("flip at a near-tie (gap %.2g < %g)", gap, gapTol)
		}
		fmt.Fprintf(tw, "%d\t%.3g\t%s\t%.3g\t%s\n", step, maxDiff, strings.Join(tops, ", "), gap, result)
		batch = []int32{top}
		if models[0].IsEOG(top) {
			break
		}
	}
	tw.Flush()
	fmt.Printf("worst max|Δlogit| %.3g over the run; %d failing steps\n", worst, failed)
	if failed > 0 {
		return cli.Exit("", 2)
	}
	return nil
}
