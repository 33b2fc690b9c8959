package cpu_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/numerics"
)

// matmulLog wraps a backend and records, for every MatMulTransposed, the
// activations the matmul sees (x rounded by dtype.RoundActivations to the
// weight's activation type) and what it produced.
type matmulLog struct {
	backend.Backend
	calls []matmulCall
}

type matmulCall struct {
	weight    string // type and shape, for messages
	acts, out []float32
}

func (l *matmulLog) MatMulTransposed(dst, x, w backend.Tensor, n int) {
	k, m := backend.Cols(w), backend.Rows(w)
	xs := make([]float32, n*k)
	if err := l.Backend.ReadF32(x, 0, xs); err != nil {
		panic(err) // a test helper: the test fails with the trace
	}
	at := w.DType().ActivationType()
	for i := range n {
		dtype.RoundActivations(at, xs[i*k:(i+1)*k], xs[i*k:(i+1)*k])
	}
	l.Backend.MatMulTransposed(dst, x, w, n)
	out := make([]float32, n*m)
	if err := l.Backend.ReadF32(dst, 0, out); err != nil {
		panic(err)
	}
	l.calls = append(l.calls, matmulCall{fmt.Sprintf("%v %v n=%d", w.DType(), w.Shape(), n), xs, out})
}

// levelRun is what one kernel level computed for a prompt and the greedy
// steps after it.
type levelRun struct {
	calls  []matmulCall
	logits [][]float32
	ids    []int32
}

func runAtLevel(t *testing.T, path, level string, cache dtype.Type, prompt []int32, steps int) levelRun {
	t.Helper()
	b, err := cpu.NewWith(cpu.Options{Threads: 2, Numerics: numerics.Options{Level: level, Flavour: numerics.FromEnv().Flavour}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lg := &matmulLog{Backend: b}
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := layers.Load(lg, f.Config, f.Source, layers.Options{Context: 128, CacheK: cache, CacheV: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var r levelRun
	tokens, pos, id := prompt, 0, make([]int32, 1)
	for range steps + 1 {
		if err := m.Decode(engine.Batch(0, pos, tokens)); err != nil {
			t.Fatal(err)
		}
		pos += len(tokens)
		logits := make([]float32, m.Vocab())
		if err := m.Logits(0, logits); err != nil {
			t.Fatal(err)
		}
		if err := m.Argmax(id); err != nil {
			t.Fatal(err)
		}
		r.logits = append(r.logits, logits)
		r.ids = append(r.ids, id[0])
		tokens = []int32{id[0]}
	}
	r.calls = lg.calls
	return r
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestModelLevelsBitExact runs quantised models (and an F16 one) through a 20-token prefill and greedy decode steps
// at every kernel level this CPU runs, and demands the portable level's
// bits for the rounded activations every matmul sees, every matmul's
// output, and the logits. The first difference names its kind: a matmul
// whose rounded inputs agree but whose output differs is a matmul kernel's
// fault; inputs that differ after identical matmul outputs come from the
// ops between matmuls (norms, attention, SiLU), which must agree as well.
func TestModelLevelsBitExact(t *testing.T) {
	levels := cpu.Levels()
	if len(levels) < 2 {
		t.Skip("only the portable kernels run on this CPU")
	}
	syn := filepath.Join(t.TempDir(), "small-Q4_0.gguf")
	// The Q4_0 mix of the 256-wide "small" shape has a Q6_K embedding and
	// head; a large std makes the random model sensitive to any flip.
	if err := synth.WriteGGUF(syn, synth.Options{Shape: "small", Type: "Q4_0", Seed: 5, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	models := []struct{ name, path string }{
		{"llama3-tiny-Q4_0", ""}, {"llama3-tiny-Q8_0", ""}, {"llama3-tiny-F16", ""}, {"synth-small-Q4_0", syn},
	}
	prompt := make([]int32, 20)
	for i := range prompt {
		prompt[i] = int32(1 + 37*i%200)
	}
	for _, mc := range models {
		for _, cache := range []dtype.Type{dtype.F32, dtype.F16} {
			t.Run(fmt.Sprintf("%s/cache=%v", mc.name, cache), func(t *testing.T) {
				path := mc.path
				if path == "" {
					path = shared.Models(t, "llama3-tiny/"+mc.name+".gguf")
				}
				ref := runAtLevel(t, path, levels[0], cache, prompt, 4)
				if len(ref.calls) == 0 {
					t.Fatal("no matmul went through the wrapper")
				}
				for _, level := range levels[1:] {
					got := runAtLevel(t, path, level, cache, prompt, 4)
					if len(got.calls) != len(ref.calls) {
						t.Fatalf("%s: %d matmuls, go level %d", level, len(got.calls), len(ref.calls))
					}
					for i, c := range got.calls {
						r := ref.calls[i]
						if j := sameBits(c.acts, r.acts); j >= 0 {
							t.Fatalf("%s: matmul %d (%s): rounded activation %d is %v, go level %v; every matmul before it agreed, so an op between matmuls differs",
								level, i, c.weight, j, c.acts[j], r.acts[j])
						}
						if j := sameBits(c.out, r.out); j >= 0 {
							t.Fatalf("%s: matmul %d (%s): output %d is %v, go level %v, from identical rounded activations",
								level, i, c.weight, j, c.out[j], r.out[j])
						}
					}
					for s := range got.logits {
						if j := sameBits(got.logits[s], ref.logits[s]); j >= 0 {
							t.Fatalf("%s: step %d: logit %d is %v, go level %v", level, s, j, got.logits[s][j], ref.logits[s][j])
						}
					}
					for s := range got.ids {
						if got.ids[s] != ref.ids[s] {
							t.Fatalf("%s: step %d: id %d, go level %d", level, s, got.ids[s], ref.ids[s])
						}
					}
				}
			})
		}
	}
}
