package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
)

// matMulAt runs one MatMulTransposed of x (n rows) by the raw weight at
// kernel level l on a fresh backend and returns dst.
func matMulAt(t *testing.T, l simdLevel, threads int, dt dtype.Type, raw []byte, m, k, n int, x []float32) []float32 {
	t.Helper()
	b := newAt(threads, l)
	defer b.Close()
	w, err := b.Weight("w", dt, []int{m, k}, raw)
	if err != nil {
		t.Fatal(err)
	}
	xt, _ := b.Alloc(dtype.F32, n, k)
	dst, _ := b.Alloc(dtype.F32, n, m)
	if err := b.WriteF32(xt, 0, x); err != nil {
		t.Fatal(err)
	}
	b.MatMulTransposed(dst, xt, w, n)
	got := make([]float32, n*m)
	if err := b.ReadF32(dst, 0, got); err != nil {
		t.Fatal(err)
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestMatMulLevelsBitExact demands that every kernel level this CPU runs
// gives the portable Go path's bits for every output, for every weight type,
// for decode (n=1) and prefill of several token counts,
// at shapes with ragged edges: row counts that are not a multiple of the
// 4-row tiles, k with a short last 256-chunk (float types),
// an odd number of 32-blocks (Q4_0/Q8_0: partial 4-block groups) or below
// the 128 where the 512-bit decode kernels start; float weights in both
// flavours' orders, vec_dot's (rows not a multiple of 4, k with a
// remainder, rows of 8 KiB and more, which a decode reads several at a
// time) and tinyBLAS's. The level's own kernel
// differs from the Go one in every accumulator layout, so equality here
// means the summation order is defined, not incidental. The activations are
// scaled per row over several orders of magnitude, so that the float64
// block sums span a wide range, and include a zero block.
func TestMatMulLevelsBitExact(t *testing.T) {
	levels := simdLevels()
	if len(levels) < 2 {
		t.Skip("only the portable kernels run on this CPU")
	}
	type shape struct{ m, k int }
	shapes := map[dtype.Type][]shape{
		dtype.F32:    {{45, 600}, {7, 37}, {48, 600}, {12, 1000}, {7, 2048}},
		dtype.F16:    {{45, 600}, {33, 1000}, {48, 600}, {12, 1000}, {8, 72}, {10, 4096}, {5, 4100}, {64, 1032}},
		dtype.BF16:   {{45, 600}, {5, 300}, {48, 600}, {12, 1000}, {6, 4096}},
		dtype.Q8_0:   {{45, 608}, {13, 96}},
		dtype.Q4_0:   {{45, 608}, {13, 96}, {70, 2048}, {64, 608}, {24, 96}, {72, 2048}},
		dtype.Q6_K:   {{45, 768}, {9, 256}},
		dtype.Q4_1:   {{45, 608}, {13, 96}},
		dtype.Q5_0:   {{45, 608}, {13, 96}},
		dtype.Q5_1:   {{45, 608}, {13, 96}},
		dtype.IQ4_NL: {{45, 608}, {13, 96}, {6, 224}},
		dtype.Q2_K:   {{45, 768}, {9, 256}},
		dtype.Q3_K:   {{45, 768}, {9, 256}},
		dtype.Q4_K:   {{45, 768}, {9, 256}},
		dtype.Q5_K:   {{45, 768}, {9, 256}},
		dtype.IQ4_XS: {{45, 768}, {9, 256}},
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for _, dt := range backendtest.WeightTypes {
		for _, s := range shapes[dt] {
			raw := backendtest.RandomWeight(t, rng, dt, s.m, s.k)
			for _, n := range []int{1, 3, 17, 40} {
				x := make([]float32, n*s.k)
				for i := range n {
					scale := float32(math.Pow(10, float64(i%5)-2))
					for j := range s.k {
						x[i*s.k+j] = scale * float32(rng.NormFloat64())
					}
				}
				// A zero block: its scale is 0 and so is its contribution.
				clear(x[:min(32, s.k)])
				flavours := []bool{flavour.Wide()}
				if !dt.Quantized() {
					flavours = []bool{false, true}
				}
				for _, f := range flavours {
					levelsBitExact(t, levels, f, dt, raw, s.m, s.k, n, x)
				}
			}
		}
	}
}

// levelsBitExact checks one matmul at every level against the Go path's
// bits, in the AVX-512 flavour if wide (wideFlavour).
func levelsBitExact(t *testing.T, levels []simdLevel, wide bool, dt dtype.Type, raw []byte, m, k, n int, x []float32) {
	defer func(f numerics.Flavour) { flavour = f }(flavour)
	flavour = wideFlavour(wide)
	want := matMulAt(t, simdOff, 2, dt, raw, m, k, n, x)
	for _, l := range levels[1:] {
		t.Run(fmt.Sprintf("%v/%dx%d/n=%d/%v/%v", dt, m, k, n, l, flavour), func(t *testing.T) {
			// One thread and two: the split of rows must not matter.
			for _, threads := range []int{1, 2} {
				got := matMulAt(t, l, threads, dt, raw, m, k, n, x)
				for i, g := range got {
					if math.Float32bits(g) != math.Float32bits(want[i]) {
						t.Fatalf("%d threads: dst[%d,%d] = %v (%#08x), go level %v (%#08x)", threads,
							i/m, i%m, g, math.Float32bits(g), want[i], math.Float32bits(want[i]))
					}
				}
			}
		})
	}
}

// TestFloatSumIsGgmls checks the float-weight matmul's outputs against
// ggml's dot products as the attention reproduces them (written apart, from
// vec.h and sgemm.cpp): ggml_vec_dot_f16/f32 (dotVec8, dotVec512) wherever
// llama.cpp runs vec_dot, tinyBLAS (dot8, dotTiny) where llamafile_sgemm
// takes the call (n ≥ 2, k a multiple of its vector, rows a multiple of 4).
func TestFloatSumIsGgmls(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []struct {
		m, k, n int
		tiny    [2]bool // per flavour: avx2, avx512
	}{
		{8, 64, 1, [2]bool{false, false}},
		{8, 64, 3, [2]bool{true, true}},
		{8, 72, 3, [2]bool{true, false}},
		{9, 64, 3, [2]bool{false, false}},
		{12, 100, 2, [2]bool{false, false}},
		{4, 1000, 5, [2]bool{true, false}},
	}
	for _, dt := range []dtype.Type{dtype.F32, dtype.F16} {
		for _, c := range cases {
			raw := backendtest.RandomWeight(t, rng, dt, c.m, c.k)
			wf := make([]float32, c.m*c.k)
			for o := range c.m {
				rb, _ := dt.RowBytes(c.k)
				dtype.DequantizeRow(dt, wf[o*c.k:(o+1)*c.k], raw[o*rb:])
			}
			x := make([]float32, c.n*c.k)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			xr := append([]float32(nil), x...)
			if dt == dtype.F16 {
				dtype.RoundActivations(dt, xr, xr)
			}
			for fi, wide := range []bool{false, true} {
				saved := flavour
				flavour = wideFlavour(wide)
				got := matMulAt(t, simdOff, 1, dt, raw, c.m, c.k, c.n, x)
				flavour = saved
				for i := range c.n {
					for o := range c.m {
						w, xi := wf[o*c.k:(o+1)*c.k], xr[i*c.k:(i+1)*c.k]
						var want float32
						switch {
						case c.tiny[fi] && wide:
							want = dotTiny(w, xi)
						case c.tiny[fi]:
							want = dot8(w, xi)
						case wide:
							want = dotVec512(w, xi, dt == dtype.F16)
						default:
							want = dotVec8(w, xi, dt == dtype.F16)
						}
						if g := got[i*c.m+o]; math.Float32bits(g) != math.Float32bits(want) {
							t.Fatalf("%v %dx%d n=%d avx512 %v: dst[%d,%d] = %v, ggml's %v", dt, c.m, c.k, c.n, wide, i, o, g, want)
						}
					}
				}
			}
		}
	}
}

// TestCopyToHalfLevels demands that every kernel level rounds an F32 row
// into an F16 tensor (the f16 KV cache) to dtype.F32ToF16's bits: random
// values over many binades, with subnormal, overflowing, signed-zero,
// infinite and halfway cases, at lengths and offsets that leave ragged
// 8-wide steps.
func TestCopyToHalfLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	src := make([]float32, 1000)
	for i := range src {
		src[i] = float32(math.Ldexp(2*rng.Float64()-1, rng.IntN(48)-28))
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 65504, 65520, -65520, 1e9, float32(math.Inf(1)),
		float32(math.Inf(-1)), 6e-8, 3e-8, 2.98e-8, -1e-6, 1 + 1.0/2048, 1 + 3.0/2048, 0.1}
	copy(src[3:], special)
	want := make([]uint16, len(src))
	for i, v := range src {
		want[i] = dtype.F32ToF16(v)
	}
	for _, l := range simdLevels() {
		b := newAt(1, l)
		s, _ := b.Alloc(dtype.F32, len(src))
		d, _ := b.Alloc(dtype.F16, len(src)+7)
		if err := b.WriteF32(s, 0, src); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ dstOff, srcOff, count int }{{0, 0, 1000}, {7, 1, 999}, {3, 5, 13}, {0, 2, 7}} {
			b.CopySlice(d, c.dstOff, s, c.srcOff, c.count)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			got := halfs(b.tensor("test", "d", d, dtype.F16))[c.dstOff : c.dstOff+c.count]
			for i, h := range got {
				if w := want[c.srcOff+i]; h != w {
					t.Fatalf("level %v, copy %+v: element %d (%g) = %#04x, want %#04x", l, c, c.srcOff+i, src[c.srcOff+i], h, w)
				}
			}
		}
		b.Close()
	}
}

// TestDotBF16SIMD holds the vdpbf16ps kernels (the AVX512_BF16 flavour) to
// the portable emulation's bits (addPairs) on BF16 weights and activations
// that reach subnormals and a wide range of exponents, where the
// instruction's flushing and the order of a pair's two products show: decode
// and prefill shapes, a step's remainder (k = 600) and none (k = 640).
func TestDotBF16SIMD(t *testing.T) {
	if !hostBF16 {
		t.Skip("the CPU has no AVX512_BF16")
	}
	defer func(f numerics.Flavour) { flavour = f }(flavour)
	flavour = numerics.FlavourAVX512BF16
	rng := rand.New(rand.NewPCG(5, 17))
	// wild is a BF16 value: now and then zero or subnormal, else with an
	// exponent within 2^±8 of 2^e. Rows of weights and tokens of
	// activations each take one e of 0, −60 and −66, so that some products
	// and sums fall below float32's normal range and others do not.
	wild := func(e int) uint16 {
		sign, man := uint16(rng.IntN(2))<<15, uint16(rng.IntN(128))
		switch rng.IntN(40) {
		case 0:
			return sign
		case 1, 2:
			return sign | man | 1 // subnormal
		}
		return sign | uint16(127+e-8+rng.IntN(17))<<7 | man
	}
	scales := []int{0, -60, -66}
	for _, k := range []int{600, 640} {
		const m = 12
		raw := make([]byte, 2*m*k)
		for i := 0; i < len(raw); i += 2 {
			v := wild(scales[i/(2*k)%3])
			raw[i], raw[i+1] = byte(v), byte(v>>8)
		}
		for _, n := range []int{1, 6, 13} {
			x := make([]float32, n*k)
			for i := range x {
				x[i] = math.Float32frombits(uint32(wild(scales[i/k%3])) << 16)
			}
			want := matMulAt(t, simdOff, 1, dtype.BF16, raw, m, k, n, x)
			for _, l := range simdLevels()[1:] {
				if !simdBF16(l) {
					continue
				}
				got := matMulAt(t, l, 2, dtype.BF16, raw, m, k, n, x)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v, k=%d, n=%d: dst[%d] = %g, portable %g", l, k, n, i, got[i], want[i])
					}
				}
			}
		}
	}
}
