package cpu

import (
	"math"

	"github.com/glint-llm/glint/dtype"
)

// The portable row kernels for float weights (quantised ones are in
// quant.go). Each dot kernel takes one activation row x and one weight
// row w in its stored layout and returns Σ x[i]·w[i]; each dequant kernel
// expands a whole number of blocks. They are deliberately small leaf
// functions so that a SIMD implementation can replace them one at a time.
// Partial sums are kept in several accumulators: that shortens the add
// dependency chain and, as a pairwise-ish summation, loses less precision.

// f16Table maps every half-precision bit pattern to its float32 value; a
// load from a 256 KiB table beats converting bits in the hot loop.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = dtype.F16ToF32(uint16(i))
	}
	return &t
}()

// q4Table maps a Q4_0 byte to its two signed values (low nibble, high nibble).
var q4Table = func() *[256][2]float32 {
	var t [256][2]float32
	for i := range t {
		t[i] = [2]float32{float32(i&0xF) - 8, float32(i>>4) - 8}
	}
	return &t
}()

func f16At(w []byte, i int) float32 {
	return f16Table[uint16(w[2*i])|uint16(w[2*i+1])<<8]
}

func dotF32(x, w []float32) float32 {
	w = w[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ws := x[i:i+4:i+4], w[i:i+4:i+4]
		s0 += xs[0] * ws[0]
		s1 += xs[1] * ws[1]
		s2 += xs[2] * ws[2]
		s3 += xs[3] * ws[3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * w[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16(x []float32, w []byte) float32 {
	w = w[:2*len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ws := x[i:i+4:i+4], w[2*i:2*i+8:2*i+8]
		s0 += xs[0] * f16Table[uint16(ws[0])|uint16(ws[1])<<8]
		s1 += xs[1] * f16Table[uint16(ws[2])|uint16(ws[3])<<8]
		s2 += xs[2] * f16Table[uint16(ws[4])|uint16(ws[5])<<8]
		s3 += xs[3] * f16Table[uint16(ws[6])|uint16(ws[7])<<8]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * f16At(w, i)
	}
	return (s0 + s1) + (s2 + s3)
}

func bf16(lo, hi byte) float32 {
	return math.Float32frombits(uint32(lo)<<16 | uint32(hi)<<24)
}

func dotBF16(x []float32, w []byte) float32 {
	w = w[:2*len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ws := x[i:i+4:i+4], w[2*i:2*i+8:2*i+8]
		s0 += xs[0] * bf16(ws[0], ws[1])
		s1 += xs[1] * bf16(ws[2], ws[3])
		s2 += xs[2] * bf16(ws[4], ws[5])
		s3 += xs[3] * bf16(ws[6], ws[7])
	}
	for ; i < len(x); i++ {
		s0 += x[i] * bf16(w[2*i], w[2*i+1])
	}
	return (s0 + s1) + (s2 + s3)
}

// dot dispatches on the (float) weight type; x and w are one row each.
func dot(dt dtype.Type, x []float32, w []byte, wf []float32) float32 {
	switch dt {
	case dtype.F32:
		return dotF32(x, wf)
	case dtype.F16:
		return dotF16(x, w)
	case dtype.BF16:
		return dotBF16(x, w)
	}
	return 0
}

// dequant expands len(y) elements (whole blocks) of w, stored as dt, into y.
// It rounds exactly as dtype.DequantizeRow does, so Embedding is bit-exact.
func dequant(dt dtype.Type, y []float32, w []byte) {
	switch dt {
	case dtype.F32:
		w = w[:4*len(y)]
		for i := range y {
			y[i] = math.Float32frombits(uint32(w[4*i]) | uint32(w[4*i+1])<<8 | uint32(w[4*i+2])<<16 | uint32(w[4*i+3])<<24)
		}
	case dtype.F16:
		w = w[:2*len(y)]
		for i := range y {
			y[i] = f16At(w, i)
		}
	case dtype.BF16:
		w = w[:2*len(y)]
		for i := range y {
			y[i] = bf16(w[2*i], w[2*i+1])
		}
	case dtype.Q8_0:
		for b := range len(y) / dtype.QK8_0 {
			blk := (*[dtype.BlockBytesQ8_0]byte)(w[b*dtype.BlockBytesQ8_0:])
			yb := (*[dtype.QK8_0]float32)(y[b*dtype.QK8_0:])
			d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
			for j := range yb {
				yb[j] = d * float32(int8(blk[2+j]))
			}
		}
	case dtype.Q4_0:
		for b := range len(y) / dtype.QK4_0 {
			blk := (*[dtype.BlockBytesQ4_0]byte)(w[b*dtype.BlockBytesQ4_0:])
			yb := (*[dtype.QK4_0]float32)(y[b*dtype.QK4_0:])
			d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
			for j := range dtype.QK4_0 / 2 {
				v := &q4Table[blk[2+j]]
				yb[j] = d * v[0]
				yb[j+16] = d * v[1]
			}
		}
	case dtype.Q6_K:
		for b := range len(y) / dtype.QK_K {
			dequantQ6_K((*[dtype.QK_K]float32)(y[b*dtype.QK_K:]), (*[dtype.BlockBytesQ6_K]byte)(w[b*dtype.BlockBytesQ6_K:]))
		}
	}
}

func dequantQ6_K(y *[dtype.QK_K]float32, blk *[dtype.BlockBytesQ6_K]byte) {
	d := f16Table[uint16(blk[208])|uint16(blk[209])<<8]
	for half := range 2 {
		ql := (*[64]byte)(blk[64*half:])
		qh := (*[32]byte)(blk[128+32*half:])
		sc := (*[8]byte)(blk[192+8*half:])
		yh := (*[128]float32)(y[128*half:])
		for l := range 32 {
			is := l / 16
			h := qh[l]
			a, c := ql[l], ql[l+32]
			yh[l] = d * float32(int8(sc[is])) * float32(int(a&0xF|(h&3)<<4)-32)
			yh[l+32] = d * float32(int8(sc[is+2])) * float32(int(c&0xF|(h>>2&3)<<4)-32)
			yh[l+64] = d * float32(int8(sc[is+4])) * float32(int(a>>4|(h>>4&3)<<4)-32)
			yh[l+96] = d * float32(int8(sc[is+6])) * float32(int(c>>4|(h>>6)<<4)-32)
		}
	}
}
