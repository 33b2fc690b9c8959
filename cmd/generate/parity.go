package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/peer"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/sample"
)

func parityCommand() *cli.Command {
	flags := append(modelFlags(), promptFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "backends", Value: "cpu,opencl", Usage: "backends to compare; the first is the reference"},
		&cli.Float64Flag{Name: "tol", Value: 1e-3, Usage: "largest acceptable max |Δlogit| for float weights (F32, F16, BF16)"},
		&cli.Float64Flag{Name: "tol-quant", Value: 1, Usage: "largest acceptable max |Δlogit| when weights are quantised"},
		&cli.Float64Flag{Name: "tol-half", Value: 2e-2, Usage: "largest acceptable max |Δlogit| where values round to f16: F16/BF16 weights' activations, an f16 KV cache"},
		&cli.Float64Flag{Name: "gap", Value: 1e-3, Usage: "a top-1 disagreement is accepted only where the reference's top-1/top-2 gap is below this"},
		&cli.StringFlag{Name: "llamacpp", Usage: "also compare the first backend with llama.cpp: the folder of a build's refgen-greedy (\"auto\": $GLINT_LLAMACPP, else .peer/llama.cpp-cpu/build/bin)"},
		&cli.Float64Flag{Name: "tol-llamacpp", Value: 2e-3, Usage: "max |Δlogit| against llama.cpp that a step must keep; 95% of steps must"},
	)
	return &cli.Command{
		Name:  "parity",
		Usage: "run backends side by side and compare their logits step by step",
		Description: "Every backend is fed the first backend's greedy choice, so they never drift apart. A step fails\n" +
			"when max |Δlogit| exceeds the tolerance, or when the top-1 tokens differ where the reference's\n" +
			"top-1/top-2 gap is at least --gap. Quantised weights see activations rounded to 8 bits: an activation\n" +
			"on a rounding boundary may round the other way after float sums in another order, which moves logits\n" +
			"by up to ~0.1-1 in small random models; for them --tol-quant applies and the greedy ids must agree.\n" +
			"F16/BF16 weights round activations to 16 bits, and an f16 KV cache rounds K and V, the same way\n" +
			"(by up to ~1e-2): --tol-half applies.",
		UsageText: "generate parity -m MODEL -p TEXT -n N [--backends cpu,opencl] [--llamacpp auto]",
		Flags:     flags,
		Action:    runParity,
	}
}

// runParity feeds every backend the same tokens (the reference's greedy
// choice, so they never drift apart) and compares the logits of each step.
func runParity(c *cli.Context) error {
	names := strings.Split(c.String("backends"), ",")
	peerDir := c.String("llamacpp")
	if len(names) < 2 && peerDir == "" {
		return fmt.Errorf("--backends %q: name at least two (or one with --llamacpp)", c.String("backends"))
	}
	if peerDir == "auto" {
		d, err := peer.Find()
		if err != nil {
			return err
		}
		peerDir = d
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
	switch {
	case models[0].Quantized:
		tol = c.Float64("tol-quant")
	case models[0].HalfWeights || c.String("cache-type-k") != "f32" || c.String("cache-type-v") != "f32":
		// Activations of F16/BF16 weights round to that type, and K and V
		// to f16 as they are stored: a value on a rounding boundary may
		// round the other way after float sums in another order (and the
		// cache keeps such a value for every later step).
		tol = c.Float64("tol-half")
	}
	var worst float64
	failed := 0
	batch := prompt
	sessions := make([]*engine.Session, len(models))
	for i, l := range models {
		if sessions[i], err = l.NewSession(engine.SessionOptions{}); err != nil {
			return fmt.Errorf("%s: %w", names[i], err)
		}
	}
	ctx := context.Background()
	var rows [][]float32 // the first backend's logits, for llama.cpp
	var fed []int32
	for step := 0; step < c.Int("n-predict"); step++ {
		for i, s := range sessions {
			if err := s.Prefill(ctx, batch); err != nil {
				return fmt.Errorf("%s: step %d: %w", names[i], step, err)
			}
			if err := s.Logits(ctx, logits[i]); err != nil {
				return fmt.Errorf("%s: step %d: %w", names[i], step, err)
			}
		}
		ref := logits[0]
		top, gap := sample.TopGap(ref)
		if peerDir != "" {
			rows, fed = append(rows, slices.Clone(ref)), append(fed, top)
		}
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
	if len(models) > 1 {
		tw.Flush()
		fmt.Printf("worst max|Δlogit| %.3g over the run; %d failing steps\n", worst, failed)
	}
	if peerDir != "" {
		ok, err := parityPeer(c, peerDir, prompt, fed, rows, names[0])
		if err != nil {
			return err
		}
		if !ok {
			failed++
		}
	}
	if failed > 0 {
		return cli.Exit("", 2)
	}
	return nil
}

// parityPeer runs llama.cpp forced along the first backend's greedy ids and
// prints the step-by-step table of the fidelity issue: max |Δlogit|, the
// mean signed difference (a systematic shift shows there), both argmaxes
// and llama.cpp's top-1/top-2 gap. It passes when at least 95% of steps
// are within --tol-llamacpp and the argmaxes agree except at near-ties
// (gap < 0.05).
func parityPeer(c *cli.Context, dir string, prompt, fed []int32, rows [][]float32, name string) (bool, error) {
	ctk, ctv := c.String("cache-type-k"), c.String("cache-type-v")
	k, err := kvcache.ParseType(ctk)
	if err != nil {
		return false, err
	}
	v, err := kvcache.ParseType(ctv)
	if err != nil {
		return false, err
	}
	flash, err := kvcache.Flash(c.String("flash-attn"), k, v)
	if err != nil {
		return false, err
	}
	ref, err := peer.Forced(dir, c.String("model"), prompt, fed, peer.KV{K: ctk, V: ctv, Flash: flash}, len(rows[0]))
	if err != nil {
		return false, err
	}
	steps, err := peer.Compare(rows, ref)
	if err != nil {
		return false, err
	}
	tol := c.Float64("tol-llamacpp")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "step\tmax|Δlogit| vs llama.cpp\tmean Δ\ttop-1 (%s, llama.cpp)\tgap\tresult\n", name)
	ok, flips := true, 0
	var worst, shift float64
	for i, s := range steps {
		worst, shift = math.Max(worst, s.MaxDiff), shift+s.MeanDiff/float64(len(steps))
		result := "ok"
		switch {
		case s.Top != s.PeerTop && s.Gap >= 0.05:
			result, ok = "FAIL: top-1 differs", false
		case s.Top != s.PeerTop:
			result, flips = "flip at a near-tie", flips+1
		case s.MaxDiff > tol:
			result = fmt.Sprintf("> %g", tol)
		}
		fmt.Fprintf(tw, "%d\t%.3g\t%+.2g\t%d, %d\t%.3g\t%s\n", i, s.MaxDiff, s.MeanDiff, s.Top, s.PeerTop, s.Gap, result)
	}
	tw.Flush()
	within := peer.Within(steps, tol)
	if within < 0.95 {
		ok = false
	}
	fmt.Printf("llama.cpp (%s/%s KV cache, flash attention %v): %.0f%% of %d steps within %g (95%% needed), worst %.3g, mean shift %+.2g, %d near-tie flips\n",
		ctk, ctv, flash, 100*within, len(steps), tol, worst, shift, flips)
	return ok, nil
}
