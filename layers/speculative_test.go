package layers_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/cltest"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/sample"
)

// specPair is a target model and the draft model that drafts for it.
type specPair struct{ name, target, draft string }

// specPairs writes the synth models of the speculative tests: an F16
// target drafted by its Q4_0 quantisation, and a Q8_0 one drafted by the
// same Q4_0 file (one seed: the same weights before rounding).
func specPairs(t *testing.T) []specPair {
	dir := t.TempDir()
	path := func(typ string) string {
		p := filepath.Join(dir, typ+".gguf")
		if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: typ, Seed: 11, Std: 0.08}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	q4 := path("Q4_0")
	return []specPair{{"F16-by-Q4_0", path("F16"), q4}, {"Q8_0-by-Q4_0", path("Q8_0"), q4}}
}

// engineOn loads path on b with a cache of ct and starts an engine over it
// (which owns the model from then on).
func engineOn(t *testing.T, b backend.Backend, path string, ct dtype.Type) *engine.Engine {
	t.Helper()
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 128, CacheK: ct, CacheV: ct, MaxOutputs: 8})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(m)
	t.Cleanup(func() { e.Close() })
	return e
}

// TestSpeculativeGreedyExact: greedy speculative decoding, a draft model's
// drafts verified in one step each, chooses plain decoding's ids over 32
// tokens, and every token's logits are plain decoding's to the bit —
// drafts accepted and rejected alike — on the CPU and on every OpenCL
// device, over f32 and f16 caches. The expectation is the same target
// decoded one token at a time.
func TestSpeculativeGreedyExact(t *testing.T) {
	pairs := specPairs(t)
	for _, ct := range []dtype.Type{dtype.F32, dtype.F16} {
		for _, p := range pairs {
			t.Run(fmt.Sprintf("cpu/%s/%v", p.name, ct), func(t *testing.T) {
				newB := func() backend.Backend {
					b := cpu.New(2)
					t.Cleanup(func() { b.Close() })
					return b
				}
				testSpeculativeGreedy(t, newB, p, ct, 32)
			})
		}
	}
	cltest.Run(t, func(t *testing.T, d opencl.DeviceInfo) {
		// PoCL is slow to launch: one pair, shorter on a second device.
		steps := 32
		if cltest.Trim(t, d) {
			steps = 12
		}
		for _, ct := range []dtype.Type{dtype.F32, dtype.F16} {
			t.Run(fmt.Sprintf("%s/%v", pairs[0].name, ct), func(t *testing.T) {
				testSpeculativeGreedy(t, func() backend.Backend { return cltest.New(t, d) }, pairs[0], ct, steps)
			})
		}
	})
}

func testSpeculativeGreedy(t *testing.T, newB func() backend.Backend, p specPair, ct dtype.Type, steps int) {
	ctx := context.Background()
	target := engineOn(t, newB(), p.target, ct)
	draft := engineOn(t, newB(), p.draft, ct)
	prompt := []int32{1, 20, 31, 42, 53, 64}

	// Plain decoding, one token a step, each step's logits kept.
	s, err := target.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prefill(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	var ids []int32
	var logits [][]float32
	for range steps {
		l := make([]float32, target.Vocab())
		if err := s.Logits(ctx, l); err != nil {
			t.Fatal(err)
		}
		id := sample.Argmax(l)
		ids, logits = append(ids, id), append(logits, l)
		s.Choose(id)
	}
	s.Close()

	for _, hooked := range []bool{false, true} {
		ds, err := draft.NewSession(engine.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		md := engine.NewModelDrafter(ds, 0)
		var seen [][]float32
		o := engine.Options{MaxTokens: steps, Speculative: &engine.Speculative{Drafter: md, Max: 5}}
		if hooked {
			// A hook reads every token's logits: the host's argmax of
			// them, not the device's, chooses.
			o.Hooks.Logits = func(l []float32) error {
				seen = append(seen, slices.Clone(l))
				return nil
			}
		}
		tm, err := engine.Generate(ctx, target, prompt, o)
		md.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tm.Generated, ids) {
			t.Fatalf("hooks %v: speculative ids\n%v\nplain\n%v", hooked, tm.Generated, ids)
		}
		if tm.Accepted == 0 || tm.Accepted == tm.Drafted {
			t.Errorf("hooks %v: %d of %d drafts accepted: the test wants both verdicts", hooked, tm.Accepted, tm.Drafted)
		}
		t.Logf("hooks %v: %d tokens in %d passes (drafted %d, accepted %d)", hooked, len(tm.Generated), tm.Passes, tm.Drafted, tm.Accepted)
		if !hooked {
			continue
		}
		if len(seen) != len(logits) {
			t.Fatalf("the hook saw %d rows of logits, plain decoding %d", len(seen), len(logits))
		}
		for i := range logits {
			for j := range logits[i] {
				if math.Float32bits(seen[i][j]) != math.Float32bits(logits[i][j]) {
					t.Fatalf("token %d: logit %d is %g, plain decoding's %g", i, j, seen[i][j], logits[i][j])
				}
			}
		}
	}
}
