package layers_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/cltest"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/load"
)

var embedPrompt = []int32{1, 17, 42, 99, 7, 250, 3, 64, 128, 5, 11, 300}

// embedRows runs prompt through a fresh session of m and returns its
// per-token hidden states and its mean, cls and last poolings.
func embedRows(t *testing.T, m *layers.Model, step int) map[engine.Pooling][][]float32 {
	t.Helper()
	e := engine.New(m)
	t.Cleanup(func() { e.Close() })
	e.SetStepTokens(step)
	s, err := e.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[engine.Pooling][][]float32{}
	for _, p := range []engine.Pooling{engine.PoolingNone, engine.PoolingMean, engine.PoolingCLS, engine.PoolingLast} {
		v, err := s.Embed(t.Context(), embedPrompt, p)
		if err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		want := 1
		if p == engine.PoolingNone {
			want = len(embedPrompt)
		}
		if len(v) != want {
			t.Fatalf("%v: %d vectors, want %d", p, len(v), want)
		}
		out[p] = v
	}
	return out
}

// Every architecture's embeddings against the float64 reference's final
// hidden states (after the output norm), on the CPU with F32 weights and
// cache: per token, and pooled (the reference's mean in float64, its first
// and last rows). The prompt runs in steps of 5 tokens through parts of 4
// rows, so that the chunks and parts meet mid-prompt. The tolerance is the
// logits' (TestArchitecturesVsFloat64Reference): 5e-4 of the scale. After
// the embedding, the session's cells serve a generation step: its logits
// are the reference's for the next token.
func TestEmbedVsFloat64Reference(t *testing.T) {
	for _, arch := range model.Archs {
		t.Run(arch, func(t *testing.T) {
			path := synthArch(t, arch, "F32", false)
			f, err := load.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ref := newRef(t, f)
			b := cpu.New(2)
			defer b.Close()
			m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 64, Batch: 4, CacheK: dtype.F32, CacheV: dtype.F32})
			if err != nil {
				t.Fatal(err)
			}
			want := make([][]float64, len(embedPrompt))
			mean := make([]float64, f.Config.NEmbd)
			for i, id := range embedPrompt {
				want[i] = ref.hidden(id, i)
				for k, v := range want[i] {
					mean[k] += v / float64(len(embedPrompt))
				}
			}
			got := embedRows(t, m, 5)
			var scale float64
			for _, w := range want {
				for _, v := range w {
					scale = math.Max(scale, math.Abs(v))
				}
			}
			check := func(name string, got []float32, want []float64) float64 {
				var d float64
				for k := range want {
					d = math.Max(d, math.Abs(float64(got[k])-want[k]))
				}
				if d > 5e-4*scale {
					t.Errorf("%s: max |Δ| %.3g against the reference (scale %.3g)", name, d, scale)
				}
				return d
			}
			var worst float64
			for i := range embedPrompt {
				worst = math.Max(worst, check(fmt.Sprintf("token %d", i), got[engine.PoolingNone][i], want[i]))
			}
			worst = math.Max(worst, check("mean", got[engine.PoolingMean][0], mean))
			worst = math.Max(worst, check("cls", got[engine.PoolingCLS][0], want[0]))
			worst = math.Max(worst, check("last", got[engine.PoolingLast][0], want[len(want)-1]))
			t.Logf("%s: worst |Δ| %.3g, scale %.3g", arch, worst, scale)
		})
	}
}

// DecodeEmbeddings' rows are exactly what Decode projects by the LM head:
// on the CPU, the logits of a Decode equal, to float32 rounding, the
// float64 product of the output matrix with the rows DecodeEmbeddings
// gives for the same tokens, and a Decode after it (its cells) gives the
// logits a plain prefill gives, to the bit.
func TestEmbedRowsAreDecodesHidden(t *testing.T) {
	path := synthArch(t, "llama", "F32", false)
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ref := newRef(t, f)
	b := cpu.New(2)
	defer b.Close()
	open := func() *layers.Model {
		m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 64, CacheK: dtype.F32, CacheV: dtype.F32})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	m1, m2 := open(), open()
	c := f.Config
	n := len(embedPrompt)
	rows := make([]float32, n*c.NEmbd)
	batch := engine.Batch(0, 0, embedPrompt)
	for i := range batch {
		batch[i].Output = true
	}
	if err := m1.DecodeEmbeddings(batch, rows); err != nil {
		t.Fatal(err)
	}
	if err := m2.Decode(engine.Batch(0, 0, embedPrompt)); err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, c.Vocab)
	if err := m2.Logits(0, logits); err != nil {
		t.Fatal(err)
	}
	out := ref.get("output.weight")
	if out == nil {
		out = ref.get("token_embd.weight")
	}
	last := make([]float64, c.NEmbd)
	for k, v := range rows[(n-1)*c.NEmbd:] {
		last[k] = float64(v)
	}
	var d, scale float64
	for i, w := range matvec(out, last, nil) {
		d, scale = math.Max(d, math.Abs(float64(logits[i])-w)), math.Max(scale, math.Abs(w))
	}
	if d > 1e-5*scale {
		t.Errorf("Decode's logits against the embedding row times the LM head: max |Δ| %.3g (scale %.3g)", d, scale)
	}
	// The cells the embedding filled serve the next token as a prefill's do.
	next := engine.Batch(0, n, []int32{77})
	if err := m1.Decode(next); err != nil {
		t.Fatal(err)
	}
	if err := m2.Decode(next); err != nil {
		t.Fatal(err)
	}
	l1, l2 := make([]float32, c.Vocab), make([]float32, c.Vocab)
	if err := m1.Logits(0, l1); err != nil {
		t.Fatal(err)
	}
	if err := m2.Logits(0, l2); err != nil {
		t.Fatal(err)
	}
	for i := range l1 {
		if l1[i] != l2[i] {
			t.Fatalf("logit %d after the embedding's cells %g, after a prefill's %g", i, l1[i], l2[i])
		}
	}
	if err := m1.DecodeEmbeddings(engine.Batch(0, n+1, []int32{5}), make([]float32, 3)); err == nil {
		t.Error("DecodeEmbeddings into a buffer of the wrong size: no error")
	}
	if err := m1.Logits(0, l1); err == nil {
		t.Error("Logits after DecodeEmbeddings: no error, the logits are gone")
	}
}

// The OpenCL backend's embeddings are the CPU's: F32 weights and cache, so
// within float32 sums in another order (1e-3 of the hidden states' scale,
// as the logits' bound). Every device.
func TestEmbedOpenCLMatchesCPU(t *testing.T) {
	path := synthArch(t, "llama", "F32", false)
	c := cpu.New(2)
	t.Cleanup(func() { c.Close() })
	want := embedRows(t, openOn(t, c, path, 64), 512)
	cltest.Run(t, func(t *testing.T, d opencl.DeviceInfo) {
		got := embedRows(t, openOn(t, cltest.New(t, d), path, 64), 512)
		var worst, scale float64
		for p, vs := range want {
			for i, v := range vs {
				for k := range v {
					worst = math.Max(worst, math.Abs(float64(got[p][i][k]-v[k])))
					scale = math.Max(scale, math.Abs(float64(v[k])))
				}
			}
		}
		if worst > 1e-3*scale {
			t.Fatalf("max |Δ| %.3g against the CPU (scale %.3g)", worst, scale)
		}
		t.Logf("max |Δ| %.3g, scale %.3g", worst, scale)
	})
}
