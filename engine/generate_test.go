package engine_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/sample"
)

// sleepy is a real model whose Decode takes at least a known time: prefill
// (more than one token) sleeps longer than a single-token step, so the
// timings Generate reports can be checked against what must have elapsed.
type sleepy struct {
	engine.Model
	prefill, gen time.Duration
}

func (s sleepy) Decode(batch []engine.Item) error {
	if len(batch) > 1 {
		time.Sleep(s.prefill)
	} else {
		time.Sleep(s.gen)
	}
	return s.Model.Decode(batch)
}

// tinyModel loads a synthetic tiny F32 Llama on the CPU backend.
func tinyModel(t *testing.T) *layers.Model {
	return synthModel(t, "F32", 3, layers.Options{Context: 64})
}

// synthModel writes the tiny synthetic Llama of weight type typ and seed and
// loads it on a CPU backend of one thread.
func synthModel(t testing.TB, typ string, seed uint64, o layers.Options) *layers.Model {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: typ, Seed: seed, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	f, err := load.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	b := cpu.New(1)
	t.Cleanup(func() { b.Close() })
	m, err := layers.Load(b, f.Config, f.Source, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// newEngine starts an engine over m, closed with the test.
func newEngine(t testing.TB, m engine.Model) *engine.Engine {
	e := engine.New(m)
	t.Cleanup(func() { e.Close() })
	return e
}

// newSession opens a session, closed with the test.
func newSession(t testing.TB, e *engine.Engine, o engine.SessionOptions) *engine.Session {
	t.Helper()
	s, err := e.NewSession(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The numbers are honest: TTFT covers prefill, and the gaps are the time
// between tokens after the first, so the first token (and its prefill) is
// never among them. Only lower bounds on sleeps are asserted, plus one
// upper bound with a wide margin (a gap under the prefill sleep), so a
// loaded machine cannot make it flaky.
func TestTimingIsHonest(t *testing.T) {
	const prefill, gen = 150 * time.Millisecond, 15 * time.Millisecond
	e := newEngine(t, sleepy{Model: tinyModel(t), prefill: prefill, gen: gen})
	prompt := []int32{1, 5, 9, 12}
	tests := []struct {
		name     string
		max      int
		stopAt   int // the call of EOG (1-based) that ends it; 0: never
		wantToks int
	}{
		{"one token", 1, 0, 1},
		{"two tokens", 2, 0, 2},
		{"five tokens", 5, 0, 5},
		{"stopped by the third token", 6, 3, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, e, engine.SessionOptions{})
			calls := 0
			o := engine.Options{MaxTokens: tc.max, EOG: func(int32) bool {
				calls++
				return calls == tc.stopAt
			}}
			tm, err := s.Generate(context.Background(), prompt, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(tm.Generated) != tc.wantToks {
				t.Fatalf("generated %d tokens, want %d", len(tm.Generated), tc.wantToks)
			}
			if tm.PromptTokens != len(prompt) {
				t.Errorf("PromptTokens = %d, want %d", tm.PromptTokens, len(prompt))
			}
			if len(tm.Gaps) != len(tm.Generated)-1 {
				t.Fatalf("%d gaps for %d tokens, want one fewer", len(tm.Gaps), len(tm.Generated))
			}
			if tm.TTFT < prefill {
				t.Errorf("TTFT %v < the prefill's %v: prefill is not in it", tm.TTFT, prefill)
			}
			for i, g := range tm.Gaps {
				if g < gen {
					t.Errorf("gap %d = %v < the step's %v", i, g, gen)
				}
				if g >= prefill {
					t.Errorf("gap %d = %v ≥ the prefill's %v: the first token is counted as a gap", i, g, prefill)
				}
			}
			if len(tm.Gaps) > 0 {
				var sum time.Duration
				for _, g := range tm.Gaps {
					sum += g
				}
				if avg := tm.AvgTBT(); avg != sum/time.Duration(len(tm.Gaps)) {
					t.Errorf("AvgTBT %v, want the mean %v", avg, sum/time.Duration(len(tm.Gaps)))
				}
			}
			if s.Len() != len(prompt)+tc.wantToks {
				t.Errorf("session holds %d tokens after %d prompt + %d generated tokens", s.Len(), len(prompt), tc.wantToks)
			}
		})
	}
}

// TestContinueMatchesOneRun: generating N tokens and then continuing with a
// new token gives what one run over the whole text gives, which needs the
// session to keep the N-th chosen token. The continuation feeds one token at
// a time, the single run prefills them together; on F32 the logits agree to
// rounding (1e-4).
func TestContinueMatchesOneRun(t *testing.T) {
	e := newEngine(t, synthModel(t, "F32", 3, layers.Options{Context: 64, Seqs: 2}))
	s := newSession(t, e, engine.SessionOptions{})
	ctx := context.Background()
	prompt := []int32{1, 5, 9, 12}
	const n, more = 5, 6
	first, err := s.Generate(ctx, prompt, engine.Options{MaxTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(prompt)+n {
		t.Fatalf("session holds %d tokens after %d prompt + %d generated tokens", s.Len(), len(prompt), n)
	}
	next := []int32{7}
	var contLogits []float32
	cont, err := s.Generate(ctx, next, engine.Options{MaxTokens: more, Sampler: sample.New(sample.Params{RepeatPenalty: 1}, e.Vocab()), Hooks: keepLogits(&contLogits)})
	if err != nil {
		t.Fatal(err)
	}

	whole := append(append(append([]int32{}, prompt...), first.Generated...), next...)
	var oneLogits []float32
	one, err := engine.Generate(ctx, e, whole, engine.Options{MaxTokens: more, Sampler: sample.New(sample.Params{RepeatPenalty: 1}, e.Vocab()), Hooks: keepLogits(&oneLogits)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cont.Generated, one.Generated) {
		t.Fatalf("continued run %v, one run %v", cont.Generated, one.Generated)
	}
	a, b := contLogits, oneLogits
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d and %d logits kept", len(a), len(b))
	}
	for i, x := range a {
		if d := math.Abs(float64(x - b[i])); d > 1e-4 {
			t.Fatalf("logit %d: continued %v, one run %v", i, x, b[i])
		}
	}
}

// keepLogits is a Logits hook appending each step's logits to *dst.
func keepLogits(dst *[]float32) engine.Hooks {
	return engine.Hooks{Logits: func(l []float32) error {
		*dst = append(*dst, l...)
		return nil
	}}
}
