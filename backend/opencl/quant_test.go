package opencl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// refQuantize is dtype's definition of activation rounding
// (dtype.Q8_0Scale, dtype.Q8_1Sum, dtype.Q8_KScale, dtype.RoundEven)
// written out as the stored quants and scales that quant.cl produces: after
// each block's scale, d holds Q8_1's block sum or Q8_K's 16 group sums.
func refQuantize(at dtype.Type, x []float32) (q []int8, d []float32) {
	bs := at.BlockSize()
	q = make([]int8, len(x))
	for b := 0; b+bs <= len(x); b += bs {
		blk := x[b : b+bs]
		switch at {
		case dtype.Q8_0, dtype.Q8_1:
			s, id := dtype.Q8_0Scale(blk)
			for j, v := range blk {
				q[b+j] = int8(dtype.RoundEven(v * id))
			}
			d = append(d, s)
			if at == dtype.Q8_1 {
				d = append(d, dtype.Q8_1Sum(blk))
			}
		case dtype.Q8_K:
			s, iscale := dtype.Q8_KScale(blk)
			sums := make([]float32, 16)
			for j, v := range blk {
				q[b+j] = int8(min(127, dtype.RoundEven(iscale*v)))
				sums[j/16] += float32(q[b+j])
			}
			d = append(append(d, s), sums...)
		}
	}
	return q, d
}

// quantRows are activation rows of k columns that stress the quantisers:
// random values over many magnitudes, and hand-made blocks where rounding
// is decided by a tie or by the exact value of a division.
func quantRows(rng *rand.Rand, at dtype.Type, k int) map[string][]float32 {
	bs := at.BlockSize()
	rows := map[string][]float32{}
	for _, scale := range []float32{1, 1e-3, 37, 3e4} {
		x := make([]float32, k)
		for i := range x {
			x[i] = scale * (2*rng.Float32() - 1)
		}
		rows[fmt.Sprintf("uniform×%g", scale)] = x
	}
	// Heavy tails: one large element per block makes the others small
	// multiples of the scale.
	x := make([]float32, k)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Exp(3*rng.NormFloat64()))
	}
	rows["lognormal"] = x

	// Ties: with amax = 127, 127/amax = 1 (and for Q8_K iscale = ±1), so
	// halves land exactly on x·id and must round to even.
	x = make([]float32, k)
	for i := range x {
		x[i] = float32(i%bs%200-100) + 0.5
	}
	for b := 0; b < k; b += bs {
		x[b+bs-1] = float32(127 - 254*(b/bs%2))
	}
	rows["halves"] = x

	// Zero blocks, and blocks whose largest magnitude occurs more than once
	// with both signs: Q8_K takes the first, whose sign sets the sign of
	// iscale. The maxima are spread across work-items and lie before and
	// after the first both in index and in a reduction's pairing.
	x = make([]float32, k)
	for b := 0; b < k; b += bs {
		if (b/bs)%3 == 0 {
			continue
		}
		for j := range bs {
			x[b+j] = 3 * (2*rng.Float32() - 1)
		}
		sign := float32(1 - 2*(b/bs%2))
		x[b+bs-1], x[b+bs/2+1], x[b+3], x[b+2*bs/3] = sign*5, sign*5, -sign*5, sign*5
	}
	rows["zeros and equal maxima"] = x

	// amax/127 exactly halfway between two halves (1 and 1+2⁻¹⁰), a
	// scale that overflows f16, tiny values whose f16 scale is subnormal
	// or zero.
	for name, amax := range map[string]float32{"f16 tie": 127 * (1 + 1.0/2048), "f16 overflow": 1e7, "tiny": 1e-5, "underflow": 1e-30} {
		x = make([]float32, k)
		for i := range x {
			x[i] = amax * (2*rng.Float32() - 1)
		}
		for b := 0; b < k; b += bs {
			x[b+rng.IntN(bs)] = -amax
		}
		rows[name] = x
	}
	return rows
}

// TestQuantize checks quant.cl's quantisers byte for byte against the Go
// definition, on the build with correctly rounded division (where the device
// offers it) and on the fallback without it.
func TestQuantize(t *testing.T) { eachDevice(t, testQuantize) }

func testQuantize(t *testing.T, dev *Backend) {
	d := deviceOf(dev)
	approx := dev.v
	approx.approxDiv = true
	for _, v := range []variant{dev.v, approx} {
		t.Run(fmt.Sprintf("approxDiv=%v", v.approxDiv), func(t *testing.T) {
			b, err := open(d, v, testFlavour)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			for _, at := range []dtype.Type{dtype.Q8_0, dtype.Q8_1, dtype.Q8_K} {
				const k = 768
				for name, row := range quantRows(rng, at, k) {
					t.Run(fmt.Sprintf("%v/%s", at, name), func(t *testing.T) {
						// Two rows: the second is the first reversed, so
						// that row offsets are exercised too.
						x := append(append([]float32(nil), row...), row...)
						for i, j := k, 2*k-1; i < j; i, j = i+1, j-1 {
							x[i], x[j] = x[j], x[i]
						}
						wantQ, wantD := refQuantize(at, x)
						gotQ, gotD := runQuantize(t, b, at, x, 2, k)
						for i := range wantD {
							if math.Float32bits(gotD[i]) != math.Float32bits(wantD[i]) {
								t.Fatalf("block %d: scale %g, want %g", i, gotD[i], wantD[i])
							}
						}
						for i := range wantQ {
							if gotQ[i] != wantQ[i] {
								t.Fatalf("element %d (x = %g): quant %d, want %d", i, x[i], gotQ[i], wantQ[i])
							}
						}
					})
				}
			}
		})
	}
}

// runQuantize quantises n rows of x with b's quantiser for at and reads
// back the scratch.
func runQuantize(t *testing.T, b *Backend, at dtype.Type, x []float32, n, k int) ([]int8, []float32) {
	t.Helper()
	xt, err := b.Alloc(dtype.F32, n, k)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(xt)
	if err := b.WriteF32(xt, 0, x); err != nil {
		t.Fatal(err)
	}
	qk := map[dtype.Type]*kern{dtype.Q8_0: b.byType[dtype.Q4_0].quant, dtype.Q8_1: b.byType[dtype.Q4_1].quant, dtype.Q8_K: b.byType[dtype.Q6_K].quant}[at]
	if !b.quantize("test", xt.(*tensor), n, k, at, qk) {
		t.Fatalf("quantize: %v", b.Err())
	}
	q := make([]int8, n*k)
	d := make([]float32, n*k/at.BlockSize()*actFloats(at))
	if err := b.q.Read(b.act.q, 0, len(q), ptr(q)); err != nil {
		t.Fatal(err)
	}
	if err := b.q.Read(b.act.d, 0, 4*len(d), ptr(d)); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	return q, d
}

// TestQuantizedReuse checks that consecutive matmuls on unchanged
// activations quantise them once, and that every kind of write to the
// activations (by an op or from the host) makes the next matmul quantise
// them again: results must equal those of another backend that has just
// been given the new values.
func TestQuantizedReuse(t *testing.T) { eachDevice(t, testQuantizedReuse) }

func testQuantizedReuse(t *testing.T, dev *Backend) {
	b := dev
	ref := another(t, dev)
	const k, m, n = 256, 40, 3
	rng := rand.New(rand.NewPCG(5, 6))
	alloc := func(vals []float32, shape ...int) backend.Tensor {
		x, err := b.Alloc(dtype.F32, shape...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(x) })
		if vals != nil {
			if err := b.WriteF32(x, 0, vals); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	randv := func(c int) []float32 {
		v := make([]float32, c)
		for i := range v {
			v[i] = 2*rng.Float32() - 1
		}
		return v
	}
	// Each weight on both backends: ws[i] on b, refW[ws[i]] on ref.
	var ws []backend.Tensor
	refW := map[backend.Tensor]backend.Tensor{}
	for _, s := range []struct {
		dt   dtype.Type
		rows int
	}{{dtype.Q4_0, m}, {dtype.Q8_0, m}, {dtype.Q6_K, m}, {dtype.F32, k}, {dtype.Q4_1, m}, {dtype.Q4_K, m}} {
		raw := randomWeight(rng, s.dt, s.rows, k)
		w, err := b.Weight("w", s.dt, []int{s.rows, k}, raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Free(w) })
		rw, err := ref.Weight("w", s.dt, []int{s.rows, k}, raw)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		refW[w] = rw
	}
	x := alloc(randv(n*k), n, k)
	y := alloc(randv(n*k), n, k)
	norm := alloc(randv(k), k)
	dst := alloc(nil, n, m)
	pos, err := b.Alloc(dtype.I32, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(pos) })
	// fresh is the matmul of x's current contents on ref.
	fresh := func(w backend.Tensor, rows int) []float32 {
		t.Helper()
		v := make([]float32, n*k)
		if err := b.ReadF32(x, 0, v); err != nil {
			t.Fatal(err)
		}
		c, _ := ref.Alloc(dtype.F32, n, k)
		out, _ := ref.Alloc(dtype.F32, n, m)
		defer ref.Free(c)
		defer ref.Free(out)
		if err := ref.WriteF32(c, 0, v); err != nil {
			t.Fatal(err)
		}
		ref.MatMulTransposed(out, c, refW[w], rows)
		got := make([]float32, rows*m)
		if err := ref.ReadF32(out, 0, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	check := func(what string, w backend.Tensor, rows int, wantLaunches int64) {
		t.Helper()
		before := b.Stats().Launches
		b.MatMulTransposed(dst, x, w, rows)
		if l := b.Stats().Launches - before; l != wantLaunches {
			t.Errorf("%s: %d launches, want %d", what, l, wantLaunches)
		}
		got := make([]float32, rows*m)
		if err := b.ReadF32(dst, 0, got); err != nil {
			t.Fatal(err)
		}
		want := fresh(w, rows)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: element %d = %g, want %g (stale quantised activations?)", what, i, got[i], want[i])
			}
		}
	}
	q4, q8, q6, square, q41, q4k := ws[0], ws[1], ws[2], ws[3], ws[4], ws[5]
	check("first", q4, n, 2)
	check("same x, same activation type", q8, n, 1)
	check("fewer rows", q4, 1, 1)
	check("more rows than quantised", q4, n, 1)
	check("more rows again", q4, n, 1)
	check("another activation type", q6, n, 2)
	check("same Q8_K for another K-quant", q4k, n, 1)
	check("back to Q8_0", q4, n, 2)
	// Q8_1 has Q8_0's blocks and quants but also block sums.
	check("Q8_1 after Q8_0", q41, n, 2)
	check("Q8_1 again", q41, 1, 1)
	check("Q8_0 after Q8_1", q8, n, 2)
	writes := []struct {
		name string
		op   func()
	}{
		{"WriteF32", func() {
			if err := b.WriteF32(x, 5, []float32{0.75}); err != nil {
				t.Fatal(err)
			}
		}},
		{"Add", func() { b.Add(x, x, y, n) }},
		{"RMSNorm", func() { b.RMSNorm(x, y, norm, n, 1e-5) }},
		{"CopySlice", func() { b.CopySlice(x, 7, y, 300, 9) }},
		{"SiLUMul", func() { b.SiLUMul(x, y, x, n) }},
		{"Scale", func() { b.Scale(x, x, 1, 0.5) }},
		{"RoPE", func() { b.RoPE(x, n, 4, 64, pos, backend.Rope{Dims: 64, Theta: 10000}) }},
		// F32 weights do not quantise y, so x stays the cached source.
		{"MatMulTransposed", func() { b.MatMulTransposed(x, y, square, n) }},
	}
	for _, wr := range writes {
		// Keep the values in a range where they still quantise finely.
		b.Add(y, y, y, n)
		wr.op()
		check("after "+wr.name, q4, n, 2)
		check("after "+wr.name+", again", q8, n, 1)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}
