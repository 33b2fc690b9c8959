package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/engine"
)

func batchedBenchCommand() *cli.Command {
	fl := append(modelFlags(),
		&cli.StringFlag{Name: "parallel", Aliases: []string{"npl"}, Value: "1,2,4,8", Usage: "numbers of sequences decoding together"},
		&cli.IntFlag{Name: "n-prompt", Aliases: []string{"npp"}, Value: 16, Usage: "prompt tokens per sequence"},
		&cli.IntFlag{Name: "n-gen", Aliases: []string{"ntg"}, Value: 32, Usage: "tokens each sequence generates"},
		&cli.IntFlag{Name: "runs", Value: 3, Usage: "runs of every count, alternated (medians are shown)"},
		&cli.StringFlag{Name: "kv-layout", Value: "unified", Usage: "unified or per-stream"},
		&cli.BoolFlag{Name: "profile", Usage: "also time each op kind per decode step, in one more run of every count (ops synchronised one by one; OpenCL: launches timed on the device, fused ones by name)"},
	)
	return &cli.Command{
		Name:  "batched-bench",
		Usage: "aggregate decode speed of 1, 2, 4, 8 sequences decoding together (a benchmark, llama-batched-bench's idea)",
		UsageText: "generate batched-bench -m MODEL [-t 2] [--npl 1,2,4,8] [--npp 16] [--ntg 32] [--runs 3] [--kv-layout unified] [--profile]\n\n" +
			"The model is loaded once with as many sequences as the largest count. For each count N, N sessions\n" +
			"prefill their own prompt, then each generates --ntg tokens greedily from its own goroutine; the\n" +
			"engine's scheduler puts their steps into shared batches. The decode time runs from the first\n" +
			"token after the prefills to the last; aggregate tokens/s is N·(ntg-1) over it (the first token of\n" +
			"each comes from its prefill's logits, so ntg-1 decode steps run).",
		Flags:  fl,
		Action: runBatchedBench,
	}
}

func runBatchedBench(c *cli.Context) error {
	if c.String("model") == "" {
		return usageError("batched-bench: -m MODEL is required")
	}
	var counts []int
	for _, f := range strings.Split(c.String("parallel"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return usageError("batched-bench: --parallel %q: want counts ≥ 1 like 1,2,4,8", c.String("parallel"))
		}
		counts = append(counts, n)
	}
	npp, ntg, runs := c.Int("n-prompt"), c.Int("n-gen"), max(c.Int("runs"), 1)
	if npp < 1 || ntg < 2 {
		return usageError("batched-bench: --npp must be ≥ 1 and --ntg ≥ 2")
	}
	o := loadOpts(c)
	o.Seqs, o.KVLayout = slices.Max(counts), c.String("kv-layout")
	var prof *backend.ProfiledBackend
	if c.Bool("profile") {
		o.Wrap = func(b backend.Backend) backend.Backend {
			prof = backend.Profiled(b)
			prof.SetEnabled(false)
			return prof
		}
	}
	m, err := openModel(o, c.String("model"), false)
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(os.Stderr, "%s (loaded in %d ms)\n", m.Info, m.LoadTime.Milliseconds())
	if need := npp + ntg; need > m.Context() {
		return fmt.Errorf("batched-bench: %d prompt + %d generated tokens do not fit a sequence's context of %d (-c)", npp, ntg, m.Context())
	}
	times := make([][]time.Duration, len(counts))
	for r := range runs {
		for k := range counts {
			i := k
			if r%2 == 1 { // alternate the order, so that drift favours none
				i = len(counts) - 1 - k
			}
			d, err := decodeTogether(m, counts[i], npp, ntg, nil)
			if err != nil {
				return err
			}
			times[i] = append(times[i], d)
			fmt.Fprintf(os.Stderr, "run %d: %d sequences: %.1f ms\n", r+1, counts[i], float64(d.Microseconds())/1000)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sequences\tdecode ms (median)\tms per step\taggregate tok/s\tvs one\t")
	steps := ntg - 1 // the first token comes from the prefill's logits
	var one float64
	for i, n := range counts {
		slices.Sort(times[i])
		med := times[i][len(times[i])/2]
		tps := float64(n*steps) / med.Seconds()
		if one == 0 || n == 1 {
			one = tps / float64(n)
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.2f\t%.1f\t%.2f×\t\n", n, float64(med.Microseconds())/1000,
			float64(med.Microseconds())/1000/float64(steps), tps, tps/one)
	}
	if err := tw.Flush(); err != nil || prof == nil {
		return err
	}
	return profileSteps(m, prof, counts, npp, ntg)
}

// profileSteps runs every count once more with prof timing the decode's
// ops, and prints their milliseconds per decode step by kind.
func profileSteps(m *glint.Model, prof *backend.ProfiledBackend, counts []int, npp, ntg int) error {
	profiles := make([]map[string]time.Duration, len(counts))
	for i, n := range counts {
		_, err := decodeTogether(m, n, npp, ntg, func() { prof.Reset(); prof.SetEnabled(true) })
		prof.SetEnabled(false)
		if err != nil {
			return err
		}
		profiles[i] = prof.Profile()
	}
	fmt.Println("\nms per decode step by op (one more run each; ops synchronised one by one, or OpenCL launches timed on the device, fused ones by name):")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	kinds := backend.Kinds(profiles...)
	fmt.Fprint(tw, "sequences\t")
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t", k)
	}
	fmt.Fprintln(tw, "total\t")
	steps := float64(ntg - 1)
	for i, n := range counts {
		p := profiles[i]
		var total time.Duration
		fmt.Fprintf(tw, "%d\t", n)
		for _, k := range kinds {
			total += p[k]
			fmt.Fprintf(tw, "%.2f\t", float64(p[k].Microseconds())/1000/steps)
		}
		fmt.Fprintf(tw, "%.2f\t\n", float64(total.Microseconds())/1000/steps)
	}
	return tw.Flush()
}

// decodeTogether opens n sessions, prefills each with its own prompt of npp
// tokens, then has each generate ntg tokens greedily from its own goroutine,
// and returns the time from the start of decoding to the last token.
// started, if not nil, is called between the prefills and the decoding.
func decodeTogether(m *glint.Model, n, npp, ntg int, started func()) (time.Duration, error) {
	ctx := context.Background()
	sessions := make([]*engine.Session, n)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.Close()
			}
		}
	}()
	vocab := m.Vocab()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range sessions {
		s, err := m.NewSession(engine.SessionOptions{})
		if err != nil {
			return 0, err
		}
		sessions[i] = s
		prompt := make([]int32, npp)
		for j := range prompt {
			prompt[j] = int32((1 + 7919*i + 104729*j) % vocab)
		}
		wg.Go(func() { errs[i] = s.Prefill(ctx, prompt) })
	}
	wg.Wait()
	if started != nil {
		started()
	}
	start := time.Now()
	for i, s := range sessions {
		wg.Go(func() {
			for range ntg {
				if _, err := s.Next(ctx); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return d, nil
}
