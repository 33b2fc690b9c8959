package dtype

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// A q8_0 cache row is quantised as the x86 quantize_row_q8_0 does: x·127/amax
// rounded half to even. At a tie (amax 127, so the multiplier is exactly 1)
// it differs from the reference quantiser, which rounds half away from
// zero; elsewhere the two agree to within one level (their multipliers,
// 127/amax and 1/f32(amax/127), may differ in the last bit) and store the
// same scale.
func TestQuantizeCacheRowQ8_0(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 127, 2.5, -3.5, 0.5
	got, ref := make([]byte, BlockBytesQ8_0), make([]byte, BlockBytesQ8_0)
	QuantizeCacheRow(Q8_0, got, x)
	QuantizeRow(Q8_0, ref, x)
	for i, want := range []int8{127, 2, -4, 0} {
		if q := int8(got[2+i]); q != want {
			t.Errorf("x = %v: q %d, want %d (half to even)", x[i], q, want)
		}
	}
	if int8(ref[3]) != 3 || int8(ref[5]) != 1 {
		t.Errorf("the reference rounds 2.5 to %d and 0.5 to %d, want 3 and 1 (away from zero)", int8(ref[3]), int8(ref[5]))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		for i := range x {
			x[i] = rng.Float32()*6 - 3
		}
		QuantizeCacheRow(Q8_0, got, x)
		QuantizeRow(Q8_0, ref, x)
		if binary.LittleEndian.Uint16(got) != binary.LittleEndian.Uint16(ref) {
			t.Fatalf("scale %04x, reference %04x", binary.LittleEndian.Uint16(got), binary.LittleEndian.Uint16(ref))
		}
		for i := range 32 {
			if d := int(int8(got[2+i])) - int(int8(ref[2+i])); d < -1 || d > 1 {
				t.Fatalf("element %d: q %d, reference %d", i, int8(got[2+i]), int8(ref[2+i]))
			}
		}
	}
}

// An iq4_nl cache row is quantize_row_iq4_nl_ref's: the scale is the
// x²-weighted least-squares fit of the levels nearest x/d, d = max/−127, so
// it is the f16 of Σw·q·x / Σw·q² over those levels, recomputed here from
// the stored levels; an all-zero block stores zeros.
func TestQuantizeCacheRowIQ4NL(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, 32)
	blk := make([]byte, BlockBytesIQ4_NL)
	for range 100 {
		for i := range x {
			x[i] = rng.Float32()*4 - 2
		}
		QuantizeCacheRow(IQ4_NL, blk, x)
		var num, den float64
		for j, v := range x {
			nib := blk[2+j%16] & 0xF
			if j >= 16 {
				nib = blk[2+j%16] >> 4
			}
			q := float64(kvaluesIQ4NL[nib])
			w := float64(v) * float64(v)
			num += w * q * float64(v)
			den += w * q * q
		}
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		if want := num / den; math.Abs(float64(d)-want) > math.Abs(want)*0x1p-10 {
			t.Fatalf("scale %v, the fit of its levels %v", d, want)
		}
	}
	clear(x)
	QuantizeCacheRow(IQ4_NL, blk, x)
	for i, b := range blk {
		if b != 0 {
			t.Fatalf("an all-zero block: byte %d is %#x", i, b)
		}
	}
}

// FuzzQuantizeCacheRow: every cache type takes any row without panicking,
// and finite values (|x| ≤ 1000) come back finite.
func FuzzQuantizeCacheRow(f *testing.F) {
	f.Add(uint8(0), []byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x7f})
	f.Add(uint8(6), []byte{0, 0, 0x80, 0x3f, 0, 0, 0x80, 0xbf})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		typ := CacheTypes[int(which)%len(CacheTypes)]
		fuzzRoundTrip(t, typ, 32*min(4, 1+len(data)/128), data, QuantizeCacheRow)
	})
}
