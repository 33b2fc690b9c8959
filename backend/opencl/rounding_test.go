package opencl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/kernels"
	"github.com/glint-llm/glint/numerics"
)

// These tests hold the backend to llama.cpp's rounding points (issue 11)
// with float64 references that apply them through package dtype: the f16
// KV cache (CopySlice F32→F16, attention over F16 K and V, single pass and
// flash-decoding) and the F16/BF16 activation rounding of MatMulTransposed,
// on both kernel variants.

// rt is a test's view of one backend: allocation and raw reads.
type rt struct {
	t *testing.T
	b *Backend
}

func (r rt) alloc(dt dtype.Type, shape ...int) backend.Tensor {
	r.t.Helper()
	x, err := r.b.Alloc(dt, shape...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { r.b.Free(x) })
	return x
}

func (r rt) f32(vals []float32, shape ...int) backend.Tensor {
	r.t.Helper()
	x := r.alloc(dtype.F32, shape...)
	if err := r.b.WriteF32(x, 0, vals); err != nil {
		r.t.Fatal(err)
	}
	return x
}

func (r rt) read(x backend.Tensor, n int) []float32 {
	r.t.Helper()
	if err := r.b.Sync(); err != nil {
		r.t.Fatal(err)
	}
	out := make([]float32, n)
	if err := r.b.ReadF32(x, 0, out); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// readF16 returns the stored bits of the first n elements of an F16
// tensor (the Backend interface reads only F32 and I32).
func (r rt) readF16(x backend.Tensor, n int) []uint16 {
	r.t.Helper()
	if err := r.b.Sync(); err != nil {
		r.t.Fatal(err)
	}
	out := make([]uint16, n)
	if err := r.b.q.Read(x.(*tensor).mem, 0, 2*n, ptr(out)); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// cache makes a [maxSeq, kvHeads, headDim] cache of type dt from vals the
// way kvcache fills one, by CopySlice appends of F32 rows (a few positions
// at a time), and returns the values it holds.
func (r rt) cache(dt dtype.Type, vals []float32, maxSeq, kvHeads, headDim int) (backend.Tensor, []float32) {
	r.t.Helper()
	row := kvHeads * headDim
	c := r.alloc(dt, maxSeq, kvHeads, headDim)
	src := r.f32(vals, maxSeq, row)
	for p := 0; p < maxSeq; p += 5 {
		n := min(5, maxSeq-p)
		r.b.CopySlice(c, p*row, src, p*row, n*row)
	}
	held := append([]float32(nil), vals...)
	if dt == dtype.F16 {
		for i, v := range held {
			held[i] = dtype.F16ToF32(dtype.F32ToF16(v))
		}
	}
	return c, held
}

// f16Specials are values whose f16 rounding is decided at an edge: exact
// ties (to even, up and down), the largest finite half and the first value
// that overflows, subnormal halves and their ties, underflow to zero, and
// signed zeros and infinities.
var f16Specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1,
	1 + 0x1p-11, 1 + 3*0x1p-11, -(1 + 3*0x1p-11), 1 + 0x1p-11 + 0x1p-20,
	2048 + 1, 2048 + 3, 65504, 65519, 65520, -65520, 1e6, -1e6,
	0x1p-14, 0x1p-14 - 0x1p-25, 0x1p-24, 0x1p-25, 3 * 0x1p-25, -5 * 0x1p-25, 0x1p-26, 1e-30,
	float32(math.Inf(1)), float32(math.Inf(-1)),
}

// TestCopySliceF16 checks the append to an f16 cache bit for bit against
// dtype.F32ToF16 (nearest, ties to even), and F16-to-F16 copies.
func TestCopySliceF16(t *testing.T) { eachDevice(t, testCopySliceF16) }

func testCopySliceF16(t *testing.T, dev *Backend) {
	r := rt{t, dev}
	rng := rand.New(rand.NewPCG(1, 16))
	vals := append([]float32(nil), f16Specials...)
	vals = append(vals, float32(math.NaN()))
	for _, scale := range []float64{1, 1e-3, 1e-6, 3e4} {
		for range 200 {
			vals = append(vals, float32(scale*(2*rng.Float64()-1)))
		}
	}
	n := len(vals)
	src := r.f32(vals, n)
	dst := r.alloc(dtype.F16, n+10)
	// An unaligned destination and source, and a split into two appends.
	r.b.CopySlice(dst, 3, src, 0, 100)
	r.b.CopySlice(dst, 103, src, 100, n-100)
	got := r.readF16(dst, n+10)
	for i, v := range vals {
		want := dtype.F32ToF16(v)
		g := got[3+i]
		if math.IsNaN(float64(v)) {
			if f := dtype.F16ToF32(g); !math.IsNaN(float64(f)) {
				t.Errorf("NaN stored as %#04x (%v)", g, f)
			}
			continue
		}
		if g != want {
			t.Errorf("%g (%#08x) stored as %#04x, want %#04x", v, math.Float32bits(v), g, want)
		}
	}
	for _, i := range []int{0, 1, 2, n + 3, n + 9} {
		if got[i] != 0 {
			t.Errorf("element %d outside the copies is %#04x", i, got[i])
		}
	}

	dst2 := r.alloc(dtype.F16, 40)
	r.b.CopySlice(dst2, 1, dst, 5, 30)
	got2 := r.readF16(dst2, 40)
	for i := range 30 {
		if got2[1+i] != got[5+i] {
			t.Fatalf("F16 copy: element %d is %#04x, want %#04x", i, got2[1+i], got[5+i])
		}
	}

}

// TestCacheTypeErrors checks CopySlice's cache conversions that do not
// exist and attention's refusal of caches it cannot read, each on a fresh
// backend since errors are sticky.
func TestCacheTypeErrors(t *testing.T) { eachDevice(t, testCacheTypeErrors) }

func testCacheTypeErrors(t *testing.T, dev *Backend) {
	cases := []struct {
		name, want string
		op         func(b *Backend, f32, f16, bf16, q8, q4k, q backend.Tensor)
	}{
		{"F16 into BF16", "want both F32", func(b *Backend, _, f16, bf16, _, _, _ backend.Tensor) { b.CopySlice(bf16, 0, f16, 0, 4) }},
		{"F32 into Q4_K", "want both F32", func(b *Backend, f32, _, _, _, q4k, _ backend.Tensor) { b.CopySlice(q4k, 0, f32, 0, 8) }},
		{"Q8_0 part of a block", "whole blocks", func(b *Backend, f32, _, _, q8, _, _ backend.Tensor) { b.CopySlice(q8, 0, f32, 0, 4) }},
		{"BF16 K cache", "needs flash attention", func(b *Backend, _, f16, bf16, _, _, q backend.Tensor) {
			b.Attention(q, q, bf16, f16, 1, causal(t, b, 1, 0), backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5})
		}},
		{"BF16 V cache", "needs flash attention", func(b *Backend, _, f16, bf16, _, _, q backend.Tensor) {
			b.Attention(q, q, f16, bf16, 1, causal(t, b, 1, 0), backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5})
		}},
		{"Q8_0 V cache", "a quantised or BF16 V needs flash attention", func(b *Backend, _, f16, _, q8, _, q backend.Tensor) {
			b.Attention(q, q, f16, q8, 1, causal(t, b, 1, 0), backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5})
		}},
		{"Q4_K cache", "is not F32, F16, BF16", func(b *Backend, _, f16, _, _, q4k, q backend.Tensor) {
			b.Attention(q, q, f16, q4k, 1, causal(t, b, 1, 0), backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5, Flash: true})
		}},
		{"Q8_0 of head size 4", "whole number of its 32-element blocks", func(b *Backend, _, f16, _, q8, _, q backend.Tensor) {
			b.Attention(q, q, f16, q8, 1, causal(t, b, 1, 0), backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 4, Scale: 0.5, Flash: true})
		}},
	}
	for _, c := range cases {
		b := another(t, dev)
		f32, _ := b.Alloc(dtype.F32, 2, 1, 4)
		f16, _ := b.Alloc(dtype.F16, 2, 1, 4)
		bf16, _ := b.Alloc(dtype.BF16, 2, 1, 4)
		q8, _ := b.Alloc(dtype.Q8_0, 1, 32)
		q4k, _ := b.Alloc(dtype.Q4_K, 1, 256)
		q, _ := b.Alloc(dtype.F32, 1, 8)
		c.op(b, f32, f16, bf16, q8, q4k, q)
		if err := b.Err(); !errors.Is(err, backend.ErrShape) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want a shape error saying %q", c.name, err, c.want)
		}
		b.Close()
	}
}

// refCacheAttention is attention as llama.cpp computes it over caches with
// K of type kt and V of type vt, in float64 except at its rounding points
// (round = false leaves them out): with K F16 the query is rounded to f16
// before the dot products; the probabilities are normalised,
// p_j = e^(s_j−M)/Σ e^(s_j−M); with V F16 each p_j is rounded to f16 before
// it weights V. k and v hold what the caches store. Row i sees positions
// < pos0+i+1.
//
// It returns mag = Σ_j p_j·|v_jd| and slack: float32 arithmetic computes p_j
// within a relative pDelta of the exact value, so where [p_j(1−δ), p_j(1+δ)]
// spans an f16 rounding boundary the backend may round either way; slack
// allows that one f16 step of p_j times |v_jd|.
func refCacheAttention(q, k, v []float32, kt, vt dtype.Type, round bool, n, pos0, heads, kvHeads, hd int, scale float32) (want, mag, slack []float64) {
	cols, kvCols := heads*hd, kvHeads*hd
	want, mag, slack = make([]float64, n*cols), make([]float64, n*cols), make([]float64, n*cols)
	r16 := func(x float64) float64 { return float64(dtype.F16ToF32(dtype.F32ToF16(float32(x)))) }
	qd := make([]float64, hd)
	for i := range n {
		L := pos0 + i + 1
		for h := range heads {
			kh := h / (heads / kvHeads)
			for c := range hd {
				qd[c] = float64(q[i*cols+h*hd+c])
				if round && kt == dtype.F16 {
					qd[c] = r16(qd[c])
				}
			}
			s := make([]float64, L)
			mx := math.Inf(-1)
			for j := range L {
				var d float64
				for c := range hd {
					d += qd[c] * float64(k[j*kvCols+kh*hd+c])
				}
				s[j] = d * float64(scale)
				mx = math.Max(mx, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			o := i*cols + h*hd
			for j := range s {
				p, flip := s[j]/sum, 0.0
				if round && vt == dtype.F16 {
					lo, hi := r16(p*(1-pDelta)), r16(p*(1+pDelta))
					flip = hi - lo
					p = r16(p)
				}
				for c := range hd {
					vv := float64(v[j*kvCols+kh*hd+c])
					want[o+c] += p * vv
					mag[o+c] += p * math.Abs(vv)
					slack[o+c] += flip * math.Abs(vv)
				}
			}
		}
	}
	return want, mag, slack
}

// pDelta bounds the relative error of a probability computed in float32:
// exp (≤ 3 ulp in OpenCL), the sum of up to ~1000 terms (a few tens of ulp
// in the order of the kernels' partial sums), 1/sum (≤ 2.5 ulp) and the
// product, plus the score's own rounding, amplified by exp into a relative
// error of about |Δs| (≲ 1e-6 for |s| ≲ 10 here): 4e-6 in all.
const pDelta = 4e-6

// TestAttentionCacheTypes runs decode and prefill attention over every
// pair of cache types against refCacheAttention: GQA, odd head sizes, heads
// narrower and wider than the work-group, contexts inside one chunk and
// across several, and the flash-decoding split. It also checks that the
// rounding points are really applied: where they move the result by more
// than the tolerance, the result must be nearer the reference with them
// than the one without.
func TestAttentionCacheTypes(t *testing.T) { eachDevice(t, testAttentionCacheTypes) }

func testAttentionCacheTypes(t *testing.T, dev *Backend) {
	b := dev
	type ac struct{ n, pos0, heads, kvHeads, hd, parts int }
	cases := []ac{
		{1, 0, 4, 2, 8, 0}, {1, 2, 4, 2, 8, 0}, {1, 6, 6, 2, 5, 0}, {1, 299, 6, 2, 40, 0}, {1, 999, 8, 1, 64, 0},
		{1, 299, 6, 2, 40, 3}, {1, 999, 3, 1, 80, 7}, {1, 5, 4, 4, 16, 2}, {1, 600, 4, 1, 67, 4},
		{3, 0, 4, 2, 8, 0}, {17, 0, 8, 1, 67, 0}, {5, 9, 6, 3, 5, 0}, {17, 290, 4, 2, 80, 0}, {9, 40, 4, 2, 64, 0},
	}
	types := []dtype.Type{dtype.F32, dtype.F16}
	rng := rand.New(rand.NewPCG(2, 16))
	for _, c := range cases {
		for _, kt := range types {
			for _, vt := range types {
				name := fmt.Sprintf("n%d/pos%d/h%d/kv%d/d%d/parts%d/K%v/V%v", c.n, c.pos0, c.heads, c.kvHeads, c.hd, c.parts, kt, vt)
				t.Run(name, func(t *testing.T) {
					r := rt{t, b}
					cols, kvCols := c.heads*c.hd, c.kvHeads*c.hd
					maxSeq := c.pos0 + c.n + 3
					q := randRange(rng, (c.n+1)*cols, -3, 3)
					kv := randRange(rng, maxSeq*kvCols, -1, 1)
					vv := randRange(rng, maxSeq*kvCols, -1, 1)
					// Positions past the visible ones hold large values, so
					// that reading them shows as a gross error.
					for i := (c.pos0 + c.n) * kvCols; i < len(kv); i++ {
						kv[i] *= 100
						vv[i] *= 100
					}
					qt := r.f32(q, c.n+1, cols)
					kc, kh := r.cache(kt, kv, maxSeq, c.kvHeads, c.hd)
					vc, vh := r.cache(vt, vv, maxSeq, c.kvHeads, c.hd)
					o := r.f32(make([]float32, (c.n+1)*cols), c.n+1, cols)
					scale := float32(1 / math.Sqrt(float64(c.hd)))
					// parts 0 leaves the split to the heuristic, which on a
					// device of few compute units splits some contexts too.
					b.attnParts = c.parts
					split := b.attnPartitions(c.n, c.pos0+1, c.heads) > 1
					view := causal(t, b, c.n, c.pos0)
					before := b.Stats().Launches
					b.Attention(o, qt, kc, vc, c.n, view, backend.Attn{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: scale})
					launches := b.Stats().Launches - before
					b.attnParts = 0
					got := r.read(o, (c.n+1)*cols)
					if want := map[bool]int64{true: 3, false: 1}[split]; launches != want {
						t.Errorf("%d launches, want %d", launches, want)
					}
					want, mag, slack := refCacheAttention(q, kh, vh, kt, vt, true, c.n, c.pos0, c.heads, c.kvHeads, c.hd, scale)
					// 1e-5 of Σ p·|v|, as the conformance suite allows for
					// float32 scores and sums (backendtest's attnTol).
					const tol = 1e-5
					var errWith, errWithout, moved float64
					plain, _, _ := refCacheAttention(q, kh, vh, kt, vt, false, c.n, c.pos0, c.heads, c.kvHeads, c.hd, scale)
					bad := 0
					for i := range want {
						d := math.Abs(float64(got[i]) - want[i])
						if !(d <= tol*mag[i]+slack[i]) {
							if bad < 5 {
								t.Errorf("out[%d] = %g, want %g (|Δ| %.3g > %.3g)", i, got[i], want[i], d, tol*mag[i]+slack[i])
							}
							bad++
						}
						errWith = math.Max(errWith, d/mag[i])
						errWithout = math.Max(errWithout, math.Abs(float64(got[i])-plain[i])/mag[i])
						moved = math.Max(moved, math.Abs(want[i]-plain[i])/mag[i])
					}
					if bad > 0 {
						t.Errorf("%d of %d outside tolerance", bad, len(want))
					}
					t.Logf("rounding points move the result by %.3g of Σp|v|; error %.3g with them, %.3g without", moved, errWith, errWithout)
					if moved > 4*tol && !(errWith < errWithout/2) {
						t.Errorf("the rounding points move the result by %.3g of Σp|v|, yet the result is %.3g from the reference with them and %.3g from the one without",
							moved, errWith, errWithout)
					}
					for i, g := range got[c.n*cols:] {
						if g != 0 {
							t.Fatalf("row past n: element %d written (%g)", i, g)
						}
					}
				})
			}
		}
	}
}

// causal uploads backendtest.Causal(n, pos0) to b for the test's life.
func causal(t *testing.T, b backend.Backend, n, pos0 int) backend.KVView {
	t.Helper()
	v, err := backendtest.Causal(n, pos0).Upload(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(v.Rows); b.Free(v.Cells) })
	return v
}

func randRange(rng *rand.Rand, n int, lo, hi float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = lo + (hi-lo)*rng.Float32()
	}
	return out
}

// roundSpecials are activations whose F16 or BF16 rounding is decided at an
// edge (ties at both precisions, f16 subnormals and underflow), all within
// f16's finite range: the identity test below multiplies every activation
// by 0 as well, and an infinity would make that NaN.
var roundSpecials = []float32{
	0, 1, -1, 1 + 0x1p-11, 1 + 3*0x1p-11, -(1 + 3*0x1p-11), 1 + 0x1p-8, 1 + 3*0x1p-8, -(1 + 0x1p-8 + 0x1p-20),
	2048 + 1, 65504, 65519, -65519, 0x1p-14, 0x1p-14 - 0x1p-25, 0x1p-24, 0x1p-25, 3 * 0x1p-25, -5 * 0x1p-25,
	1e-30, 3e-39, -3e-39, 1e-40,
}

// weightBytes stores w as dt (F16 or BF16 values are exact here: the tests
// use 0, ±1 and values made by rounding).
func weightBytes(dt dtype.Type, w []float32) []byte {
	out := make([]byte, 2*len(w))
	for i, v := range w {
		h := dtype.F32ToF16(v)
		if dt == dtype.BF16 {
			h = dtype.F32ToBF16(v)
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out
}

// TestMatMulActivationRounding checks, on both kernel variants, decode and
// prefill, that F16 and BF16 weights see their activations rounded as
// dtype.RoundActivations defines. An identity weight reads the rounded
// activations back exactly, special values included (products with 0 and 1
// and sums with zeros are exact); random weights are compared with a
// float64 dot of the rounded activations, within 1e-5 of Σ|x·w| (float32
// sums of exact products, as in the conformance suite).
func TestMatMulActivationRounding(t *testing.T) { eachDevice(t, testMatMulActivationRounding) }

func testMatMulActivationRounding(t *testing.T, dev *Backend) {
	rng := rand.New(rand.NewPCG(3, 16))
	for vi, b := range []*Backend{dev, otherVariant(t, dev)} {
		r := rt{t, b}
		for _, dt := range []dtype.Type{dtype.F16, dtype.BF16} {
			at := dt.ActivationType()
			paired := dt == dtype.BF16 && b.flavour.BF16()
			// Identity: K = 85 has five 16-element groups, which the
			// matrix-vector kernel rounds as vectors and which hold every
			// special value for n = 1, and a tail it rounds one by one.
			const K = 85
			id := make([]float32, K*K)
			for o := range K {
				id[o*K+o] = 1
			}
			w, err := b.Weight("id", dt, []int{K, K}, weightBytes(dt, id))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 2, 20} {
				x := make([]float32, n*K)
				for i := range x {
					if i%3 == 0 {
						x[i] = roundSpecials[(i/3)%len(roundSpecials)]
					} else {
						x[i] = float32(max(-6e4, min(6e4, rng.NormFloat64()*math.Exp(4*rng.NormFloat64()))))
					}
				}
				xt, dst := r.f32(x, n, K), r.alloc(dtype.F32, n, K)
				b.MatMulTransposed(dst, xt, w, n)
				got := r.read(dst, n*K)
				want := make([]float32, n*K)
				dtype.RoundActivations(at, want, x)
				for i := range want {
					// vdpbf16ps (the AVX512_BF16 flavour's BF16 sums) takes
					// subnormals as zero in its 64-element steps.
					if paired && i%K < K&^63 && math.Abs(float64(want[i])) < 0x1p-126 {
						want[i] = 0
					}
					if got[i] != want[i] {
						t.Errorf("variant %d %v identity n=%d: x=%g (%#08x) read as %g, want %g", vi, dt, n, x[i], math.Float32bits(x[i]), got[i], want[i])
					}
				}
			}
			b.Free(w)

			for _, s := range [][2]int{{19, 37}, {67, 100}, {130, 545}} {
				m, k := s[0], s[1]
				wf := make([]float32, m*k)
				for i := range wf {
					wf[i] = 2*rng.Float32() - 1
				}
				dtype.RoundActivations(at, wf, wf) // exact in dt
				w, err := b.Weight("w", dt, []int{m, k}, weightBytes(dt, wf))
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range []int{1, 3, 17} {
					x := randRange(rng, n*k, -2, 2)
					xt, dst := r.f32(x, n, k), r.alloc(dtype.F32, n, m)
					b.MatMulTransposed(dst, xt, w, n)
					got := r.read(dst, n*m)
					xr := make([]float32, len(x))
					dtype.RoundActivations(at, xr, x)
					for i := range n {
						for o := range m {
							var sum, mag float64
							for c := range k {
								p := float64(xr[i*k+c]) * float64(wf[o*k+c])
								sum += p
								mag += math.Abs(p)
							}
							if d := math.Abs(float64(got[i*m+o]) - sum); !(d <= 1e-5*mag) {
								t.Fatalf("variant %d %v [%d,%d] n=%d: dst[%d,%d] = %g, want %g (|Δ| %.3g > %.3g)", vi, dt, m, k, n, i, o, got[i*m+o], sum, d, 1e-5*mag)
							}
						}
					}
				}
				b.Free(w)
			}
		}
	}
}

// TestFloatMatMulBits checks that a matmul with float weights sums in the
// CPU backend's order (llama.cpp's: tinyBLAS's lanes or vec_dot's, of the
// flavour; numerics.Order, weights.cl's fs_t) and so gives its bits, keys
// and values then reaching the scores alike over an f32 cache: prefill
// (mmc_T on a CPU device, mmt_T on a GPU and where mmc_T has not the
// order) on every device, decode where a work-item owns a row (a CPU
// device; a GPU's lanes per row sum in another order).
func TestFloatMatMulBits(t *testing.T) { eachDevice(t, testFloatMatMulBits) }

func testFloatMatMulBits(t *testing.T, dev *Backend) {
	f := newFixture(t, dev)
	for _, dt := range []dtype.Type{dtype.F32, dtype.F16, dtype.BF16} {
		for _, k := range []int{64, 172, 1000} {
			for _, m := range []int{37, 40} {
				w := f.weight(dt, []int{m, k}, randomWeight(f.rng, dt, m, k))
				for _, n := range []int{1, 5, 21} {
					if n == 1 && !f.o.mat.cpu {
						continue
					}
					x := f.f32(f.rand(n*k, -3, 3), n, k)
					d := f.f32(nil, n, m)
					f.c.MatMulTransposed(d.c, x.c, w.c, n)
					f.o.MatMulTransposed(d.o, x.o, w.o, n)
					c, o := f.read(d, n*m)
					f.close(fmt.Sprintf("%v [%d,%d] n=%d", dt, m, k, n), c, o, nil, 0, 0)
				}
			}
		}
	}
}

// TestFloatOrderNumbers checks that weights.cl's FS_* modes are the numbers
// numerics.Order gives the orders, which the host passes to fs_t as is.
func TestFloatOrderNumbers(t *testing.T) {
	for name, o := range map[string]numerics.Order{
		"FS_VEC8": numerics.SumVec8, "FS_VEC16": numerics.SumVec16, "FS_TINY8": numerics.SumTiny8,
		"FS_TINY16": numerics.SumTiny16, "FS_VECBF": numerics.SumVecBF16, "FS_TINYBF": numerics.SumTinyBF16,
	} {
		if want := fmt.Sprintf("#define %s %d\n", name, o); !strings.Contains(kernels.Source(), want) {
			t.Errorf("weights.cl lacks %q", strings.TrimSpace(want))
		}
	}
}
