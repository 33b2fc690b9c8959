// Package backendtest is the conformance suite every glint backend runs: Run
// checks each op of backend.Backend against a naive float64 reference written
// here (plain loops over weights expanded with dtype.DequantizeRow), on odd
// shapes that do not line up with blocks of 32 or with work-group sizes; Bench
// times each op at Llama 3.2 1B sizes. A backend's own tests call both:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backend.Backend { return cpu.New(3) })
//	}
//
// Tolerances are stated next to each check with the reason for them; they
// are set for a correct float32 implementation that may sum in any order,
// not for this package's float64 references.
package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// WeightTypes are the types every backend must accept for MatMulTransposed
// and Embedding.
var WeightTypes = []dtype.Type{dtype.F32, dtype.F16, dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q6_K,
	dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.IQ4_NL, dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.IQ4_XS}

// Run runs the conformance suite. newBackend is called once per subtest (a
// failed op leaves a backend failed for good, so cases do not share one);
// Run closes each backend it gets.
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	tests := []struct {
		name string
		fn   func(*harness)
	}{
		{"AllocZeroed", testAlloc},
		{"ReadWrite", testReadWrite},
		{"MatMulTransposed", testMatMul},
		{"MatMulDecode", testMatMulDecode},
		{"Embedding", testEmbedding},
		{"RMSNorm", testRMSNorm},
		{"RoPE", testRoPE},
		{"SiLUMul", testSiLUMul},
		{"Add", testAdd},
		{"CopySlice", testCopySlice},
		{"CopySliceF16", testCopySliceF16},
		{"CopySliceF16Widen", testCopySliceF16Widen},
		{"Attention", testAttention},
		{"AttentionF16", testAttentionF16},
		{"AttentionViews", testAttentionViews},
		{"AttentionDecode", testAttentionDecode},
		{"AttentionCacheTypes", testAttentionCacheTypes},
		{"Argmax", testArgmax},
		{"RMSNormPerHead", testRMSNormPerHead},
		{"LayerNorm", testLayerNorm},
		{"GELU", testGELU},
		{"AddBias", testAddBias},
		{"Scale", testScale},
		{"SoftCap", testSoftCap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, newBackend)
			tc.fn(h)
			h.sync()
		})
	}
	t.Run("Errors", func(t *testing.T) { testErrors(t, newBackend) })
}

// harness wraps a backend with helpers that fail the test on any error.
type harness struct {
	t   *testing.T
	be  backend.Backend
	rng *rand.Rand
}

func newHarness(t *testing.T, newBackend func(t *testing.T) backend.Backend) *harness {
	t.Helper()
	be := newBackend(t)
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &harness{t: t, be: be, rng: rand.New(rand.NewPCG(1, uint64(len(t.Name()))))}
}

func (h *harness) sync() {
	h.t.Helper()
	if err := h.be.Sync(); err != nil {
		h.t.Fatalf("Sync: %v", err)
	}
}

func (h *harness) alloc(dt dtype.Type, shape ...int) backend.Tensor {
	h.t.Helper()
	t, err := h.be.Alloc(dt, shape...)
	if err != nil {
		h.t.Fatalf("Alloc(%v, %v): %v", dt, shape, err)
	}
	return t
}

// f32 allocates a tensor holding data.
func (h *harness) f32(data []float32, shape ...int) backend.Tensor {
	h.t.Helper()
	t := h.alloc(dtype.F32, shape...)
	if err := h.be.WriteF32(t, 0, data); err != nil {
		h.t.Fatalf("WriteF32: %v", err)
	}
	return t
}

func (h *harness) i32(data []int32, shape ...int) backend.Tensor {
	h.t.Helper()
	t := h.alloc(dtype.I32, shape...)
	if err := h.be.WriteI32(t, 0, data); err != nil {
		h.t.Fatalf("WriteI32: %v", err)
	}
	return t
}

func (h *harness) weight(name string, dt dtype.Type, data []byte, shape ...int) backend.Tensor {
	h.t.Helper()
	t, err := h.be.Weight(name, dt, shape, data)
	if err != nil {
		h.t.Fatalf("Weight(%q): %v", name, err)
	}
	return t
}

// read syncs and returns all of t's elements.
func (h *harness) read(t backend.Tensor) []float32 {
	h.t.Helper()
	h.sync()
	out := make([]float32, backend.Elems(t.Shape()))
	if err := h.be.ReadF32(t, 0, out); err != nil {
		h.t.Fatalf("ReadF32: %v", err)
	}
	return out
}

func (h *harness) readI32(t backend.Tensor) []int32 {
	h.t.Helper()
	h.sync()
	out := make([]int32, backend.Elems(t.Shape()))
	if err := h.be.ReadI32(t, 0, out); err != nil {
		h.t.Fatalf("ReadI32: %v", err)
	}
	return out
}

func (h *harness) rand(n int) []float32 { return randF32(h.rng, n, -1, 1) }

// sentinel fills n values with a marker that no op produces, to check that
// ops leave rows beyond n alone.
func sentinel(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = -12345.5
	}
	return out
}

// near fails t unless |got[i]-want[i]| <= tol(i) for every i, reporting the
// worst few offenders with their index so a layout bug shows its pattern.
func near(t *testing.T, what string, got []float32, want []float64, tol func(i int) float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	worst := 0.0
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		lim := tol(i)
		if !(d <= lim) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g (|Δ| %.3g > tolerance %.3g)", what, i, got[i], want[i], d, lim)
			}
			bad++
		}
		if lim > 0 {
			worst = math.Max(worst, d/lim)
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values outside tolerance", what, bad, len(want))
	}
	if testing.Verbose() {
		t.Logf("%s: worst |Δ|/tolerance %.3g", what, worst)
	}
}

// exact fails t unless got equals want element for element (as bits, so NaN
// and -0 count).
func exact(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
}

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func testAlloc(h *harness) {
	for _, tc := range []struct {
		dt    dtype.Type
		shape []int
	}{
		{dtype.F32, []int{1}},
		{dtype.F32, []int{17, 37}},
		{dtype.F32, []int{3, 5, 7}},
		{dtype.I32, []int{129}},
	} {
		name := fmt.Sprintf("%v%v", tc.dt, tc.shape)
		n := backend.Elems(tc.shape)
		// Twice, writing and freeing in between: a backend that pools
		// buffers must still hand out zeros.
		for round := range 2 {
			tt := h.alloc(tc.dt, tc.shape...)
			if tt.DType() != tc.dt || fmt.Sprint(tt.Shape()) != fmt.Sprint(tc.shape) {
				h.t.Errorf("%s: got %v%v", name, tt.DType(), tt.Shape())
			}
			if tc.dt == dtype.F32 {
				exact(h.t, fmt.Sprintf("%s round %d", name, round), h.read(tt), make([]float32, n))
				if err := h.be.WriteF32(tt, 0, h.rand(n)); err != nil {
					h.t.Fatal(err)
				}
			} else {
				got := h.readI32(tt)
				for i, v := range got {
					if v != 0 {
						h.t.Fatalf("%s round %d: element %d = %d, want 0", name, round, i, v)
					}
				}
				if err := h.be.WriteI32(tt, 0, make([]int32, n)); err != nil {
					h.t.Fatal(err)
				}
			}
			h.sync()
			h.be.Free(tt)
		}
	}
}

func testReadWrite(h *harness) {
	const rows, cols = 7, 13
	n := rows * cols
	f := h.alloc(dtype.F32, rows, cols)
	i := h.alloc(dtype.I32, rows, cols)
	model := make([]float32, n)
	modelI := make([]int32, n)
	for _, w := range []struct{ off, count int }{{0, 1}, {5, 40}, {n - 3, 3}, {13, 13}, {0, n}, {50, 0}} {
		src := h.rand(w.count)
		copy(model[w.off:], src)
		if err := h.be.WriteF32(f, w.off, src); err != nil {
			h.t.Fatalf("WriteF32(off %d, %d): %v", w.off, w.count, err)
		}
		srcI := make([]int32, w.count)
		for k := range srcI {
			srcI[k] = int32(h.rng.Uint32())
		}
		copy(modelI[w.off:], srcI)
		if err := h.be.WriteI32(i, w.off, srcI); err != nil {
			h.t.Fatalf("WriteI32(off %d, %d): %v", w.off, w.count, err)
		}
		h.sync()
		exact(h.t, fmt.Sprintf("after write at %d", w.off), h.read(f), model)
		gotI := h.readI32(i)
		for k := range modelI {
			if gotI[k] != modelI[k] {
				h.t.Fatalf("I32 after write at %d: element %d = %d, want %d", w.off, k, gotI[k], modelI[k])
			}
		}
	}
	// Partial reads at offsets.
	for _, r := range []struct{ off, count int }{{0, 5}, {31, 17}, {n - 1, 1}} {
		got := make([]float32, r.count)
		if err := h.be.ReadF32(f, r.off, got); err != nil {
			h.t.Fatalf("ReadF32(off %d, %d): %v", r.off, r.count, err)
		}
		exact(h.t, fmt.Sprintf("read at %d", r.off), got, model[r.off:r.off+r.count])
		gotI := make([]int32, r.count)
		if err := h.be.ReadI32(i, r.off, gotI); err != nil {
			h.t.Fatalf("ReadI32(off %d, %d): %v", r.off, r.count, err)
		}
		for k := range gotI {
			if gotI[k] != modelI[r.off+k] {
				h.t.Fatalf("ReadI32 at %d: element %d = %d, want %d", r.off, k, gotI[k], modelI[r.off+k])
			}
		}
	}
	// Out-of-range and wrong-type copies are errors, not panics or
	// silent truncation.
	bad := []struct {
		name string
		err  error
	}{
		{"WriteF32 past end", h.be.WriteF32(f, n-2, make([]float32, 3))},
		{"WriteF32 negative offset", h.be.WriteF32(f, -1, make([]float32, 1))},
		{"ReadF32 past end", h.be.ReadF32(f, n, make([]float32, 1))},
		{"WriteI32 past end", h.be.WriteI32(i, 1, make([]int32, n))},
		{"ReadI32 negative offset", h.be.ReadI32(i, -4, make([]int32, 2))},
		{"WriteF32 to I32", h.be.WriteF32(i, 0, make([]float32, 1))},
		{"ReadI32 from F32", h.be.ReadI32(f, 0, make([]int32, 1))},
	}
	for _, b := range bad {
		if b.err == nil {
			h.t.Errorf("%s: no error", b.name)
		}
	}
	// Those failures must not have touched the data.
	exact(h.t, "after rejected writes", h.read(f), model)
}

// matmulShapes are [out, in] weight shapes per type: in is a whole number of
// blocks but not a multiple of larger powers of two, and out is odd.
func matmulShapes(dt dtype.Type) [][2]int {
	switch dt.BlockSize() {
	case 32:
		return [][2]int{{19, 96}, {67, 160}, {130, 544}}
	case dtype.QK_K:
		return [][2]int{{13, 256}, {67, 768}}
	}
	return [][2]int{{1, 1}, {19, 37}, {67, 100}, {130, 545}}
}

func testMatMul(h *harness) {
	// n = 40 crosses a 32-token tile boundary; x and dst have spare rows
	// that must be neither read nor written.
	const spare = 2
	for _, dt := range WeightTypes {
		for _, s := range matmulShapes(dt) {
			m, k := s[0], s[1]
			raw := RandomWeight(h.t, h.rng, dt, m, k)
			w := h.weight("w", dt, raw, m, k)
			wf := dequantize(h.t, dt, raw, m, k)
			for _, n := range []int{1, 3, 17, 40} {
				x := h.rand((n + spare) * k)
				xt := h.f32(x, n+spare, k)
				dst := h.f32(sentinel((n+spare)*m), n+spare, m)
				h.be.MatMulTransposed(dst, xt, w, n)
				got := h.read(dst)
				// Quantised weights see activations rounded as llama.cpp
				// rounds them (dtype.RoundActivations).
				xr, step := roundActivations(dt, x[:n*k], k)
				want, mag := refMatMul(xr, wf, n, k, m)
				wmax := rowMaxAbs(wf, m, k)
				sTol := q8_1SumTol(dt, raw, xr, n, k, m)
				// Tolerance 1e-5·Σ|x·w|: each product is rounded once to
				// float32 and the sum is float32 in a backend-chosen
				// order, whose error is bounded by a small multiple of
				// 2⁻²⁴·Σ|x·w| per level of the summation tree. Plus, for
				// rounded activations, one quantisation step on one element:
				// a device whose 127/amax is not correctly rounded (OpenCL
				// allows 2.5 ulp) may round an exact tie the other way.
				// Plus, for Q4_1 and Q5_1, the error of Q8_1's block sum
				// (q8_1SumTol).
				near(h.t, fmt.Sprintf("%v [%d,%d] n=%d", dt, m, k, n), got[:n*m], want, func(i int) float64 { return 1e-5*mag[i] + step[i/m]*wmax[i%m] + sTol[i] })

				exact(h.t, fmt.Sprintf("%v [%d,%d] n=%d rows past n", dt, m, k, n), got[n*m:], sentinel(spare*m))
				h.be.Free(xt)
				h.be.Free(dst)
			}
			h.be.Free(w)
		}
	}
}

func testEmbedding(h *harness) {
	const vocab = 37
	for _, dt := range WeightTypes {
		dim := map[int]int{1: 45, 32: 160, dtype.QK_K: 512}[dt.BlockSize()]

		raw := RandomWeight(h.t, h.rng, dt, vocab, dim)
		table := h.weight("token_embd.weight", dt, raw, vocab, dim)
		tf := dequantize(h.t, dt, raw, vocab, dim)
		for _, n := range []int{1, 3, 17} {
			ids := make([]int32, n+1)
			for i := range ids {
				ids[i] = int32(h.rng.IntN(vocab))
			}
			ids[0] = vocab - 1
			if n > 1 {
				ids[1] = 0
			}
			it := h.i32(ids, n+1)
			dst := h.f32(sentinel((n+1)*dim), n+1, dim)
			h.be.Embedding(dst, table, it, n)
			got := h.read(dst)
			want := make([]float64, n*dim)
			for i := range n {
				copy(want[i*dim:], widen(tf[int(ids[i])*dim:int(ids[i]+1)*dim]))
			}
			// Dequantising is one or two float32 products per element;
			// allow one rounding step of difference (2⁻²³ relative).
			near(h.t, fmt.Sprintf("%v dim %d n=%d", dt, dim, n), got[:n*dim], want, func(i int) float64 { return 0x1p-23 * math.Abs(want[i]) })
			exact(h.t, fmt.Sprintf("%v n=%d row past n", dt, n), got[n*dim:], sentinel(dim))
		}
	}
}

func testRMSNorm(h *harness) {
	for _, cols := range []int{1, 37, 100, 2048} {
		w := h.rand(cols)
		wt := h.weight("norm", dtype.F32, f32Bytes(w), cols)
		for _, n := range []int{1, 3, 17} {
			// Rows of very different magnitudes: the norm must scale them.
			x := make([]float32, (n+1)*cols)
			for i := range n + 1 {
				s := float32(math.Pow(10, float64(i%5-2)))
				for j := range cols {
					x[i*cols+j] = s * (2*h.rng.Float32() - 1)
				}
			}
			xt := h.f32(x, n+1, cols)
			dst := h.f32(sentinel((n+1)*cols), n+1, cols)
			const eps = 1e-5
			h.be.RMSNorm(dst, xt, wt, n, eps)
			got := h.read(dst)
			want := refRMSNorm(x, w, n, cols, eps)
			// 1e-5 relative: a few float32 roundings per element plus a
			// float32 sum of squares (error ≲ √cols·2⁻²⁴ in practice).
			near(h.t, fmt.Sprintf("cols %d n=%d", cols, n), got[:n*cols], want, func(i int) float64 { return 1e-5 * math.Abs(want[i]) })
			exact(h.t, fmt.Sprintf("cols %d n=%d row past n", cols, n), got[n*cols:], sentinel(cols))
			// In place (dst == x) gives the same result.
			h.be.RMSNorm(xt, xt, wt, n, eps)
			exact(h.t, fmt.Sprintf("cols %d n=%d in place", cols, n), h.read(xt)[:n*cols], got[:n*cols])
		}
	}
}

func f32Bytes(x []float32) []byte {
	out := make([]byte, 4*len(x))
	for i, v := range x {
		b := math.Float32bits(v)
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
	}
	return out
}

func testRoPE(h *harness) {
	type rc struct {
		heads, headDim, dims int
		pos                  string // "pos0+i" from pos0, or "any": positions in any order
		pos0                 int
		theta                float32
		freqs, neox          bool
		freqScale, mscale    float32 // linear scaling, LongRoPE's attention factor (0: none)
	}
	var cases []rc
	for _, neox := range []bool{false, true} {
		for _, freqs := range []bool{false, true} {
			cases = append(cases,
				rc{4, 64, 64, "pos0+i", 0, 500000, freqs, neox, 0, 0},
				rc{3, 12, 8, "pos0+i", 7, 10000, freqs, neox, 0, 0}, // partial rotation
				rc{2, 10, 6, "pos0+i", 1000, 10000, freqs, neox, 0, 0},
				rc{5, 8, 8, "pos0+i", 31, 10000, freqs, neox, 0, 0},
				rc{4, 16, 16, "any", 0, 10000, freqs, neox, 0, 0},
				rc{2, 16, 16, "pos0+i", 900, 1e6, freqs, neox, 0.125, 0},       // Gemma 3's global layers
				rc{2, 16, 16, "pos0+i", 200, 10000, freqs, neox, 0, 1.1902381}, // Phi-3.5's LongRoPE
			)
		}
	}
	for _, c := range cases {
		cols := c.heads * c.headDim
		var ft backend.Tensor
		var fv []float32
		if c.freqs {
			// Llama 3 divisors are 1 for high frequencies and up to 8
			// for low ones.
			fv = randF32(h.rng, c.dims/2, 1, 8)
			ft = h.weight("rope_freqs.weight", dtype.F32, f32Bytes(fv), c.dims/2)
		}
		r := backend.Rope{Dims: c.dims, Theta: c.theta, Freqs: ft, NeoX: c.neox, FreqScale: c.freqScale, AttnFactor: c.mscale}
		fs, ms, _ := r.Scales()
		for _, n := range []int{1, 3, 17} {
			name := fmt.Sprintf("%+v n=%d", c, n)
			// A batch mixes sequences (positions out of order, repeated)
			// and a K-shift rotates by negative deltas.
			pos := make([]int32, n+1)
			for i := range pos {
				pos[i] = int32(c.pos0 + i)
				if c.pos == "any" {
					pos[i] = int32(h.rng.IntN(3000) - 500)
				}
			}
			if c.pos == "any" && n > 1 {
				pos[1] = pos[0]
			}
			pt := h.i32(pos, n+1)
			x := h.rand((n + 1) * cols)
			xt := h.f32(x, n+1, cols)
			h.be.RoPE(xt, n, c.heads, c.headDim, pt, r)
			got := h.read(xt)
			want := refRoPE(x[:n*cols], n, c.heads, c.headDim, pos, c.dims, float64(c.theta), fv, c.neox, float64(fs), float64(ms))
			// A float32 backend computes the angle pos·θ^(-2i/d) with a
			// relative error of a few 2⁻²⁴, an absolute angle error of
			// about |pos|·2⁻²², plus a few ulp in sin and cos; the element
			// error scales with the pair's magnitude (≤ 2 here).
			near(h.t, name, got[:n*cols], want, func(i int) float64 {
				p := math.Abs(float64(pos[i/cols])) * float64(fs)
				return (4e-6 + p*3e-7) * 2 * float64(ms)
			})
			exact(h.t, name+" row past n", got[n*cols:], x[n*cols:])
			// Dimensions past Dims of each head must not move at all.
			for i := range n * cols {
				if i%c.headDim >= c.dims && got[i] != x[i] {
					h.t.Fatalf("%s: unrotated element %d changed from %g to %g", name, i, x[i], got[i])
				}
			}
			h.be.Free(pt)
			h.be.Free(xt)
		}
	}
}

func testSiLUMul(h *harness) {
	for _, cols := range []int{1, 37, 8192 + 3} {
		for _, n := range []int{1, 3, 17} {
			g := randF32(h.rng, (n+1)*cols, -12, 12)
			u := h.rand((n + 1) * cols)
			gt, ut := h.f32(g, n+1, cols), h.f32(u, n+1, cols)
			dst := h.f32(sentinel((n+1)*cols), n+1, cols)
			h.be.SiLUMul(dst, gt, ut, n)
			got := h.read(dst)
			want := refSiLUMul(g[:n*cols], u[:n*cols])
			// Relative 1e-5 covers float32 exp (a few ulp) and the
			// division and products that follow; silu has no
			// cancellation, so relative error is meaningful near 0.
			name := fmt.Sprintf("cols %d n=%d", cols, n)
			near(h.t, name, got[:n*cols], want, func(i int) float64 { return 1e-5*math.Abs(want[i]) + 1e-30 })
			exact(h.t, name+" row past n", got[n*cols:], sentinel(cols))
		}
	}
}

func testAdd(h *harness) {
	const cols = 37
	for _, n := range []int{1, 3, 17} {
		a, b := h.rand((n+1)*cols), h.rand((n+1)*cols)
		want := make([]float32, n*cols)
		for i := range want {
			want[i] = a[i] + b[i] // one float32 rounding: exact match expected
		}
		for _, mode := range []string{"separate", "dst==a", "dst==b"} {
			at, bt := h.f32(a, n+1, cols), h.f32(b, n+1, cols)
			dst := h.f32(sentinel((n+1)*cols), n+1, cols)
			var untouched []float32
			switch mode {
			case "dst==a":
				dst, untouched = at, a[n*cols:]
			case "dst==b":
				dst, untouched = bt, b[n*cols:]
			default:
				untouched = sentinel(cols)
			}
			h.be.Add(dst, at, bt, n)
			got := h.read(dst)
			exact(h.t, fmt.Sprintf("%s n=%d", mode, n), got[:n*cols], want)
			exact(h.t, fmt.Sprintf("%s n=%d row past n", mode, n), got[n*cols:], untouched)
		}
	}
}

func testCopySlice(h *harness) {
	// The KV-cache append: rows of [n, kvHeads·headDim] land at position
	// pos of a [maxSeq, kvHeads, headDim] cache, in several appends.
	const maxSeq, kvHeads, headDim = 40, 3, 5
	kvCols := kvHeads * headDim
	cache := h.alloc(dtype.F32, maxSeq, kvHeads, headDim)
	model := make([]float32, maxSeq*kvCols)
	pos := 0
	for _, n := range []int{3, 1, 17, 1, 1} {
		src := h.rand((n + 1) * kvCols)
		st := h.f32(src, n+1, kvCols)
		h.be.CopySlice(cache, pos*kvCols, st, 0, n*kvCols)
		copy(model[pos*kvCols:], src[:n*kvCols])
		pos += n
		exact(h.t, fmt.Sprintf("append %d at %d", n, pos-n), h.read(cache), model)
	}
	// Arbitrary element offsets on both sides, I32 included.
	src := h.rand(50)
	st := h.f32(src, 50)
	h.be.CopySlice(cache, 7, st, 11, 23)
	copy(model[7:], src[11:34])
	exact(h.t, "offset copy", h.read(cache), model)

	ids := make([]int32, 20)
	for i := range ids {
		ids[i] = int32(i * 7)
	}
	is := h.i32(ids, 20)
	id := h.alloc(dtype.I32, 9)
	h.be.CopySlice(id, 2, is, 13, 5)
	got := h.readI32(id)
	want := []int32{0, 0, 91, 98, 105, 112, 119, 0, 0}
	for i := range want {
		if got[i] != want[i] {
			h.t.Fatalf("I32 CopySlice = %v, want %v", got, want)
		}
	}
}

// fillCache returns a random [cells, kvHeads, headDim] cache whose cells
// outside seen hold large values, so that reading a cell a row must not see
// shows up as a gross error.
func (h *harness) fillCache(cells, kvCols int, seen func(j int) bool) []float32 {
	c := h.rand(cells * kvCols)
	for j := range cells {
		if !seen(j) {
			for i := j * kvCols; i < (j+1)*kvCols; i++ {
				c[i] *= 100
			}
		}
	}
	return c
}

// Attention tolerance: scores are float32 dot products (error ≲ 2⁻²⁴·√d·Σ|q·k|,
// amplified through exp), and the output is a float32 weighted sum whose
// error is relative to Σ_j p_j·|v_j|; 1e-5 of that covers both at the sizes
// tested (ranges ≤ 1000, headDim ≤ 64, |scores| ≲ 10).
const attnTol = 1e-5

// attnCase is one attention call of the suite: a view (which cells each
// query row sees), the geometry and options, and the cache types.
type attnCase struct {
	name               string
	view               View
	cells              int // cache size (≥ view.Hi)
	heads, kvHeads, hd int
	softCap            float32
	window             int
	kt, vt             dtype.Type
	flash              bool // backend.Attn.Flash: refFlash is the reference
	unitScale          bool // Scale 1 in place of 1/√hd
}

// run runs c against refAttention: random q (wide, so some heads' softmax is
// peaked) and caches, each F32 or F16. Tolerance: attnTol as above, plus,
// over an F16 V, one f16 rounding step of one probability (2⁻¹⁰·max_j
// p_j·|v_j|), since the reference rounds its float64 probability and the
// backend its float32 one. Rows that see no cell must be exactly zero, and
// out's spare row must stay untouched.
func (h *harness) runAttention(c attnCase) {
	h.t.Helper()
	n := c.view.N()
	cols, kvCols := c.heads*c.hd, c.kvHeads*c.hd
	visible := make([][]int, n)
	seen := make([]bool, c.cells)
	for i := range n {
		for j := range c.view.Hi {
			if c.view.Sees(i, j, c.window) {
				visible[i] = append(visible[i], j)
				seen[j] = true
			}
		}
	}
	q := randF32(h.rng, (n+1)*cols, -3, 3)
	kt, k, kMins := h.cacheOf(c.kt, h.fillCache(c.cells, kvCols, func(j int) bool { return seen[j] }), c.cells, c.kvHeads, c.hd)
	vt, v, _ := h.cacheOf(c.vt, h.fillCache(c.cells, kvCols, func(j int) bool { return seen[j] }), c.cells, c.kvHeads, c.hd)
	qt := h.f32(q, n+1, cols)
	out := h.f32(sentinel((n+1)*cols), n+1, cols)
	kv, err := c.view.Upload(h.be)
	if err != nil {
		h.t.Fatal(err)
	}
	a := backend.Attn{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
		SoftCap: c.softCap, Window: c.window, Flash: c.flash}
	if c.unitScale {
		a.Scale = 1
	}
	h.be.Attention(out, qt, kt, vt, n, kv, a)
	got := h.read(out)
	name := fmt.Sprintf("%s: n=%d heads %d/%d headDim %d K %v V %v flash %v", c.name, n, c.heads, c.kvHeads, c.hd, c.kt, c.vt, c.flash)
	if c.flash {
		want, mag, sens, acc := refFlash(q, k, v, kMins, n, c.heads, c.kvHeads, c.hd, c.kt, c.vt, a.Scale, c.softCap,
			func(i int) []int { return visible[i] })
		near(h.t, name, got[:n*cols], want, func(i int) float64 { return attnTol*mag[i] + sens[i] + acc[i] })
	} else {
		want, mag, big := refAttention(q, k, v, n, c.heads, c.kvHeads, c.hd, a.Scale, c.softCap,
			func(i int) []int { return visible[i] }, c.kt == dtype.F16, c.vt == dtype.F16)
		near(h.t, name, got[:n*cols], want, func(i int) float64 {
			tol := attnTol * mag[i]
			if c.vt == dtype.F16 {
				tol += 0x1p-10 * big[i]
			}
			return tol
		})
	}
	exact(h.t, name+" row past n", got[n*cols:], sentinel(cols))
	for _, t := range []backend.Tensor{qt, kt, vt, out, kv.Rows, kv.Cells} {
		h.be.Free(t)
	}
}

// testAttention is a single sequence, as kvcache lays it out (Causal): a
// decode step over contexts within and across chunks, and causal batches
// from the start and after a prefix.
func testAttention(h *harness) {
	type ac struct{ n, pos0, heads, kvHeads, headDim int }
	cases := []ac{
		{1, 0, 4, 2, 8}, {1, 1, 8, 1, 64}, {1, 32, 4, 2, 64}, {1, 999, 8, 1, 8}, {1, 999, 4, 2, 64},
		{3, 0, 4, 2, 8}, {17, 0, 4, 2, 64}, {17, 0, 8, 1, 8},
		{3, 9, 8, 1, 8}, {17, 40, 4, 2, 8}, {17, 3, 8, 1, 64},
	}
	for _, c := range cases {
		h.runAttention(attnCase{name: "causal", view: Causal(c.n, c.pos0), cells: c.pos0 + c.n + 3,
			heads: c.heads, kvHeads: c.kvHeads, hd: c.headDim, kt: dtype.F32, vt: dtype.F32})
	}
}

// testAttentionF16 runs decode and causal batches over F16 caches (K, V, or
// both).
func testAttentionF16(h *harness) {
	type ac struct{ n, pos0, heads, kvHeads, headDim int }
	cases := []ac{{1, 0, 4, 2, 8}, {1, 32, 8, 1, 64}, {1, 699, 4, 2, 64}, {3, 0, 4, 2, 8}, {17, 5, 8, 1, 64}}
	for _, kv := range [][2]dtype.Type{{dtype.F16, dtype.F16}, {dtype.F16, dtype.F32}, {dtype.F32, dtype.F16}} {
		for _, c := range cases {
			h.runAttention(attnCase{name: "causal", view: Causal(c.n, c.pos0), cells: c.pos0 + c.n + 3,
				heads: c.heads, kvHeads: c.kvHeads, hd: c.headDim, kt: kv[0], vt: kv[1]})
		}
	}
}

// testAttentionViews is attention over caches that hold several sequences:
// interleaved in one buffer (unified), in one region each, with holes,
// cells shared by two sequences (mask bits below and above 32), cell
// positions out of order, rows that see nothing, sliding windows and soft
// capping; one decode row and batches, over every pair of cache types.
func testAttentionViews(h *harness) {
	type geo struct{ heads, kvHeads, hd int }
	for _, vc := range attentionViews(h) {
		for _, g := range []geo{{4, 2, 8}, {8, 1, 64}} {
			for _, kv := range [][2]dtype.Type{{dtype.F32, dtype.F32}, {dtype.F16, dtype.F16}, {dtype.F16, dtype.F32}, {dtype.F32, dtype.F16}} {
				c := vc
				c.heads, c.kvHeads, c.hd, c.kt, c.vt = g.heads, g.kvHeads, g.hd, kv[0], kv[1]
				h.runAttention(c)
			}
		}
	}
}

// attentionViews builds the views of testAttentionViews.
func attentionViews(h *harness) []attnCase {
	var cases []attnCase
	add := func(name string, v View, window int, softCap float32) {
		cells := len(v.Cells) / 3
		cases = append(cases, attnCase{name: name, view: v, cells: cells + 2, window: window, softCap: softCap})
	}
	row := func(pos, seq, lo, hi int) []int32 { return []int32{int32(pos), int32(seq), int32(lo), int32(hi)} }
	cell := func(pos int, seqs ...int) []int32 {
		var m uint64
		for _, s := range seqs {
			m |= 1 << s
		}
		return []int32{int32(pos), int32(uint32(m)), int32(uint32(m >> 32))}
	}

	// Unified: sequences 0, 3 and 40 interleaved cell by cell (cell j is
	// sequence j%3's position j/3), 301 cells; a batch holds the last token
	// of each and a few earlier ones, every row scanning all the cells.
	seqs := []int{0, 3, 40}
	var u View
	for j := range 301 {
		u.Cells = append(u.Cells, cell(j/3, seqs[j%3])...)
	}
	u.Hi = 301
	for _, r := range [][2]int{{100, 0}, {99, 1}, {99, 2}, {50, 1}, {0, 2}} {
		u.Rows = append(u.Rows, row(r[0], seqs[r[1]], 0, 301)...)
	}
	add("unified", u, 0, 0)
	add("unified decode", View{Rows: u.Rows[4:8], Cells: u.Cells, Hi: 301}, 0, 0)

	// Regions: sequence s in cells [40s, 40s+40), rows scanning their own
	// region; region 1 has holes (empty cells) and out-of-order positions.
	var r View
	for s := range 3 {
		perm := h.rng.Perm(40)
		for j := range 40 {
			p := j
			if s == 1 {
				p = perm[j]
			}
			c := cell(p, s)
			if s == 1 && j%7 == 3 {
				c = cell(0) // a hole
			}
			r.Cells = append(r.Cells, c...)
		}
	}
	r.Lo, r.Hi = 40, 120
	for _, q := range [][3]int{{39, 1, 0}, {20, 1, 0}, {39, 2, 0}, {5, 2, 0}, {0, 1, 0}} {
		r.Rows = append(r.Rows, row(q[0], q[1], 40*q[1], 40*q[1]+40)...)
	}
	add("regions", r, 0, 0)
	add("regions decode", View{Rows: r.Rows[:4], Cells: r.Cells, Lo: 40, Hi: 80}, 0, 0)

	// Shared: a 20-cell prefix belongs to sequences 1 and 33 (bits in both
	// mask words), then each continues in its own cells, alternating.
	var sh View
	for j := range 20 {
		sh.Cells = append(sh.Cells, cell(j, 1, 33)...)
	}
	for j := range 30 {
		sh.Cells = append(sh.Cells, cell(20+j/2, []int{1, 33}[j%2])...)
	}
	sh.Hi = 50
	sh.Rows = append(sh.Rows, row(34, 1, 0, 50)...)
	sh.Rows = append(sh.Rows, row(34, 33, 0, 50)...)
	sh.Rows = append(sh.Rows, row(10, 33, 0, 50)...)
	sh.Rows = append(sh.Rows, row(25, 2, 0, 50)...) // sequence 2 has no cells: zeros
	sh.Rows = append(sh.Rows, row(5, 1, 30, 30)...) // an empty range: zeros
	add("shared", sh, 0, 0)

	// Sliding window and soft capping on one sequence, over a range that
	// crosses a 256-cell chunk.
	c := Causal(6, 294)
	add("window 7", c, 7, 0)
	add("window 1", c, 1, 0)
	add("window decode", Causal(1, 299), 30, 0)
	add("soft cap", c, 0, 2)
	add("soft cap decode", Causal(1, 40), 0, 5)
	add("soft cap and window", u, 9, 3)

	// A prompt as kvcache views one: every row scans all of its sequence's
	// cells and the positions mask the rest, so that a device backend may
	// take several rows together (OpenCL's attention tiles); 19 rows leave
	// a partial last tile, 300 cells cross a chunk.
	p := Prompt(19, 281)
	add("prompt rows", p, 0, 0)
	add("prompt rows window", p, 11, 0)
	return cases
}

func testArgmax(h *harness) {
	for _, cols := range []int{1, 37, 1000, 128256 + 1} {
		for _, n := range []int{1, 3, 17} {
			x := make([]float32, n*cols)
			want := make([]int32, n)
			for i := range n {
				row := x[i*cols : (i+1)*cols]
				for j := range row {
					row[j] = -5 + 4*h.rng.Float32()
				}
				// Ties: the maximum appears up to three times, and the
				// first occurrence must win; some rows are all equal.
				switch i % 4 {
				case 0:
					first := h.rng.IntN(cols)
					want[i] = int32(first)
					row[first] = 3
					for range 2 {
						if j := first + h.rng.IntN(cols-first); j != first {
							row[j] = 3
						}
					}
				case 1:
					for j := range row {
						row[j] = -1
					}
					want[i] = 0
				case 2:
					want[i] = int32(cols - 1)
					row[cols-1] = 1e30
				case 3:
					j := h.rng.IntN(cols)
					row[j] = 0.5
					want[i] = int32(j)
				}
			}
			xt := h.f32(x, n, cols)
			dst := h.i32(make([]int32, n+1), n+1)
			h.be.Argmax(dst, xt, n)
			got := h.readI32(dst)
			for i := range n {
				if got[i] != want[i] {
					h.t.Errorf("cols %d n=%d row %d: argmax %d, want %d", cols, n, i, got[i], want[i])
				}
			}
			if got[n] != 0 {
				h.t.Errorf("cols %d n=%d: wrote index %d past n", cols, n, got[n])
			}
		}
	}
}

// testCopySliceF16 is the append into an f16 KV cache: F32 rows round to
// the nearest f16 (ties to even), checked exactly through ReadF32, which
// widens an F16 tensor; values past f16's range become ±Inf as IEEE says.
func testCopySliceF16(h *harness) {
	const maxSeq, kvCols = 30, 12
	cache := h.alloc(dtype.F16, maxSeq, 3, 4)
	model := make([]float32, maxSeq*kvCols)
	pos := 0
	for _, n := range []int{3, 1, 17, 1} {
		src := randF32(h.rng, (n+1)*kvCols, -70000, 70000)
		for i := range src {
			switch i % 4 {
			case 1:
				src[i] /= 1e6 // f16 subnormals and zero
			case 2:
				src[i] /= 3e3
			}
		}
		st := h.f32(src, n+1, kvCols)
		h.be.CopySlice(cache, pos*kvCols, st, 0, n*kvCols)
		for i, v := range src[:n*kvCols] {
			model[pos*kvCols+i] = dtype.F16ToF32(dtype.F32ToF16(v))
		}
		pos += n
		exact(h.t, fmt.Sprintf("F16 append %d at %d", n, pos-n), h.read(cache), model)
		h.be.Free(st)
	}
	h.be.Free(cache)
}

// halfCache puts c into a new cache of type dt (F32 or F16, through
// CopySlice) and returns it with the values it holds.
func (h *harness) halfCache(dt dtype.Type, c []float32, cells, kvHeads, hd int) (backend.Tensor, []float32) {
	if dt == dtype.F32 {
		return h.f32(c, cells, kvHeads, hd), c
	}
	st := h.f32(c, cells, kvHeads, hd)
	t := h.alloc(dtype.F16, cells, kvHeads, hd)
	h.be.CopySlice(t, 0, st, 0, len(c))
	h.be.Free(st)
	held := make([]float32, len(c))
	dtype.RoundActivations(dtype.F16, held, c)
	return t, held
}

// testCopySliceF16Widen reads an f16 cache back into F32 rows (a K-shift's
// first step): every half widens exactly, and a round trip F32 → F16 → F32
// → F16 changes no bit.
func testCopySliceF16Widen(h *harness) {
	const cells, kvCols = 20, 12
	src := randF32(h.rng, cells*kvCols, -70000, 70000)
	for i := range src {
		if i%3 == 1 {
			src[i] /= 1e6 // subnormals
		}
	}
	cache, held := h.halfCache(dtype.F16, src, cells, 3, 4)
	rows := h.f32(sentinel(9*kvCols), 9, kvCols)
	h.be.CopySlice(rows, kvCols+5, cache, 4*kvCols+3, 7*kvCols)
	want := sentinel(9 * kvCols)
	copy(want[kvCols+5:], held[4*kvCols+3:11*kvCols+3])
	exact(h.t, "F16 into F32", h.read(rows), want)
	back := h.alloc(dtype.F16, cells, 3, 4)
	h.be.CopySlice(back, 4*kvCols+3, rows, kvCols+5, 7*kvCols)
	want = make([]float32, cells*kvCols)
	copy(want[4*kvCols+3:], held[4*kvCols+3:11*kvCols+3])
	exact(h.t, "F16 → F32 → F16", h.read(back), want)
	h.be.Free(rows)
	h.be.Free(back)
	h.be.Free(cache)
}
