package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
)

// activationRows returns rows of k floats that stress the quantisers: random
// ones of several magnitudes, exact rounding ties (a block whose largest
// magnitude is 127 has id = 1, so x.5 values are ties), all-zero blocks, a
// lone non-zero, equal magnitudes of both signs (Q8_K keeps the first), a
// negative extreme, and scales at the edge of f16 (subnormal, near max).
func activationRows(rng *rand.Rand, k int) [][]float32 {
	var rows [][]float32
	row := func(f func(i int) float32) {
		r := make([]float32, k)
		for i := range r {
			r[i] = f(i)
		}
		rows = append(rows, r)
	}
	for _, s := range []float32{1, 1e-3, 30, 1e4} {
		row(func(int) float32 { return s * (2*rng.Float32() - 1) })
		row(func(int) float32 { return s * float32(rng.NormFloat64()) })
	}
	row(func(i int) float32 {
		if i%32 == 0 {
			return 127
		}
		return float32(rng.IntN(254)-127) + 0.5
	})
	row(func(i int) float32 {
		if i%256 == 0 {
			return -127
		}
		return float32(rng.IntN(254)-127) + 0.5
	})
	row(func(int) float32 { return 0 })
	row(func(i int) float32 {
		if i == k/2 {
			return -3.25
		}
		return 0
	})
	row(func(i int) float32 { return float32(1-2*(i%2)) * 0.75 })
	row(func(i int) float32 { return float32(2*(i%2)-1) * 0.75 })
	row(func(i int) float32 { return float32(i%7) - 3 })
	row(func(int) float32 { return 1e-6 * (2*rng.Float32() - 1) }) // d is an f16 subnormal
	row(func(int) float32 { return 8e6 * (2*rng.Float32() - 1) })  // d near the f16 maximum
	return rows
}

// TestQuantizeActivations checks every quantiser (Go and each SIMD level)
// bit for bit against dtype: the int8 values against dtype.RoundEven with
// dtype.Q8_0Scale / dtype.Q8_KScale, the scales exactly, the block sums
// against a plain sum, and the values q·d against dtype.RoundActivations.
func TestQuantizeActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 19))
	const k = 512
	rows := activationRows(rng, k)
	n := len(rows)
	x := make([]float32, 0, n*k)
	for _, r := range rows {
		x = append(x, r...)
	}
	for _, wt := range []dtype.Type{dtype.Q4_0, dtype.Q8_0, dtype.Q6_K} {
		at, off := wt.ActivationType(), actOffset(wt)
		for _, l := range simdLevels() {
			t.Run(fmt.Sprintf("%v/%v", wt, l), func(t *testing.T) {
				var a acts
				a.grow(at, n, k, l != simdOff, flavour.BF16())
				if l == simdOff {
					quantizeRowsGo(at, off, &a, x, k, 0, n)
				} else {
					simdQuantize(at, off, &a, x, k, 0, n)
				}
				ref := make([]float32, k)
				for i, r := range rows {
					dtype.RoundActivations(at, ref, r)
					bs := at.BlockSize()
					for b := 0; b < k/bs; b++ {
						blk := r[b*bs : (b+1)*bs]
						var d, mul float32
						if at == dtype.Q8_0 {
							d, mul = dtype.Q8_0Scale(blk)
						} else {
							d, mul = dtype.Q8_KScale(blk)
						}
						if got := a.d[i*k/bs+b]; math.Float32bits(got) != math.Float32bits(d) {
							t.Fatalf("row %d block %d: d = %g, want %g", i, b, got, d)
						}
						var sum int32
						for j := b * bs; j < (b+1)*bs; j++ {
							want := min(127, dtype.RoundEven(r[j]*mul))
							q := a.q[i*k+j]
							if float32(q) != want {
								t.Fatalf("row %d element %d (x = %g): q = %d, want %g", i, j, r[j], q, want)
							}
							// Equal as numbers: an int8 has no -0, which the
							// reference keeps and a dot product ignores.
							if v := float32(q) * d; v != ref[j] {
								t.Fatalf("row %d element %d: q·d = %g, RoundActivations %g", i, j, v, ref[j])
							}
							sum += int32(q)
							if at == dtype.Q8_K && (j+1)%16 == 0 {
								if got := a.bs[i*k/16+j/16]; int32(got) != sum {
									t.Fatalf("row %d group %d: bsum %d, want %d", i, j/16, got, sum)
								}
								sum = 0
							}
						}
						if at == dtype.Q8_0 {
							if got := a.c[i*k/bs+b]; got != -off*sum {
								t.Fatalf("row %d block %d: correction %d, want %d", i, b, got, -off*sum)
							}
						}
					}
				}
			})
		}
	}
}

// TestDotQ compares the portable quantised dots with a float64 dot product
// of the reference-rounded activations and the reference dequantisation.
// Each block's integer sum is exact, so only the float32 scaling and the
// sum over blocks round: 1e-6·Σ|x·w| covers that at these lengths.
func TestDotQ(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 29))
	for _, dt := range []dtype.Type{dtype.Q4_0, dtype.Q8_0, dtype.Q6_K} {
		for _, blocks := range []int{1, 3} {
			k := blocks * max(dt.BlockSize(), dtype.QK_K)
			raw := backendtest.RandomWeight(t, rng, dt, 1, k)
			wf := make([]float32, k)
			dtype.DequantizeRow(dt, wf, raw)
			x := make([]float32, k)
			for i := range x {
				x[i] = 2*rng.Float32() - 1
			}
			at := dt.ActivationType()
			xr := make([]float32, k)
			dtype.RoundActivations(at, xr, x)
			var a acts
			a.grow(at, 1, k, false, false)
			quantizeRowsGo(at, actOffset(dt), &a, x, k, 0, 1)
			var want, mag float64
			for i := range x {
				want += float64(xr[i]) * float64(wf[i])
				mag += math.Abs(float64(xr[i]) * float64(wf[i]))
			}
			if d := dotQ(dt, &a, 0, k, raw, 1, a.n > 1); math.Abs(float64(d)-want) > 1e-6*mag {
				t.Errorf("%v k=%d: dot = %g, want %g (Σ|x·w| %g)", dt, k, d, want, mag)
			}
		}
	}
}

// TestActivationReuse checks that consecutive matmuls reading the same x
// quantise it once, and that every kind of write to x (an op, a host write,
// a matmul whose dst is x) makes the next matmul quantise it again, with
// results equal to a fresh backend's.
func TestActivationReuse(t *testing.T) {
	const k = 256
	rng := rand.New(rand.NewPCG(31, 37))
	raw := backendtest.RandomWeight(t, rng, dtype.Q4_0, k, k)
	raw8 := backendtest.RandomWeight(t, rng, dtype.Q8_0, k, k)
	x0 := make([]float32, 2*k)
	for i := range x0 {
		x0[i] = 2*rng.Float32() - 1
	}
	b := New(2)
	defer b.Close()
	must := func(tt backend.Tensor, err error) backend.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	w := must(b.Weight("w", dtype.Q4_0, []int{k, k}, raw))
	w2 := must(b.Weight("w2", dtype.Q4_0, []int{k, k}, raw))
	w8 := must(b.Weight("w8", dtype.Q8_0, []int{k, k}, raw8))
	x := must(b.Alloc(dtype.F32, 2, k))
	y := must(b.Alloc(dtype.F32, 2, k))
	norm := must(b.Alloc(dtype.F32, k))
	if err := b.WriteF32(x, 0, x0); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteF32(norm, 0, x0[:k]); err != nil {
		t.Fatal(err)
	}
	// check runs dst = x·w on b and on a fresh backend from x's current
	// contents, and compares the quantisation count with want.
	check := func(what string, w backend.Tensor, raw []byte, dt dtype.Type, want int) {
		t.Helper()
		b.MatMulTransposed(y, x, w, 2)
		got, cur := make([]float32, 2*k), make([]float32, 2*k)
		if err := b.ReadF32(y, 0, got); err != nil {
			t.Fatal(err)
		}
		if err := b.ReadF32(x, 0, cur); err != nil {
			t.Fatal(err)
		}
		f := newAt(1, b.simd)
		defer f.Close()
		fw := must(f.Weight("w", dt, []int{k, k}, raw))
		fx := must(f.Alloc(dtype.F32, 2, k))
		fy := must(f.Alloc(dtype.F32, 2, k))
		if err := f.WriteF32(fx, 0, cur); err != nil {
			t.Fatal(err)
		}
		f.MatMulTransposed(fy, fx, fw, 2)
		want2 := make([]float32, 2*k)
		if err := f.ReadF32(fy, 0, want2); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != want2[i] {
				t.Fatalf("%s: y[%d] = %g, fresh backend %g", what, i, got[i], want2[i])
			}
		}
		if b.quantized != want {
			t.Errorf("%s: %d quantisations, want %d", what, b.quantized, want)
		}
	}
	check("first", w, raw, dtype.Q4_0, 1)
	check("same x, another weight", w2, raw, dtype.Q4_0, 1)
	check("Q8_0 weight (other correction)", w8, raw8, dtype.Q8_0, 2)
	check("back to Q4_0", w, raw, dtype.Q4_0, 3)
	b.RMSNorm(x, x, norm, 2, 1e-5)
	check("after RMSNorm into x", w, raw, dtype.Q4_0, 4)
	if err := b.WriteF32(x, 3, []float32{0.5}); err != nil {
		t.Fatal(err)
	}
	check("after WriteF32", w, raw, dtype.Q4_0, 5)
	b.MatMulTransposed(x, x, w, 2)
	// The matmul into x reuses x's quantisation, then invalidates it.
	check("after a matmul into x", w, raw, dtype.Q4_0, 6)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestRoundFloatActivations checks that every level rounds activations for
// F16 and BF16 weights bit for bit as dtype.RoundActivations: random values
// across the whole exponent range (F16 subnormals, overflow to infinity,
// ties), signed zeros, infinities and NaN, at a length with a ragged tail.
func TestRoundFloatActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 37))
	const n = 3*1024 + 5
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(rng.Uint32())
		if i%3 == 0 {
			// Near F16's range, where its rounding and overflow happen.
			x[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(50)-30)))
		}
		if i%7 == 0 {
			// An F16 (BF16) tie: the low 13 (16) bits are exactly half.
			u := math.Float32bits(x[i])
			x[i] = math.Float32frombits(u&^0x1FFF | 0x1000)
			if i%14 == 0 {
				x[i] = math.Float32frombits(u&^0xFFFF | 0x8000)
			}
		}
	}
	copy(x, []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 65520, 65519.99, 6e-8, 2.9e-8, 3e-8})
	for _, at := range []dtype.Type{dtype.F16, dtype.BF16} {
		want := make([]float32, n)
		dtype.RoundActivations(at, want, x)
		for _, l := range simdLevels() {
			var a acts
			a.grow(at, 1, n, false, false)
			if l == simdOff {
				quantizeRowsGo(at, 0, &a, x, n, 0, 1)
			} else {
				simdQuantize(at, 0, &a, x, n, 0, 1)
			}
			for i, g := range a.f[:n] {
				gb, wb := math.Float32bits(g), math.Float32bits(want[i])
				if gb != wb && !(math.IsNaN(float64(g)) && math.IsNaN(float64(want[i]))) {
					t.Fatalf("%v/%v: x[%d] = %g (%#08x) rounds to %#08x, want %#08x", at, l, i, x[i], math.Float32bits(x[i]), gb, wb)
				}
			}
		}
	}
}
