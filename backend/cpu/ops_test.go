package cpu

import (
	"fmt"
	"math"
	"math/big"
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

// TestSiLUMulSIMD checks SiLUMul at every level on lengths around the 8-
// and 16-lane widths, over the extreme gates above, random ones from −20 to
// 20 and an even sweep from −110 to 30: every level's bits must equal the
// portable path's, and that must be within 6e-7·|want| (five float32 ulp:
// ggml's exp is within 2 ulp, 1+t, the division and the product with u add
// half an ulp each) of float64 arithmetic where e^−x is a normal float32.
// Beyond that ggml's silu gives x/(1+∞) = −0 where the true value is a
// tiny negative number; only its size is checked there.
func TestSiLUMulSIMD(t *testing.T) { eachFlavor(t, testSiLUMulSIMD) }

func testSiLUMulSIMD(t *testing.T) {
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
		var ref []float32
		for _, l := range simdLevels() {
			name := fmt.Sprintf("%v/n=%d", l, n)
			got := runSiLUMul(t, l, g, u)
			if ref == nil {
				ref = got
				for i, x := range g {
					want := float64(x) / (1 + math.Exp(-float64(x))) * float64(u[i])
					d := float64(got[i])
					switch {
					case math.IsNaN(want):
						if !math.IsNaN(d) {
							t.Errorf("%s: silu(%g)·%g = %g, want NaN", name, x, u[i], d)
						}
					case x < -87:
						if !(math.Abs(d) <= math.Abs(float64(x)*float64(u[i]))*0x1p-125) {
							t.Errorf("%s: silu(%g)·%g = %g, want about 0", name, x, u[i], d)
						}
					case math.IsInf(float64(float32(want)), 0):
						if d != float64(float32(want)) {
							t.Errorf("%s: silu(%g)·%g = %g, want %g", name, x, u[i], d, float32(want))
						}
					default:
						if e := math.Abs(d - want); e > 6e-7*math.Abs(want)+0x1p-149 {
							t.Errorf("%s: silu(%g)·%g = %g, want %g (|Δ| %.3g)", name, x, u[i], d, want, e)
						}
					}
				}
				continue
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(ref[i]) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(ref[i]))) {
					t.Errorf("%s: silu(%g)·%g = %g, the portable path gives %g: the bits must agree", name, g[i], u[i], got[i], ref[i])
				}
			}
		}
	}
}

// TestFMAF checks fmaf against exact arithmetic (math/big) on random
// operands and on products built to land halfway between two float32s,
// where rounding through float64 twice goes wrong.
func TestFMAF(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	// 1+2⁻²³ times 1−2⁻²³ is 1−2⁻⁴⁶; plus 2²⁴+2 the sum is just below the
	// float32 halfway point 2²⁴+3, which float64 rounds it onto.
	if got, want := fmaf(1+0x1p-23, 1-0x1p-23, 0x1p24+2), exact(1+0x1p-23, 1-0x1p-23, 0x1p24+2); got != want || want != 0x1p24+2 {
		t.Fatalf("fmaf halfway case = %g, want %g (= 2²⁴+2)", got, want)
	}
	for i := range 200000 {
		a := float32(rng.NormFloat64())
		b := float32(rng.NormFloat64())
		c := float32(rng.NormFloat64())
		if i%2 == 1 {
			// c cancels a·b to within a few float32 ulp, leaving the
			// product's low bits to decide the rounding.
			c = -float32(float64(a) * float64(b))
			c = math.Float32frombits(math.Float32bits(c) + uint32(rng.IntN(5)) - 2)
		}
		if i%3 == 0 {
			// a·b + c halfway: c a power of two far above the product.
			c = float32(math.Ldexp(1, 24+rng.IntN(8)))
		}
		if i%5 == 0 {
			// Results in float32's subnormal range, where a halfway
			// point has fewer significant bits.
			a = float32(math.Ldexp(float64(a), -70))
			b = float32(math.Ldexp(float64(b), -70))
			c = float32(math.Ldexp(float64(rng.NormFloat64()), -140))
		}

		if got, want := fmaf(a, b, c), exact(a, b, c); got != want {
			t.Fatalf("fmaf(%g, %g, %g) = %g, want %g", a, b, c, got, want)
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

// TestAttentionSIMD checks attentionItems at every level and over F32 and
// F16 caches against float64 arithmetic with the f16 rounding points, and
// requires every level's bits to equal the portable path's. Head sizes
// cover a masked last register (24, 40, 36), the largest the C kernel
// holds (256) and one past it (264: the Go loop runs), with groups of 1, 3
// and 8 query heads per kv head. Items are handed over in chunks of 5 that
// cut through groups, as the pool never does at a SIMD level but may at
// another grain.
//
// Tolerance 1e-5·Σ_j p_j·|v_j|: float32 scores (error ≲ 2⁻²⁴·√d·Σ|q·k|,
// through exp); over an F16 V the reference rounds its float64 p to f16
// while the kernel rounds its float32 p, which can round one probability
// the other way, so 2⁻¹⁰·max_j p_j·|v_j| more is allowed there.
func TestAttentionSIMD(t *testing.T) { eachFlavor(t, testAttentionSIMD) }

func testAttentionSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type ac struct{ n, pos0, kvLen, heads, kvHeads, headDim int }
	cases := []ac{
		{1, 0, 300, 8, 1, 64}, {1, 0, 17, 6, 2, 24}, {1, 0, 1, 5, 5, 40},
		{9, 0, 0, 6, 2, 64}, {7, 5, 0, 4, 4, 24}, {5, 30, 0, 8, 1, 40},
		{3, 2, 0, 4, 2, 256}, {3, 2, 0, 4, 2, 264}, {2, 0, 0, 2, 1, 8}, {4, 3, 0, 6, 2, 36},
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
		for _, half := range []struct{ k, v bool }{{false, false}, {true, true}, {false, true}, {true, false}} {
			var kh, vh []uint16
			kr, vr := k, v
			if half.k {
				kh, kr = toHalf(k)
			}
			if half.v {
				vh, vr = toHalf(v)
			}
			qr := q
			if half.k {
				qr = append([]float32(nil), q...)
				dtype.RoundActivations(dtype.F16, qr, qr)
			}
			want, mag, big := refAttentionF64(qr, kr, vr, c.n, c.pos0, c.kvLen, c.heads, c.kvHeads, c.headDim, scale, half.v)
			var ref []float32
			for _, l := range simdLevels() {
				name := fmt.Sprintf("%v/%+v/f16 k %v v %v", l, c, half.k, half.v)
				b := newAt(1, l)
				out := make([]float32, c.n*cols)
				simd, rows := simdOff, 1
				if l > simdOff && simdAttentionOK(c.headDim) {
					simd, rows = l, attnScoreRows
				}
				b.scratch[0].scores = make([]float32, rows*(maxSeq+15))
				b.scratch[0].row, b.scratch[0].acc = make([]float32, 2*c.headDim), make([]float64, c.headDim)
				tk := task{kind: kAttention, total: c.n * c.heads, dst: out, q: q, n: c.n,
					heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, qStride: cols, pos0: c.pos0,
					kvLen: c.kvLen, scale: scale, simd: simd}
				if half.k {
					tk.kh = kh
				} else {
					tk.kc = k
				}
				if half.v {
					tk.vh = vh
				} else {
					tk.vc = v
				}
				for lo := 0; lo < tk.total; lo += 5 {
					b.attentionItems(&tk, 0, lo, min(lo+5, tk.total))
				}
				b.Close()
				bad := 0
				for i, w := range want {
					tol := 1e-5 * mag[i]
					if half.v {
						tol += 0x1p-10 * big[i]
					}
					if e := math.Abs(float64(out[i]) - w); !(e <= tol) {
						if bad++; bad <= 5 {
							t.Errorf("%s: out[%d] = %g, want %g (|Δ| %.3g > %.3g)", name, i, out[i], w, e, tol)
						}
					}
				}
				if ref == nil {
					ref = out
					continue
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(ref[i]) {
						if bad++; bad <= 5 {
							t.Errorf("%s: out[%d] = %g, the portable path gives %g: the bits must agree", name, i, out[i], ref[i])
						}
					}
				}
			}
		}
	}
}

// toHalf rounds x to f16, returning the halves and their float32 values.
func toHalf(x []float32) ([]uint16, []float32) {
	h, r := make([]uint16, len(x)), make([]float32, len(x))
	for i, v := range x {
		h[i] = dtype.F32ToF16(v)
		r[i] = dtype.F16ToF32(h[i])
	}
	return h, r
}

// refAttentionF64 is attention in float64: row r sees kvLen positions, or
// pos0+r+1 when kvLen is 0; roundP rounds each probability to f16 before it
// weights V. mag is Σ_j p_j·|v_j| per output, big max_j p_j·|v_j|.
func refAttentionF64(q, k, v []float32, n, pos0, kvLen, heads, kvHeads, hd int, scale float32, roundP bool) (want, mag, big []float64) {
	cols, kvCols, group := heads*hd, kvHeads*hd, heads/kvHeads
	want, mag, big = make([]float64, n*cols), make([]float64, n*cols), make([]float64, n*cols)
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
			for j := range s {
				s[j] /= sum
				if roundP {
					s[j] = float64(dtype.F16ToF32(dtype.F32ToF16(float32(s[j]))))
				}
			}
			for j, p := range s {
				for d := range hd {
					x := float64(v[j*kvCols+off+d])
					o := r*cols + h*hd + d
					want[o] += p * x
					mag[o] += p * math.Abs(x)
					big[o] = max(big[o], p*math.Abs(x))
				}
			}
		}
	}
	return want, mag, big
}

// eachFlavor runs test once per ggml arithmetic this host can run (see
// flavor.go): the AVX2 one everywhere, the AVX-512 one where the CPU has
// it, each checked at every kernel level.
func eachFlavor(t *testing.T, test func(t *testing.T)) {
	saved := ggml512
	defer func() { ggml512 = saved }()
	for _, f := range []bool{false, true} {
		if f && hostSIMD < simdAVX512 {
			continue
		}
		ggml512 = f
		t.Run(map[bool]string{false: "avx2-flavour", true: "avx512-flavour"}[f], test)
	}
}
