package cpu

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
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
// holds (256) and one past it (264: the Go loop runs), sizes that leave
// vec_dot a remainder not a multiple of 4 and that sgemm declines (30, 9),
// with groups of 1, 3, 4 and 8 query heads per kv head, and views of up to
// 1,501 cells (long ones: Llama 3.2 1B's 32 heads on 8). Besides one sequence
// (the causal view kvcache gives) the views hold several sequences
// interleaved, in regions with holes and shuffled positions, shared cells,
// sliding windows, soft capping and rows that see nothing. Items are
// handed over in chunks of 5 that cut through groups and rows, as the pool
// never does at a SIMD level but may at another grain.
//
// Tolerance 1e-5·Σ_j p_j·|v_j|: float32 scores (error ≲ 2⁻²⁴·√d·Σ|q·k|,
// through exp) and float32 sums over V; over an F16 V the reference rounds
// its float64 p to f16 while the kernel rounds its float32 p, which can
// round one probability the other way, so 2⁻¹⁰·max_j p_j·|v_j| more is
// allowed there.
func TestAttentionSIMD(t *testing.T) { eachFlavor(t, testAttentionSIMD) }

func testAttentionSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type ac struct {
		name                    string
		view                    backendtest.View
		heads, kvHeads, headDim int
		window                  int
		softCap                 float32
	}
	cases := []ac{
		{"decode", backendtest.Causal(1, 299), 8, 1, 64, 0, 0}, {"decode", backendtest.Causal(1, 16), 6, 2, 24, 0, 0},
		{"decode", backendtest.Causal(1, 0), 5, 5, 40, 0, 0},
		{"prefill", backendtest.Causal(9, 0), 6, 2, 64, 0, 0}, {"prefill", backendtest.Causal(7, 5), 4, 4, 24, 0, 0},
		{"prefill", backendtest.Causal(5, 30), 8, 1, 40, 0, 0}, {"prefill", backendtest.Causal(3, 2), 4, 2, 256, 0, 0},
		{"prefill", backendtest.Causal(3, 2), 4, 2, 264, 0, 0}, {"prefill", backendtest.Causal(2, 0), 2, 1, 8, 0, 0},
		{"prefill", backendtest.Causal(4, 3), 6, 2, 36, 0, 0},
		{"prefill", backendtest.Causal(6, 40), 4, 2, 30, 0, 0}, {"decode", backendtest.Causal(1, 70), 4, 2, 30, 0, 0},
		{"prefill", backendtest.Causal(3, 1), 2, 1, 9, 0, 0},
		{"window", backendtest.Causal(6, 60), 6, 2, 64, 17, 0}, {"window decode", backendtest.Causal(1, 90), 6, 2, 24, 33, 0},
		{"soft cap", backendtest.Causal(5, 40), 6, 2, 64, 0, 3}, {"soft cap decode", backendtest.Causal(1, 90), 8, 1, 40, 0, 2},
		// Long views: many chunks of the group kernels, rows of caches
		// far past L2 (their prefetches), a first cell off the lanes'
		// alignment (windows), GQA groups of 4 and of 8 (two kernel
		// groups), and an odd number of cells.
		{"long decode", backendtest.Causal(1, 1500), 32, 8, 64, 0, 0},
		{"long prompt", backendtest.Prompt(3, 1100), 32, 8, 64, 0, 0},
		{"long window decode", backendtest.Causal(1, 1300), 8, 2, 64, 701, 0},
		{"long window prompt", backendtest.Prompt(4, 900), 8, 2, 64, 333, 0},
		{"long soft cap decode", backendtest.Causal(1, 777), 16, 2, 128, 0, 5},
		{"long soft cap prompt", backendtest.Causal(2, 1001), 6, 2, 40, 0, 3},
	}
	for _, v := range mixedViews(rng) {
		cases = append(cases, ac{"mixed", v, 6, 2, 24, 0, 0}, ac{"mixed", v, 8, 1, 64, 5, 0}, ac{"mixed", v, 4, 2, 40, 0, 4})
	}
	for _, c := range cases {
		n := c.view.N()
		cells := len(c.view.Cells) / 3
		cols, kvCols := c.heads*c.headDim, c.kvHeads*c.headDim
		rnd := func(n int, a float32) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = a * (2*rng.Float32() - 1)
			}
			return x
		}
		q, k, v := rnd(n*cols, 3), rnd(cells*kvCols, 1), rnd(cells*kvCols, 1)
		scale := float32(1 / math.Sqrt(float64(c.headDim)))
		visible := make([][]int, n)
		for i := range n {
			for j := range c.view.Hi {
				if c.view.Sees(i, j, c.window) {
					visible[i] = append(visible[i], j)
				}
			}
		}
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
			want, mag, big := refAttentionF64(qr, kr, vr, n, visible, c.heads, c.kvHeads, c.headDim, scale, c.softCap, half.v)
			var ref []float32
			for _, l := range simdLevels() {
				name := fmt.Sprintf("%v/%s n=%d %d/%d heads of %d window %d cap %g/f16 k %v v %v", l, c.name, n,
					c.heads, c.kvHeads, c.headDim, c.window, c.softCap, half.k, half.v)
				b := newAt(1, l)
				out := make([]float32, n*cols)
				simd, rows := simdOff, 1
				if l > simdOff && simdAttentionOK(c.headDim) {
					simd, rows = l, attnScoreRows
				}
				sc := &b.scratch[0]
				sc.scores = make([]float32, rows*(cells+15))
				sc.runs, sc.runsRow = make([]int32, 0, cells+2), -1
				sc.row = make([]float32, 2*c.headDim)
				sc.acc = make([]float32, attnAccFloats)
				tk := task{kind: kAttention, total: n * c.heads, dst: out, q: q, n: n,
					heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, qStride: cols, rows: c.view.Rows,
					cells: c.view.Cells, window: c.window, scale: scale, softCap: c.softCap, simd: simd,
					batched: batchedSeqs(c.view.Rows, n)}
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

// mixedViews are views of caches holding several sequences: three
// interleaved cell by cell (unified), each row scanning all of them; one
// region per sequence with holes and shuffled positions, rows scanning
// their own; a prefix shared by sequences 2 and 45; rows that see nothing.
// Each is a batch and, from its first row, a decode step.
func mixedViews(rng *rand.Rand) []backendtest.View {
	cell := func(v *backendtest.View, pos int, seqs ...int) {
		var m uint64
		for _, s := range seqs {
			m |= 1 << s
		}
		v.Cells = append(v.Cells, int32(pos), int32(uint32(m)), int32(uint32(m>>32)))
	}
	row := func(v *backendtest.View, pos, seq, lo, hi int) {
		v.Rows = append(v.Rows, int32(pos), int32(seq), int32(lo), int32(hi))
	}
	var u, r, s backendtest.View
	for j := range 131 {
		cell(&u, j/3, []int{0, 7, 39}[j%3])
	}
	u.Hi = 131
	row(&u, 43, 7, 0, 131)
	row(&u, 43, 0, 0, 131)
	row(&u, 20, 39, 0, 131)
	row(&u, 3, 7, 0, 131)
	for q := range 2 {
		perm := rng.Perm(50)
		for j := range 50 {
			if j%9 == 4 {
				cell(&r, 0) // a hole
				continue
			}
			cell(&r, perm[j], q)
		}
	}
	r.Hi = 100
	row(&r, 49, 1, 50, 100)
	row(&r, 25, 0, 0, 50)
	row(&r, 10, 1, 50, 100)
	row(&r, 49, 2, 0, 100) // no cell of sequence 2
	for j := range 70 {
		if j < 30 {
			cell(&s, j, 2, 45)
		} else {
			cell(&s, 30+(j-30)/2, []int{2, 45}[j%2])
		}
	}
	s.Hi = 70
	row(&s, 49, 45, 0, 70)
	row(&s, 49, 2, 0, 70)
	row(&s, 12, 45, 10, 70)
	row(&s, 5, 2, 20, 20) // an empty range
	var out []backendtest.View
	for _, v := range []backendtest.View{u, r, s} {
		out = append(out, v, backendtest.View{Rows: v.Rows[:4], Cells: v.Cells, Lo: v.Lo, Hi: v.Hi})
	}
	return out
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

// refAttentionF64 is attention in float64: row r sees the cells
// visible[r] (zeros where none), a score capped to softCap·tanh(s/softCap)
// when softCap > 0 before scale; roundP rounds each probability to f16
// before it weights V. mag is Σ_j p_j·|v_j| per output, big max_j p_j·|v_j|.
func refAttentionF64(q, k, v []float32, n int, visible [][]int, heads, kvHeads, hd int, scale, softCap float32, roundP bool) (want, mag, big []float64) {
	cols, kvCols, group := heads*hd, kvHeads*hd, heads/kvHeads
	want, mag, big = make([]float64, n*cols), make([]float64, n*cols), make([]float64, n*cols)
	for r := range n {
		for h := range heads {
			qh := q[r*cols+h*hd : r*cols+(h+1)*hd]
			off := h / group * hd
			s := make([]float64, len(visible[r]))
			mx := math.Inf(-1)
			for jj, j := range visible[r] {
				for d, x := range qh {
					s[jj] += float64(x) * float64(k[j*kvCols+off+d])
				}
				if softCap > 0 {
					s[jj] = float64(softCap) * math.Tanh(s[jj]/float64(softCap))
				}
				s[jj] *= float64(scale)
				mx = max(mx, s[jj])
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
			for jj, j := range visible[r] {
				p := s[jj]
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

// eachFlavor runs test once per ggml arithmetic (see flavor.go), each
// checked at every kernel level; without AVX-512 the AVX-512 one runs in
// Go at every level.
func eachFlavor(t *testing.T, test func(t *testing.T)) {
	defer func(f numerics.Flavour) { flavour = f }(flavour)
	for _, wide := range []bool{false, true} {
		flavour = wideFlavour(wide)
		t.Run(map[bool]string{false: "avx2-flavour", true: "avx512-flavour"}[wide], test)
	}
}

// TestRoPESIMD checks RoPE at every level against the portable path's bits
// (the C kernel calls the same cosf and sinf and rounds its fused
// multiply-adds once, as fmaf does), over the rotations models use: GGUF
// and NeoX pairs, partial rotation, Llama 3's frequency divisors, linear
// scaling and LongRoPE's factor, positions in any order and negative (a
// K-shift), for one token and a prefill.
func TestRoPESIMD(t *testing.T) {
	type rc struct {
		heads, headDim, dims int
		theta                float32
		freqs, neox          bool
		freqScale, mscale    float32
	}
	var cases []rc
	for _, neox := range []bool{false, true} {
		for _, freqs := range []bool{false, true} {
			cases = append(cases, rc{4, 64, 64, 500000, freqs, neox, 0, 0}, rc{3, 12, 8, 10000, freqs, neox, 0, 0},
				rc{2, 16, 16, 1e6, freqs, neox, 0.125, 0}, rc{2, 16, 16, 10000, freqs, neox, 0, 1.1902381})
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range cases {
		for _, n := range []int{1, 5, 130} {
			cols := c.heads * c.headDim
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = 4*rng.Float32() - 2
			}
			pos := make([]int32, n)
			for i := range pos {
				pos[i] = int32(rng.IntN(140000) - 4000)
			}
			var fv []float32
			if c.freqs {
				fv = make([]float32, c.dims/2)
				for i := range fv {
					fv[i] = 1 + 7*rng.Float32()
				}
			}
			var ref []float32
			for _, l := range simdLevels() {
				got := runRoPE(t, l, x, pos, fv, c.heads, c.headDim,
					backend.Rope{Dims: c.dims, Theta: c.theta, NeoX: c.neox, FreqScale: c.freqScale, AttnFactor: c.mscale})
				if ref == nil {
					ref = got
					continue
				}
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(ref[j]) {
						t.Fatalf("%v %+v n=%d: element %d is %v, the portable path gives %v: the bits must agree",
							l, c, n, j, got[j], ref[j])
					}
				}
			}
		}
	}
}

func runRoPE(t *testing.T, l simdLevel, x []float32, pos []int32, freqs []float32, heads, headDim int, r backend.Rope) []float32 {
	t.Helper()
	b := newAt(2, l)
	defer b.Close()
	n := len(pos)
	xt, _ := b.Alloc(dtype.F32, n, heads*headDim)
	pt, _ := b.Alloc(dtype.I32, n)
	if err := b.WriteF32(xt, 0, x); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteI32(pt, 0, pos); err != nil {
		t.Fatal(err)
	}
	if freqs != nil {
		ft, _ := b.Alloc(dtype.F32, len(freqs))
		if err := b.WriteF32(ft, 0, freqs); err != nil {
			t.Fatal(err)
		}
		r.Freqs = ft
	}
	b.RoPE(xt, n, heads, headDim, pt, r)
	got := make([]float32, len(x))
	if err := b.ReadF32(xt, 0, got); err != nil {
		t.Fatal(err)
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestArgmaxSpecials checks argmax against the plain first-largest loop on
// rows with NaNs, infinities, signed zeros and ties at every offset of its
// four running maxima.
func TestArgmaxSpecials(t *testing.T) {
	naive := func(row []float32) int {
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		return best
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	specials := []float32{nan, inf, -inf, 0, float32(math.Copysign(0, -1)), 1, -1, 3}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, cols := range []int{1, 2, 3, 4, 5, 7, 8, 9, 33} {
		for range 500 {
			row := make([]float32, cols)
			for j := range row {
				row[j] = specials[rng.IntN(len(specials))]
			}
			if got, want := argmax(row), naive(row); got != want {
				t.Fatalf("argmax(%v) = %d, want %d", row, got, want)
			}
		}
	}
}
