package dtype

import (
	"encoding/binary"
	"math"
	"testing"
)

// newTypes are the block formats of quantize_more.go and dequant.go.
var newTypes = []Type{Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, IQ4_NL, IQ4_XS}

// TestQuantizeRoundTripNoise bounds the relative RMS error of
// dequantize(quantize(x)) on Gaussian rows by the noise of a uniform
// quantiser with the format's level count: a block of 32 normal values
// spans about 4.1σ, so b bits give steps of 4.1σ/(2^b-1) and an RMS error
// of step/√12. The formats search their scales, so they do at least that
// well; 1.5× leaves room for the coarser 6-bit sub-block scales of the
// K-quants. A decoder that misplaces a bit field gives errors of order σ
// (relative error ≈ 1) and fails.
func TestQuantizeRoundTripNoise(t *testing.T) {
	const n = 16 * QK_K
	x := testRows(n)["gauss"]
	bits := map[Type]float64{Q4_1: 4, Q5_0: 5, Q5_1: 5, Q2_K: 2, Q3_K: 3, Q4_K: 4, Q5_K: 5, Q6_K: 6, IQ4_NL: 4, IQ4_XS: 4, Q4_0: 4, Q8_0: 8}
	for typ, b := range bits {
		rb, _ := typ.RowBytes(n)
		q := make([]byte, rb)
		QuantizeRow(typ, q, x)
		y := make([]float32, n)
		DequantizeRow(typ, y, q)
		var se, sx float64
		for i := range x {
			d := float64(y[i]) - float64(x[i])
			se += d * d
			sx += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(se / sx)
		bound := 1.5 * 4.1 / (math.Exp2(b) - 1) / math.Sqrt(12)
		if rel > bound {
			t.Errorf("%v: relative RMS error %.4f, bound %.4f", typ, rel, bound)
		} else {
			t.Logf("%v: relative RMS error %.4f (bound %.4f)", typ, rel, bound)
		}
	}
}

// TestQuantizeZeroBlocksNewTypes: an all-zero row comes back as zeros; with
// a lone outlier the zeros stay near zero (the formats with a min or
// non-uniform levels have no exact zero level, so within a quarter of the
// outlier, a 2-bit step) and the outlier, which sets the scale, comes back
// within 1/16.
func TestQuantizeZeroBlocksNewTypes(t *testing.T) {
	for _, typ := range newTypes {
		for _, outlier := range []float32{0, 3, -3} {
			x := make([]float32, 2*QK_K)
			x[5] = outlier
			rb, _ := typ.RowBytes(len(x))
			q := make([]byte, rb)
			QuantizeRow(typ, q, x)
			y := make([]float32, len(x))
			DequantizeRow(typ, y, q)
			for i := range y {
				if i != 5 && abs32(y[i]) > abs32(outlier)/4 {
					t.Fatalf("%v, outlier %v: element %d = %v, want 0 (within a quarter of the outlier)", typ, outlier, i, y[i])
				}
			}
			if abs32(y[5]-outlier) > abs32(outlier)/16 {
				t.Errorf("%v: outlier %v comes back as %v", typ, outlier, y[5])
			}
		}
	}
}

// f16Fields are the byte offsets of each block format's f16 scales.
var f16Fields = map[Type][]int{
	Q4_0: {0}, Q8_0: {0}, Q4_1: {0, 2}, Q5_0: {0}, Q5_1: {0, 2}, Q2_K: {80, 82}, Q3_K: {108},
	Q4_K: {0, 2}, Q5_K: {0, 2}, Q6_K: {208}, IQ4_NL: {0}, IQ4_XS: {0},
}

// FuzzDequantizeBlocks decodes arbitrary bytes as each block format, with
// the f16 scales forced to hostile values (NaN, ±Inf, the largest finite
// value, subnormals) or left as fuzzed. Decoding must never panic, must
// give the same values block by block as for the whole row, and a block
// whose f16 fields are all finite must decode to finite values: every
// level and sub-scale is bounded, so only a NaN or Inf scale can make a
// non-finite value.
func FuzzDequantizeBlocks(f *testing.F) {
	f.Add(uint8(0), uint16(0x7e00), make([]byte, 300))              // NaN
	f.Add(uint8(1), uint16(0x7c00), []byte{0xff, 0x7b, 1, 2, 3, 4}) // +Inf
	f.Add(uint8(2), uint16(0xfc00), make([]byte, 140))              // -Inf
	f.Add(uint8(3), uint16(0x7bff), []byte{0xff, 0xff, 0xff, 0xff}) // 65504
	f.Add(uint8(4), uint16(0x0001), []byte{0x80, 0x7f})             // smallest subnormal
	f.Add(uint8(5), uint16(0xffff), []byte{})                       // fuzzed scales kept
	f.Fuzz(func(t *testing.T, which uint8, scale uint16, data []byte) {
		var types []Type
		for _, t := range KnownTypes() {
			if t.Quantized() {
				types = append(types, t)
			}
		}
		typ := types[int(which)%len(types)]
		bb := typ.BlockBytes()
		nb := min(len(data)/bb+1, 4)
		raw := make([]byte, nb*bb)
		for i := range raw {
			if len(data) > 0 {
				raw[i] = data[i%len(data)]
			}
		}
		if scale != 0xffff {
			for b := 0; b < nb; b++ {
				for _, off := range f16Fields[typ] {
					binary.LittleEndian.PutUint16(raw[b*bb+off:], scale)
				}
			}
		}
		bs := typ.BlockSize()
		row := make([]float32, nb*bs)
		DequantizeRow(typ, row, raw)
		one := make([]float32, bs)
		for b := 0; b < nb; b++ {
			blk := raw[b*bb : (b+1)*bb]
			DequantizeRow(typ, one, blk)
			finite := true
			for _, off := range f16Fields[typ] {
				h := binary.LittleEndian.Uint16(blk[off:])
				finite = finite && h&0x7c00 != 0x7c00
			}
			var l Levels
			l.Unpack(typ, blk)
			for j, v := range one {
				if math.Float32bits(v) != math.Float32bits(row[b*bs+j]) {
					t.Fatalf("%v block %d element %d: %v alone, %v in the row", typ, b, j, v, row[b*bs+j])
				}
				if finite && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
					t.Fatalf("%v block %d element %d: %v from finite scales", typ, b, j, v)
				}
				// The integer view the matmuls use must describe the same
				// value, up to ggml's float32 roundings (at most three, of
				// terms no larger than these).
				if !finite {
					continue
				}
				g := j / l.Group
				a := float64(l.D) * float64(l.Scale[g]) * float64(l.V[j])
				m := float64(l.M) * float64(l.Min[g])
				if d := math.Abs(float64(v) - (a - m)); d > 0x1p-21*(math.Abs(a)+math.Abs(m))+0x1p-140 {
					t.Fatalf("%v block %d element %d: %v decoded, %v from Levels", typ, b, j, v, a-m)
				}
			}

		}
	})
}

// FuzzQuantizeRow quantises arbitrary float32 bits (NaN, ±Inf, subnormals,
// values far past nearest_int's range) to every block format: it must not
// panic, and a row of finite values small enough that no scale overflows
// f16 (|x| ≤ 1000) must decode to finite values.
func FuzzQuantizeRow(f *testing.F) {
	f.Add(uint8(0), []byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x7f, 0, 0, 0x80, 0xff})
	f.Add(uint8(3), []byte{0xff, 0xff, 0x7f, 0x7f, 1, 0, 0, 0})
	f.Add(uint8(7), []byte{0, 0, 0x80, 0x3f, 0, 0, 0x80, 0xbf})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		var types []Type
		for _, t := range KnownTypes() {
			if t.Quantized() {
				types = append(types, t)
			}
		}
		typ := types[int(which)%len(types)]
		fuzzRoundTrip(t, typ, typ.BlockSize()*min(4, 1+len(data)/(4*QK_K)), data, QuantizeRow)
	})
}

// fuzzRoundTrip quantises n floats read from data's bits to typ with
// quantize and decodes them: a row of finite values small enough that no
// scale overflows f16 (|x| ≤ 1000) must decode to finite values.
func fuzzRoundTrip(t *testing.T, typ Type, n int, data []byte, quantize func(Type, []byte, []float32)) {
	x := make([]float32, n)
	finite := true
	for i := range x {
		if len(data) >= 4 {
			j := 4 * (i % (len(data) / 4))
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[j:]))
		}
		finite = finite && abs32(x[i]) <= 1000
	}
	rb, _ := typ.RowBytes(n)
	q := make([]byte, rb)
	quantize(typ, q, x)
	y := make([]float32, n)
	DequantizeRow(typ, y, q)
	if !finite {
		return
	}
	for i, v := range y {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%v: element %d (%v) decodes to %v", typ, i, x[i], v)
		}
	}
}

// TestQuantizeExactLevelsNewTypes feeds blocks already on the grid of the
// formats with a single scale per 32: quantising must give them back
// exactly, which pins each level's bit position in the layout.
func TestQuantizeExactLevelsNewTypes(t *testing.T) {
	for _, tc := range []struct {
		t     Type
		level func(j, k int) float32 // element j of a block; k cycles all levels
	}{
		// Q4_1: min -1 and step 1/8 (both exact in f16); levels 0 and 15
		// are present so that (max-min)/15 is the step.
		{Q4_1, func(j, k int) float32 {
			l := [2]int{0, 15}[min(j, 1)]
			if j > 1 {
				l = k % 16
			}
			return -1 + float32(l)/8
		}},
		// Q5_1: min -1, step 1/16, levels 0…31.
		{Q5_1, func(j, k int) float32 {
			l := [2]int{0, 31}[min(j, 1)]
			if j > 1 {
				l = k % 32
			}
			return -1 + float32(l)/16
		}},
		// Q5_0: d = -1/32 from the extreme 16/32 first; levels -16…15.
		{Q5_0, func(j, k int) float32 {
			if j == 0 {
				return 16.0 / 32
			}
			return float32(k%32-16) * -1 / 32
		}},
	} {
		t.Run(tc.t.String(), func(t *testing.T) {
			x := make([]float32, 8*32)
			for i := range x {
				x[i] = tc.level(i%32, i*7+i/32)
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
