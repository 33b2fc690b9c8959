package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/grammar"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/numerics"
	"github.com/glint-llm/glint/sample"
)

// modelFlags are shared by every command that loads a model.
func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "GGUF file, Hugging Face directory, or (-b onnx) ONNX model directory"},
		&cli.StringFlag{Name: "backend", Aliases: []string{"b"}, Value: "cpu", Usage: "cpu, opencl or onnx"},
		&cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Usage: "CPU threads (0: all cores)"},
		&cli.StringFlag{Name: "device", Usage: "OpenCL device: index or name substring (default: first GPU, else first device)"},
		tuneFlag(),
		&cli.IntFlag{Name: "ctx-size", Aliases: []string{"c"}, Value: 4096, Usage: "context size in tokens (0: the model's)"},
		&cli.StringFlag{Name: "ort-lib", Usage: "path of libonnxruntime.so (default: $ONNXRUNTIME_LIB, then third_party/onnxruntime)"},
		cacheTypeFlag("k"), cacheTypeFlag("v"), flashAttnFlag(),
	}
}

// tuneFlag is --tune: the OpenCL kernels' variant and GEMM work-groups, for
// benchmarks (glint.Options.Tune).
func tuneFlag() cli.Flag {
	return &cli.StringFlag{Name: "tune", Usage: "OpenCL kernels for a benchmark: comma-separated native, portable, no-dot4, no-subgroups, no-fp16, cpu, gpu, gemm=N (16…256 work-items); same results"}
}

// cacheTypeFlag is --cache-type-k or -v (-ctk, -ctv), as llama.cpp names them.
func cacheTypeFlag(kv string) cli.Flag {
	return &cli.StringFlag{Name: "cache-type-" + kv, Aliases: []string{"ct" + kv}, Value: "f16",
		Usage: "KV cache type of " + map[string]string{"k": "keys", "v": "values"}[kv] + ": " + kvcache.TypeNames +
			" (f16: as llama.cpp's default; a type other than f32/f16 needs flash attention)"}
}

// flashAttnFlag is -fa/--flash-attn, as llama.cpp spells it.
func flashAttnFlag() cli.Flag {
	return &cli.StringFlag{Name: "flash-attn", Aliases: []string{"fa"}, Value: "auto",
		Usage: "flash attention: on, off, or auto (on exactly when a KV cache type is neither f32 nor f16)"}
}

func promptFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "prompt text"},
		&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the prompt from a file"},
		&cli.StringFlag{Name: "prompt-ids", Usage: "prompt as token ids (1,2,3) instead of text"},
		&cli.IntFlag{Name: "n-predict", Aliases: []string{"n"}, Value: 128, Usage: "tokens to generate (-1: until an end token, or a full context with --no-context-shift)"},
	}
}

func samplingFlags() []cli.Flag {
	d := sample.Defaults()
	return []cli.Flag{
		&cli.Float64Flag{Name: "temp", Value: f64(d.Temp), Usage: "temperature (0: greedy)"},
		&cli.IntFlag{Name: "top-k", Value: d.TopK, Usage: "top-k (0: off)"},
		&cli.Float64Flag{Name: "top-p", Value: f64(d.TopP), Usage: "top-p (1: off; 0: only the most probable token)"},
		&cli.Float64Flag{Name: "min-p", Value: f64(d.MinP), Usage: "min-p (0: off)"},
		&cli.Float64Flag{Name: "repeat-penalty", Value: f64(d.RepeatPenalty), Usage: "repetition penalty (1: off)"},
		&cli.IntFlag{Name: "repeat-last-n", Value: d.RepeatLastN, Usage: "tokens the penalty looks back on"},
		&cli.StringFlag{Name: "seed", Aliases: []string{"s"}, Value: "-1", Usage: "random seed (-1: from the clock)"},
	}
}

func generateFlags() []cli.Flag {
	fl := append(modelFlags(), promptFlags()...)
	fl = append(fl, samplingFlags()...)
	fl = append(fl, grammarFlags()...)
	fl = append(fl,
		&cli.StringFlag{Name: "dump-logits", Usage: "write each step's logits (little-endian float32, one vocab row per step) to this file"},
		&cli.StringFlag{Name: "output", Value: "text", Usage: "text, or ids (the generated ids, space-separated)"},
		&cli.GenericFlag{Name: "stop", Value: &stopList{}, Usage: "stop when the text ends with this string, printing none of it (repeatable)"},
		&cli.BoolFlag{Name: "ignore-eos", Usage: "do not stop at end-of-generation tokens (EOS, EOT, <|im_end|>, …)"},
	)
	fl = append(fl, specFlags()...)
	return append(fl, contextShiftFlags()...)
}

// contextShiftFlags are llama.cpp's --keep and --no-context-shift.
func contextShiftFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "keep", Usage: "tokens of the prompt a context shift keeps, after the BOS (-1: all of it)"},
		&cli.BoolFlag{Name: "no-context-shift", Usage: "stop when the context is full instead of discarding half of it (keeping --keep) and going on"},
	}
}

// loadOpts are the model options the flags give; the numerics (kernel level,
// llama.cpp flavour) come from GLINT_CPU_SIMD and GLINT_GGML_FLAVOR, read
// here and nowhere below, so that scripts compare levels and builds on one
// machine.
func loadOpts(c *cli.Context) glint.Options {
	return glint.Options{Numerics: numerics.FromEnv(),
		Backend: c.String("backend"), Threads: c.Int("threads"),
		Device: c.String("device"), Tune: c.String("tune"), Context: c.Int("ctx-size"), OrtLib: c.String("ort-lib"),
		CacheTypeK: c.String("cache-type-k"), CacheTypeV: c.String("cache-type-v"), FlashAttn: c.String("flash-attn"),
		Spec: specOpts(c),
	}
}

func samplerParams(c *cli.Context) (sample.Params, error) {
	seed := uint64(time.Now().UnixNano())
	if s := c.String("seed"); s != "-1" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return sample.Params{}, fmt.Errorf("--seed %q: not a number", s)
		}
		seed = v
	}
	return sample.Params{
		Temp: float32(c.Float64("temp")), TopK: c.Int("top-k"), TopP: float32(c.Float64("top-p")),
		MinP: float32(c.Float64("min-p")), RepeatPenalty: float32(c.Float64("repeat-penalty")),
		RepeatLastN: c.Int("repeat-last-n"), Seed: seed,
	}, nil
}

// promptIDs turns the prompt flags into token ids.
func promptIDs(c *cli.Context, l *glint.Model) ([]int32, error) {
	if s := c.String("prompt-ids"); s != "" {
		return parseIDs(s)
	}
	text := c.String("prompt")
	if f := c.String("file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		text = string(b)
	}
	if l.Tokenizer == nil {
		return nil, fmt.Errorf("%s has no tokenizer: give the prompt with --prompt-ids", c.String("model"))
	}
	return l.Tokenizer.Encode(text, true), nil
}

func runGenerate(c *cli.Context) error {
	if c.NArg() > 0 {
		if c.NumFlags() == 0 {
			return usageError("unknown command %q", c.Args().First())
		}
		return usageError("unexpected argument %q (the prompt goes in -p)", c.Args().First())
	}
	if c.String("model") == "" {
		return cli.ShowAppHelp(c)
	}
	out := c.String("output")
	if out != "text" && out != "ids" {
		return fmt.Errorf("--output %q: want text or ids", out)
	}
	sp, err := samplerParams(c)
	if err != nil {
		return err
	}
	gr, err := grammarOf(c)
	if err != nil {
		return err
	}
	l, err := openModel(loadOpts(c), c.String("model"), false)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(os.Stderr, "%s (loaded in %d ms)\n", l.Info, l.LoadTime.Milliseconds())
	prompt, err := promptIDs(c, l)
	if err != nil {
		return err
	}
	if out == "text" && l.Tokenizer == nil {
		return fmt.Errorf("%s has no tokenizer: use --output ids", c.String("model"))
	}
	if len(prompt) > l.Context() {
		return fmt.Errorf("%s: prompt of %d tokens is longer than the context of %d tokens (-c)", c.String("model"), len(prompt), l.Context())
	}

	opt := engine.Options{MaxTokens: c.Int("n-predict"), Sampler: sample.New(sp, l.Vocab()), Stop: stopStrings(c),
		Session: engine.SessionOptions{ContextShift: !c.Bool("no-context-shift"), Keep: keepTokens(c.Int("keep"), prompt, l)}}
	if f := c.String("dump-logits"); f != "" {
		df, err := os.Create(f)
		if err != nil {
			return err
		}
		bw := bufio.NewWriter(df)
		defer func() { bw.Flush(); df.Close() }()
		opt.Hooks.Logits = dumpLogits(bw, l.Vocab())
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if !c.Bool("ignore-eos") {
		opt.EOG = l.IsEOG
	}
	// The generator sees the text even with --output ids, where the token
	// that completes a stop string is the first one left out.
	if out == "text" || len(opt.Stop) > 0 {
		if l.Tokenizer == nil {
			return fmt.Errorf("%s has no tokenizer: --stop needs one", c.String("model"))
		}
		opt.Tokenizer = l.Tokenizer
	}
	if gr != nil {
		if l.Tokenizer == nil {
			return fmt.Errorf("%s: %w", c.String("model"), errGrammarNeedsTokenizer)
		}
		if err := grammar.Constrain(&opt, grammar.NewMatcher(gr, grammar.TrieFor(l.Tokenizer))); err != nil {
			return err
		}
	}
	first := true
	opt.OnToken = func(t engine.Token) error {
		if out == "text" {
			w.WriteString(t.Text)
			return w.Flush()
		}
		if t.ID < 0 || t.Finish == engine.FinishStop {
			return nil
		}
		if !first {
			w.WriteByte(' ')
		}
		first = false
		fmt.Fprint(w, t.ID)
		return w.Flush()
	}
	spec, done, err := l.Speculation()
	if err != nil {
		return err
	}
	defer done()
	opt.Speculative = spec
	tm, err := engine.Generate(context.Background(), l.Engine, prompt, opt)
	if out == "ids" {
		w.WriteByte('\n')
	}
	if err != nil {
		return err
	}
	if tm.ContextFull {
		fmt.Fprintf(os.Stderr, "context full after %d tokens (-c %d)\n", len(tm.Generated), l.Context())
	} else if tm.Shifts > 0 {
		fmt.Fprintf(os.Stderr, "context shifted %d times (-c %d, --keep %d)\n", tm.Shifts, l.Context(), c.Int("keep"))
	}
	printTiming(tm)
	if spec != nil {
		printSpeculative(os.Stderr, tm)
	}
	return nil
}

// keepTokens is llama-cli's n_keep: --keep N of the prompt's tokens after its
// BOS (when the vocabulary adds one), or the whole prompt for -1 or more than
// it holds.
func keepTokens(keep int, prompt []int32, l *glint.Model) int {
	if keep < 0 || keep > len(prompt) {
		return len(prompt)
	}
	if l.Tokenizer != nil && l.Tokenizer.AddBOS() {
		keep++
	}
	return keep
}

func printTiming(tm engine.Timing) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Fprintf(os.Stderr, "\nprompt: %d tokens, generated: %d tokens\n", tm.PromptTokens, len(tm.Generated))
	fmt.Fprintf(os.Stderr, "TTFT: %.2f ms\n", ms(tm.TTFT))
	if avg := tm.AvgTBT(); avg > 0 {
		fmt.Fprintf(os.Stderr, "Avg TBT: %.2f ms (%.2f tokens/sec)\n", ms(avg), 1/avg.Seconds())
	} else {
		fmt.Fprintf(os.Stderr, "Avg TBT: n/a (fewer than 2 tokens)\n")
	}
}

// f64 widens a float32 to the float64 with the same shortest decimal form,
// so that help shows 0.8, not 0.800000011920929.
func f64(x float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return v
}

// stopList collects --stop strings exactly as given: a slice flag would
// split them at commas and trim their spaces, and both can be part of a
// stop string.
type stopList []string

func (s *stopList) Set(v string) error { *s = append(*s, v); return nil }
func (s *stopList) String() string     { return strings.Join(*s, " ") }

func stopStrings(c *cli.Context) []string {
	if s, ok := c.Generic("stop").(*stopList); ok {
		return *s
	}
	return nil
}

// dumpLogits is the Logits hook of --dump-logits: each step's logits as one
// row of little-endian float32s.
func dumpLogits(w io.Writer, vocab int) func([]float32) error {
	row := make([]byte, 4*vocab)
	return func(logits []float32) error {
		for i, v := range logits {
			binary.LittleEndian.PutUint32(row[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(row); err != nil {
			return fmt.Errorf("dump logits: %w", err)
		}
		return nil
	}
}
