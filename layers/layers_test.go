package layers_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/cltest"
	"github.com/glint-llm/glint/internal/fidelity"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/tokenizer"
)

// load opens a model file on a fresh CPU backend.
func openCPU(t testing.TB, path string, o layers.Options) *layers.Model {
	t.Helper()
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	b := cpu.New(2)
	t.Cleanup(func() { b.Close() })
	m, err := layers.Load(b, f.Config, f.Source, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// stories260K against an independent float64 implementation of the forward
// pass: F32 weights and F32 arithmetic differ from float64 by accumulated
// rounding only, well inside 1e-4 on logits of magnitude ~10.
func TestStories260KReference(t *testing.T) {
	ref := fidelity.StoriesRef(t)
	m := openCPU(t, ref.Path, layers.Options{Context: 512, Seqs: 2})
	s := &stream{m: m}
	for pos, want := range ref.Logits {
		if err := s.eval(ref.IDs[pos : pos+1]); err != nil {
			t.Fatal(err)
		}
		logits := s.logits(t)
		for i := range want {
			if d := math.Abs(float64(logits[i] - want[i])); d > 1e-4 {
				t.Fatalf("position %d logit %d: %g, want %g (|Δ| %g > 1e-4)", pos, i, logits[i], want[i], d)
			}
		}
	}
	got := greedy(t, &stream{m: m, seq: 1}, ref.IDs[:1], ref.NGenerated)
	want := ref.IDs[1:]
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("greedy ids diverge at step %d:\ngot  %v\nwant %v", i, got, want)
		}
	}
}

// Every llama.cpp record, on the CPU and on every OpenCL device: the
// tokenizer gives its prompt ids and greedy decoding its generated ids
// (near-ties excepted, see fidelity.NearTie), with an f16 KV cache as
// llama.cpp had. A second OpenCL device checks the first 16 ids only.
func TestLlamaCppGreedy(t *testing.T) {
	recs := fidelity.All(t)
	t.Run("cpu", func(t *testing.T) {
		for _, rec := range recs {
			t.Run(rec.Model, func(t *testing.T) {
				c := cpu.New(2)
				defer c.Close()
				testLlamaCppGreedy(t, rec, c)
			})
		}
	})
	cltest.Run(t, func(t *testing.T, d opencl.DeviceInfo) {
		for _, rec := range recs {
			if cltest.Trim(t, d) {
				rec = rec.Prefix(16)
			}
			t.Run(rec.Model, func(t *testing.T) { testLlamaCppGreedy(t, rec, cltest.New(t, d)) })
		}
	})
}

func testLlamaCppGreedy(t *testing.T, rec fidelity.Record, b backend.Backend) {
	f, err := load.Open(rec.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.GGUF)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tok.Encode(rec.Prompt, true); !slices.Equal(ids, rec.PromptIDs) {
		t.Fatalf("prompt ids %v, want %v", ids, rec.PromptIDs)
	}
	m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 256, CacheK: dtype.F16, CacheV: dtype.F16})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := greedy(t, &stream{m: m}, rec.PromptIDs, rec.NPredict)
	if msg := rec.CheckGreedy(got); msg != "" {
		t.Fatal(msg)
	}
}

// synthModel writes a synthetic model of the given shape and type.
func synthModel(t testing.TB, shape, typ string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), shape+"-"+typ+".gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: shape, Type: typ, Seed: 5, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	return p
}

// Prefill of a whole prompt, in one call or in chunks, and the same prompt
// fed token by token compute the same function; only the order of
// floating-point sums differs (batched vs single-row kernels).
func TestPrefillEqualsTokenByToken(t *testing.T) {
	prompt := []int32{1, 17, 42, 99, 7, 250, 3, 64, 128, 5, 11}
	for _, tc := range []struct {
		typ   string
		batch int
	}{{"F32", 0}, {"F32", 4}, {"F16", 0}, {"Q8_0", 0}, {"Q4_0", 3}} {
		t.Run(tc.typ, func(t *testing.T) {
			path := synthModel(t, "tiny", tc.typ)
			whole := openCPU(t, path, layers.Options{Context: 64, Batch: tc.batch})
			single := openCPU(t, path, layers.Options{Context: 64})
			sw, ss := &stream{m: whole}, &stream{m: single}
			if err := sw.eval(prompt); err != nil {
				t.Fatal(err)
			}
			for i := range prompt {
				if err := ss.eval(prompt[i : i+1]); err != nil {
					t.Fatal(err)
				}
			}
			a, b := sw.logits(t), ss.logits(t)
			var num, den float64
			for i := range a {
				num = math.Max(num, math.Abs(float64(a[i]-b[i])))
				den = math.Max(den, math.Abs(float64(b[i])))
			}
			// Quantised weights round activations to 8 bits: a value on a
			// rounding boundary may go the other way after a different
			// summation order, so only their greedy ids must agree (below)
			// and their logits within a loose 1e-2.
			tol := 1e-5
			if tc.typ == "Q8_0" || tc.typ == "Q4_0" {
				tol = 1e-2
			}
			if tc.typ == "F16" {
				tol = 1e-3 // activations round to F16: 11 bits, a smaller step
			}
			if rel := num / den; rel > tol {
				t.Fatalf("max |Δlogit| / max |logit| = %g > %g", rel, tol)
			}
			ga, gb := greedy(t, sw, []int32{9}, 8), greedy(t, ss, []int32{9}, 8)
			if !slices.Equal(ga, gb) {
				t.Fatalf("greedy continuations differ: %v vs %v", ga, gb)
			}
		})
	}
}

// A decode step must not allocate: a token's whole path (id, position and
// view in, layers, head, argmax out) runs on buffers made at load.
func TestGenerateZeroAllocs(t *testing.T) {
	m := openCPU(t, synthModel(t, "tiny", "Q4_0"), layers.Options{Context: 256})
	if err := m.Decode(engine.Batch(0, 0, []int32{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	step := []engine.Item{{Token: 4, Pos: 3, Output: true}}
	best := make([]int32, 1)
	allocs := testing.AllocsPerRun(20, func() {
		if err := m.Decode(step); err != nil {
			t.Fatal(err)
		}
		if err := m.Argmax(best); err != nil {
			t.Fatal(err)
		}
		step[0].Token, step[0].Pos = best[0], step[0].Pos+1
	})
	if allocs != 0 {
		t.Fatalf("%v heap allocations per generated token, want 0", allocs)
	}
}

func TestContextOverflow(t *testing.T) {
	m := openCPU(t, synthModel(t, "tiny", "F32"), layers.Options{Context: 8, Batch: 4})
	s := &stream{m: m}
	if err := s.eval(make([]int32, 9)); !errors.Is(err, kvcache.ErrFull) {
		t.Fatalf("9 tokens in a context of 8: err = %v, want kvcache.ErrFull", err)
	}
	if m.SeqPosMax(0) != -1 {
		t.Fatalf("a refused batch stored positions up to %d", m.SeqPosMax(0))
	}
	if err := s.eval([]int32{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := s.eval([]int32{1}); !errors.Is(err, kvcache.ErrFull) {
		t.Fatalf("token past a full cache: err = %v, want kvcache.ErrFull", err)
	}
	for _, bad := range [][]engine.Item{
		{{Token: int32(m.Vocab())}},
		{{Token: 1, Seq: 1}},
		{{Token: 1, Pos: -1}},
		nil,
		slices.Repeat([]engine.Item{{Token: 1, Output: true}}, 9),
	} {
		if err := m.Decode(bad); err == nil {
			t.Errorf("Decode(%v) accepted", bad)
		}
	}
	if err := m.Logits(1, make([]float32, m.Vocab())); err == nil {
		t.Error("Logits of an output the last Decode did not have")
	}
}

// A batch's last layer runs its feed-forward on the rows that want logits
// only, moved to the front first (as llama.cpp's inp_out_ids): wherever the
// outputs sit, each must get the logits it gets when every row is an
// output and nothing moves. The patterns put runs of outputs after other
// rows, so that a run moves over rows it overlaps, and the batch splits
// into parts of 4 (one with no output at all). Every part with outputs
// multiplies at least two rows, so the float sums take one order either
// way and the logits must be equal to the bit. On the CPU and every OpenCL
// device.
func TestOutputRowsAnywhere(t *testing.T) {
	t.Run("cpu", func(t *testing.T) {
		b := cpu.New(2)
		defer b.Close()
		testOutputRowsAnywhere(t, b)
	})
	cltest.Run(t, func(t *testing.T, d opencl.DeviceInfo) { testOutputRowsAnywhere(t, cltest.New(t, d)) })
}

func testOutputRowsAnywhere(t *testing.T, b backend.Backend) {
	ids := []int32{5, 9, 2, 7, 3, 8, 1, 4}
	for _, typ := range []string{"F32", "Q8_0"} {
		path := synthModel(t, "tiny", typ)
		run := func(t *testing.T, b backend.Backend, pattern string) [][]float32 {
			m := openSeqs(t, b, path, layers.Options{Context: 64, Batch: 4, MaxOutputs: 4})
			batch := engine.Batch(0, 0, ids)
			for i := range batch {
				batch[i].Output = pattern[i] == 'o'
			}
			if err := m.Decode(batch); err != nil {
				t.Fatal(err)
			}
			var rows [][]float32
			for o := range strings.Count(pattern, "o") {
				row := make([]float32, m.Vocab())
				if err := m.Logits(o, row); err != nil {
					t.Fatal(err)
				}
				rows = append(rows, row)
			}
			return rows
		}
		for _, pattern := range []string{".oo..oo.", "....o.oo", ".o.o.oo."} {
			t.Run(typ+"/"+pattern, func(t *testing.T) {
				// Parts of 4 rows: each part's outputs, all of them output.
				var want [][]float32
				for p := 0; p < len(ids); p += 4 {
					all := run(t, b, strings.Repeat(".", p)+"oooo"+strings.Repeat(".", len(ids)-p-4))
					for i, row := range all {
						if pattern[p+i] == 'o' {
							want = append(want, row)
						}
					}
				}
				got := run(t, b, pattern)
				for o := range want {
					for j := range want[o] {
						if math.Float32bits(got[o][j]) != math.Float32bits(want[o][j]) {
							t.Fatalf("output %d, logit %d: %g, want %g (every row an output)", o, j, got[o][j], want[o][j])
						}
					}
				}
			})
		}
	}
}
