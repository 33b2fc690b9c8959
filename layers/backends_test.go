package layers_test

import (
	"math"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/cltest"
	"github.com/glint-llm/glint/internal/fidelity"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/sample"
)

// openOn loads a model file on the given backend with an F32 KV cache.
func openOn(t testing.TB, b backend.Backend, path string, ctx int) *layers.Model {
	return openCache(t, b, path, ctx, dtype.F32)
}

// openCache loads a model file on the given backend with a KV cache of ct.
func openCache(t testing.TB, b backend.Backend, path string, ctx int, ct dtype.Type) *layers.Model {
	t.Helper()
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: ctx, CacheK: ct, CacheV: ct})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// The OpenCL backend gives the CPU backend's greedy ids on every model of
// the llama.cpp records. Both are fed the CPU's choice at every step, so a
// flip cannot derail what follows; a flip is acceptable only where the
// CPU's own top-1/top-2 gap is below 1e-3. Logits agree within 1e-3 for
// float weights (float32 sums in another order). Quantised weights round
// activations to 8 bits, and an activation on a rounding boundary may round
// the other way after float sums in another order: one such flip moves the
// logits of these small random models by up to ~0.7, so there the ids are
// what must agree and 1 bounds only gross errors. F16 weights round their
// activations to f16, and an f16 KV cache rounds K and V (keeping a flipped
// value for later steps), the same way but by 16-bit steps: 2e-2 there.
// It runs on every OpenCL device (internal/cltest); a second device runs
// 16 steps over the default f16 cache only.
func TestOpenCLMatchesCPU(t *testing.T) {
	recs := fidelity.All(t)
	cltest.Run(t, func(t *testing.T, d opencl.DeviceInfo) {
		caches := []dtype.Type{dtype.F32, dtype.F16}
		if cltest.Trim(t, d) {
			caches = caches[1:]
		}
		for _, rec := range recs {
			if cltest.Trim(t, d) {
				rec = rec.Prefix(16)
			}
			for _, ct := range caches {
				t.Run(rec.Model+"/"+ct.String(), func(t *testing.T) {
					testOpenCLMatchesCPU(t, cltest.New(t, d), rec, ct)
				})
			}
		}
	})
}

func testOpenCLMatchesCPU(t *testing.T, g backend.Backend, rec fidelity.Record, ct dtype.Type) {
	path := rec.Path(t)
	c := cpu.New(2)
	t.Cleanup(func() { c.Close() })
	mc := openCache(t, c, path, 128, ct)
	mg := openCache(t, g, path, 128, ct)
	quantized, half := weightKinds(t, path)
	tol := 1e-3
	if ct == dtype.F16 || half {
		tol = 2e-2
	}
	if quantized {
		tol = 1
	}
	sc, sg := &stream{m: mc}, &stream{m: mg}
	batch := rec.PromptIDs
	var worst float64
	for step := 0; step < rec.NPredict; step++ {
		for _, s := range []*stream{sc, sg} {
			if err := s.eval(batch); err != nil {
				t.Fatal(err)
			}
		}
		lc, lg := sc.logits(t), sg.logits(t)
		for i := range lc {
			worst = math.Max(worst, math.Abs(float64(lc[i]-lg[i])))
		}
		top, gap := sample.TopGap(lc)
		if g := sample.Argmax(lg); g != top && gap >= 1e-3 {
			t.Fatalf("step %d: opencl picks %d, cpu %d with a top-2 gap of %g", step, g, top, gap)
		}
		if dev := sg.argmax(t); dev != sample.Argmax(lg) {
			t.Fatalf("step %d: device argmax %d, host argmax of its logits %d", step, dev, sample.Argmax(lg))
		}
		batch = []int32{top}
	}
	if worst > tol {
		t.Fatalf("max |Δlogit| %g > %g", worst, tol)
	}
	t.Logf("max |Δlogit| %.3g over %d steps", worst, rec.NPredict)
}

// weightKinds reports whether a GGUF file has block-quantised tensors and
// whether it has F16 or BF16 ones.
func weightKinds(t *testing.T, path string) (quantized, half bool) {
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, ti := range f.GGUF.Tensors {
		quantized = quantized || ti.Type.Quantized()
		half = half || ti.Type == dtype.F16 || ti.Type == dtype.BF16
	}
	return quantized, half
}
