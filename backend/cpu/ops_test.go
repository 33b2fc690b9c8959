package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// siluInputs are the gates TestSiLUMulSIMD checks besides random ones:
// zeros, subnormals, both sides of where e^−|x| turns subnormal (−87.3) and
// zero (−103.97), far beyond both, infinities and NaN.
var siluInputs = []float32{
	0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-30, -1e-30, 0.5, -0.5, 1, -1, 10, -10,
	-50, -80, -87, -87.5, -88.7, -89, -95, -100, -103, -103.9, -104, -104.5, -150, -1e30,
	50, 80, 88.7, 89, 100, 1e30, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
	math.MaxFloat32, -math.MaxFloat32,
}

// TestSiLUMulSIMD checks SiLUMul at every level against float64 arithmetic
// on lengths around the 8- and 16-lane widths, over the extreme gates
// above, random ones from −20 to 20 and an even sweep from −110 to 30.
//
// Tolerance 6e-7·|want|, five float32 ulp: exp is within 2 ulp, and 1+t,
// x·t, the division and the product with u add half an ulp each (the Go
// path, exp in float64, needs one). Where e^−|x| is subnormal its absolute
// error is up to 2⁻¹⁵⁰ instead, so |x·u|·2⁻¹⁴⁹ is allowed on top, and 2⁻¹⁴⁹
// for the rounding of a subnormal result.|x·u|·2⁻¹⁴⁹ is allowed on top.
func TestSiLUMulSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const sweep = 20011 // −110…30, through the subnormal range of e^x
	for _, n := range []int{1, 7, 15, 16, 17, 33, len(siluInputs), 1000 + 7, sweep} {
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			switch n {
			case len(siluInputs):
				g[i], u[i] = siluInputs[i], 1.5
			case sweep:
				g[i], u[i] = -110+140*float32(i)/sweep, 1
			default:
				g[i], u[i] = 40*rng.Float32()-20, 4*rng.Float32()-2
			}
		}
		for _, l := range simdLevels() {
			name := fmt.Sprintf("%v/n=%d", l, n)
			got := runSiLUMul(t, l, g, u)
			worst := 0.0
			for i, x := range g {
				want := float64(x) / (1 + math.Exp(-float64(x))) * float64(u[i])
				d := float64(got[i])
				if w32 := float64(float32(want)); math.IsNaN(want) || math.IsInf(w32, 0) {
					// Overflow of the float32 result is exact too.
					if !(math.IsNaN(want) && math.IsNaN(d)) && d != w32 {
						t.Errorf("%s: silu(%g)·%g = %g, want %g", name, x, u[i], d, w32)
					}
					continue
				}
				tol := 6e-7*math.Abs(want) + math.Abs(float64(x)*float64(u[i]))*0x1p-149 + 0x1p-149
				if e := math.Abs(d - want); e > tol {
					t.Errorf("%s: silu(%g)·%g = %g, want %g (|Δ| %.3g > %.3g)", name, x, u[i], d, want, e, tol)
				} else if want != 0 && math.Abs(float64(x)) < 87 { // e^−|x| normal
					worst = max(worst, e/math.Abs(want))
				}
			}
			t.Logf("%s: worst relative error where e^−|x| is normal %.3g", name, worst)
		}
	}
}

// runSiLUMul runs SiLUMul at level l on one row of g and u, through the
// backend so that the dispatch is covered.
func runSiLUMul(t *testing.T, l simdLevel, g, u []float32) []float32 {
	t.Helper()
	b := newAt(2, l)
	defer b.Close()
	n := len(g)
	gt, _ := b.Alloc(dtype.F32, 1, n)
	ut, _ := b.Alloc(dtype.F32, 1, n)
	dt, _ := b.Alloc(dtype.F32, 1, n)
	if err := b.WriteF32(gt, 0, g); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteF32(ut, 0, u); err != nil {
		t.Fatal(err)
	}
	b.SiLUMul(dt, gt, ut, 1)
	got := make([]float32, n)
	if err := b.ReadF32(dt, 0, got); err != nil {
		t.Fatal(err)
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestAttentionSIMD checks attentionItems at every level against float64
// arithmetic, at head sizes the suite does not reach (24 and 40: a masked
// last register; 128: the largest the C kernel holds; 136: past it, so the
// Go loop runs) and groups of 1, 3 and 8 query heads per kv head (3 is run
// as 2 + 1 by the kernel). Items are handed over in chunks of 5 that cut
// through groups, as the pool never does at a SIMD level but may at
// another grain.
//
// Tolerance 1e-5·Σ_j p_j·|v_j|, the conformance suite's: float32 scores
// (error ≲ 2⁻²⁴·√d·Σ|q·k|, through exp) and a float32 weighted sum.
func TestAttentionSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type ac struct{ n, pos0, kvLen, heads, kvHeads, headDim int }
	cases := []ac{
		{1, 0, 300, 8, 1, 64}, {1, 0, 17, 6, 2, 24}, {1, 0, 1, 5, 5, 40},
		{9, 0, 0, 6, 2, 64}, {7, 5, 0, 4, 4, 24}, {5, 30, 0, 8, 1, 40},
		{3, 2, 0, 4, 2, 128}, {3, 2, 0, 4, 2, 136}, {2, 0, 0, 2, 1, 8},
	}
	for _, c := range cases {
		cols, kvCols := c.heads*c.headDim, c.kvHeads*c.headDim
		maxSeq := max(c.kvLen, c.pos0+c.n) + 2
		rnd := func(n int, a float32) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = a * (2*rng.Float32() - 1)
			}
			return x
		}
		q, k, v := rnd(c.n*cols, 3), rnd(maxSeq*kvCols, 1), rnd(maxSeq*kvCols, 1)
		scale := float32(1 / math.Sqrt(float64(c.headDim)))
		want, mag := refAttentionF64(q, k, v, c.n, c.pos0, c.kvLen, c.heads, c.kvHeads, c.headDim, scale)
		for _, l := range simdLevels() {
			name := fmt.Sprintf("%v/%+v", l, c)
			b := newAt(1, l)
			out := make([]float32, c.n*cols)
			simd, rows := simdOff, 1
			if l > simdOff && simdAttentionOK(c.headDim) {
				simd, rows = l, attnScoreRows
			}
			b.scratch[0].scores = make([]float32, rows*maxSeq)
			tk := task{kind: kAttention, total: c.n * c.heads, dst: out, q: q, kc: k, vc: v, n: c.n,
				heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, qStride: cols, pos0: c.pos0,
				kvLen: c.kvLen, scale: scale, simd: simd}
			for lo := 0; lo < tk.total; lo += 5 {
				b.attentionItems(&tk, 0, lo, min(lo+5, tk.total))
			}
			b.Close()
			bad := 0
			for i, w := range want {
				if e := math.Abs(float64(out[i]) - w); !(e <= 1e-5*mag[i]) {
					if bad++; bad <= 5 {
						t.Errorf("%s: out[%d] = %g, want %g (|Δ| %.3g > %.3g)", name, i, out[i], w, e, 1e-5*mag[i])
					}
				}
			}
		}
	}
}

// refAttentionF64 is attention in float64: row r sees kvLen positions, or
// pos0+r+1 when kvLen is 0. mag is Σ_j p_j·|v_j| per output.
func refAttentionF64(q, k, v []float32, n, pos0, kvLen, heads, kvHeads, hd int, scale float32) (want, mag []float64) {
	cols, kvCols, group := heads*hd, kvHeads*hd, heads/kvHeads
	want, mag = make([]float64, n*cols), make([]float64, n*cols)
	for r := range n {
		L := kvLen
		if L == 0 {
			L = pos0 + r + 1
		}
		for h := range heads {
			qh := q[r*cols+h*hd : r*cols+(h+1)*hd]
			off := h / group * hd
			s := make([]float64, L)
			mx := math.Inf(-1)
			for j := range L {
				for d, x := range qh {
					s[j] += float64(x) * float64(k[j*kvCols+off+d])
				}
				s[j] *= float64(scale)
				mx = max(mx, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			for j, p := range s {
				for d := range hd {
					x := float64(v[j*kvCols+off+d])
					want[r*cols+h*hd+d] += p / sum * x
					mag[r*cols+h*hd+d] += p / sum * math.Abs(x)
				}
			}
		}
	}
	return want, mag
}
