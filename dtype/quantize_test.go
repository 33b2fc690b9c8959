package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// testRows are inputs whose blocks exercise the formats' edge cases: plain
// Gaussian weights, all zeros, a lone outlier, mixed magnitudes across
// sub-blocks (Q6_K's scale-of-scales), ties in magnitude with opposite signs
// (Q4_0 keeps the first), and tiny values near the f16 subnormal range.
func testRows(n int) map[string][]float32 {
	r := rand.New(rand.NewPCG(1, 2))
	rows := map[string][]float32{}
	gauss := make([]float32, n)
	for i := range gauss {
		gauss[i] = float32(r.NormFloat64() * 0.02)
	}
	rows["gauss"] = gauss
	rows["zeros"] = make([]float32, n)
	outlier := make([]float32, n)
	for i := range outlier {
		outlier[i] = float32(r.NormFloat64() * 1e-3)
	}
	outlier[n/3] = 5
	rows["outlier"] = outlier
	mixed := make([]float32, n)
	for i := range mixed {
		scale := math.Pow(10, float64((i/16)%5)-3)
		mixed[i] = float32(r.NormFloat64() * scale)
	}
	rows["mixed"] = mixed
	ties := make([]float32, n)
	for i := range ties {
		switch i % 32 {
		case 3:
			ties[i] = 1
		case 7:
			ties[i] = -1
		default:
			ties[i] = float32(r.Float64()*2 - 1)
		}
	}
	rows["ties"] = ties
	tiny := make([]float32, n)
	for i := range tiny {
		tiny[i] = float32(r.NormFloat64() * 1e-6)
	}
	rows["tiny"] = tiny
	uniform := make([]float32, n)
	for i := range uniform {
		uniform[i] = float32(r.Float64()*200 - 100)
	}
	rows["uniform"] = uniform
	return rows
}

// f16Err is the largest rounding error of storing v as f16: half an ulp,
// 2⁻¹¹ relative for normal numbers and 2⁻²⁵ absolute in the subnormal range.
func f16Err(v float32) float32 { return max(abs32(v)/2048, 1.0/(1<<25)) }

func maxAbs(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, abs32(v))
	}
	return m
}

// TestQuantizeRoundTripBounds checks dequantize(quantize(x)) against error
// bounds derived from each format's definition, per block:
//   - F32 is exact; F16 and BF16 are rounded to nearest, so the error is at
//     most half an ulp of the format (2⁻¹¹ and 2⁻⁸ relative, with an
//     absolute floor for F16 subnormals, 2⁻²⁵).
//   - Q8_0: step d = amax/127, rounding costs d/2; d itself is rounded to
//     f16 after the levels are chosen, which moves a level ≤ 127 by 127 times
//     d's f16 error (f16Err: 2⁻¹¹ relative, 2⁻²⁵ absolute for subnormals).
//   - Q4_0: d = amax/8; the element of largest magnitude is exact, its
//     opposite side is capped at level +7 (error ≤ d), the rest round to
//     d/2; f16 rounding of d adds 8·f16Err(d).
//   - Q6_K: each 16-element sub-block has scale ≈ amax_sub/32 (make_qx_quants
//     may shrink it by up to 0.9/32 and clamp the extreme level), and the
//     scales are stored as int8 steps of dmax = max scale/128; a sub-block
//     whose scale rounds to 0 reconstructs as zeros, an error of at most
//     amax_sub ≤ 33·dmax/2. So every error stays below about one step of the
//     largest scale, amax_superblock/32 (≈ 4·dmax), plus level 32 × scale
//     127 × the f16 error of dmax (which matters only for tiny blocks).
func TestQuantizeRoundTripBounds(t *testing.T) {
	const n = 4 * QK_K
	for name, x := range testRows(n) {
		for _, tc := range []struct {
			t     Type
			block int
			bound func(blk []float32, got, want float32) bool
		}{
			{F32, 1, func(_ []float32, got, want float32) bool { return got == want }},
			{F16, 1, func(_ []float32, got, want float32) bool {
				return abs32(got-want) <= max(abs32(want)/2048, 1.0/(1<<25))
			}},
			{BF16, 1, func(_ []float32, got, want float32) bool { return abs32(got-want) <= abs32(want)/256 }},
			{Q8_0, QK8_0, func(blk []float32, got, want float32) bool {
				d := maxAbs(blk) / 127
				return abs32(got-want) <= d/2+127*f16Err(d)
			}},
			{Q4_0, QK4_0, func(blk []float32, got, want float32) bool {
				d := maxAbs(blk) / 8
				return abs32(got-want) <= d+8*f16Err(d)
			}},
			{Q6_K, QK_K, func(blk []float32, got, want float32) bool {
				return abs32(got-want) <= maxAbs(blk)/32+32*127*f16Err(maxAbs(blk)/32/128)
			}},
		} {
			t.Run(tc.t.String()+"/"+name, func(t *testing.T) {
				rb, err := tc.t.RowBytes(n)
				if err != nil {
					t.Fatal(err)
				}
				q := make([]byte, rb)
				QuantizeRow(tc.t, q, x)
				y := make([]float32, n)
				DequantizeRow(tc.t, y, q)
				var sq, sx float64
				for i := range x {
					blk := x[i/tc.block*tc.block : (i/tc.block+1)*tc.block]
					if !tc.bound(blk, y[i], x[i]) {
						t.Fatalf("element %d: got %g, want %g (block max %g): error out of bound", i, y[i], x[i], maxAbs(blk))
					}
					d := float64(y[i] - x[i])
					sq += d * d
					sx += float64(x[i]) * float64(x[i])
				}
				if name == "gauss" {
					t.Logf("relative RMS error %.3g", math.Sqrt(sq/sx))
				}
			})
		}
	}
}

// TestQuantizeExactLevels feeds blocks that are already on a format's grid:
// quantising them must give back the same values exactly.
func TestQuantizeExactLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		t     Type
		block int
		level func(j int) float32
	}{
		// Q8_0 levels -127…127 with d = 1/64 (exact in f16); 127 is present
		// so amax/127 is d.
		{Q8_0, QK8_0, func(j int) float32 {
			if j == 0 {
				return 127.0 / 64
			}
			return float32(r.IntN(255)-127) / 64
		}},
		// Q4_0 levels -8…7 times d = -1/32 with the extreme -8·d first.
		{Q4_0, QK4_0, func(j int) float32 {
			if j == 0 {
				return 8.0 / 32
			}
			return float32(r.IntN(16)-8) * -1 / 32
		}},
	} {
		t.Run(tc.t.String(), func(t *testing.T) {
			x := make([]float32, 8*tc.block)
			for i := range x {
				x[i] = tc.level(i % tc.block)
			}
			rb, _ := tc.t.RowBytes(len(x))
			q := make([]byte, rb)
			QuantizeRow(tc.t, q, x)
			y := make([]float32, len(x))
			DequantizeRow(tc.t, y, q)
			for i := range x {
				if x[i] != y[i] {
					t.Fatalf("element %d: %g → %g", i, x[i], y[i])
				}
			}
		})
	}
}

// TestQuantizeZeroBlocks: an all-zero block is stored as ggml stores it:
// zero bytes, except Q4_0, whose d is 0/-8 = -0 (f16 0x8000) and whose
// levels are all 8 (the value 0).
func TestQuantizeZeroBlocks(t *testing.T) {
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, Q6_K} {
		rb, _ := typ.RowBytes(QK_K)
		want := make([]byte, rb)
		if typ == Q4_0 {
			for b := 0; b < rb; b += BlockBytesQ4_0 {
				want[b+1] = 0x80
				for j := 2; j < BlockBytesQ4_0; j++ {
					want[b+j] = 0x88
				}
			}
		}
		q := make([]byte, rb)
		for i := range q {
			q[i] = 0xAA
		}
		QuantizeRow(typ, q, make([]float32, QK_K))
		for i := range q {
			if q[i] != want[i] {
				t.Fatalf("%v: byte %d = %#x, want %#x", typ, i, q[i], want[i])
			}
		}
	}
}

// TestNearestInt compares ggml's float trick with round-half-to-even.
func TestNearestInt(t *testing.T) {
	for _, f := range []float32{0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 31.5, -32.5, 127.4, -128.6, 4194303} {
		want := int(math.RoundToEven(float64(f)))
		if got := nearestInt(f); got != want {
			t.Errorf("nearestInt(%v) = %d, want %d", f, got, want)
		}
	}
}

// TestQuantizeRowPanicsOnMisuse: like DequantizeRow, misuse is a
// programming error, reported with the type and sizes.
func TestQuantizeRowPanicsOnMisuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Type
		dst  int
		n    int
	}{
		{"partial block", Q4_0, BlockBytesQ4_0, 31},
		{"short dst", Q8_0, BlockBytesQ8_0 - 1, 32},
		{"unsupported", I32, 4, 1},
		{"unknown", Type(99), 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("no panic")
				}
			}()
			QuantizeRow(tc.t, make([]byte, tc.dst), make([]float32, tc.n))
		})
	}
}
