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
// Their summation order is the reference the SIMD levels reproduce exactly
// (see dot, and dotQ4_0 for quantised weights).

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

// Float weights have two summation orders, one for decode and one for
// prefill, and every kernel level reproduces the one it runs bit for bit
// (the C kernels in simd.c add rounded products for F32 as these do; for
// F16 and BF16 the activations are rounded to the weight's type first, so
// each product is exact in float32 and a fused multiply-add gives the same
// bits). Decode (dot) keeps 16 lanes, so that a row streams through vectors
// with no transposing; the prefill GEMM keeps one sum per output in a
// register lane as it sweeps k (dotChunk), so that its packed panels serve
// many tokens. A token's logits may therefore differ in the last bits
// between prefill and decode, as they do in llama.cpp; between levels they
// do not.

// dotChunk is the prefill order for one chunk (at most chunkElems
// elements): the products added one after another, from zero. The prefill
// adds the chunks' sums in sequence.
func dotChunk(x, w []float32) float32 {
	w = w[:len(x)]
	var s float32
	for i, v := range x {
		// The conversion keeps the compiler from fusing the product into
		// the add.
		s += float32(v * w[i])
	}
	return s
}

func bf16(lo, hi byte) float32 {
	return math.Float32frombits(uint32(lo)<<16 | uint32(hi)<<24)
}

// dot is the decode order of a float-weight dot product (x and w one row
// each): lane j of 16 sums the products of elements j, j+16, j+32, … in
// sequence; then lanes j and j+8 are added, then j and j+4, j and j+2, and
// the last two.
func dot(dt dtype.Type, x []float32, w []byte, wf []float32) float32 {
	var buf [chunkElems]float32
	var s [16]float32
	elemBytes := dt.BlockBytes() // float types: bytes per element
	for c := 0; c < len(x); c += chunkElems {
		cl := min(chunkElems, len(x)-c)
		wc := buf[:cl]
		if dt == dtype.F32 {
			wc = wf[c : c+cl]
		} else {
			dequant(dt, wc, w[c*elemBytes:])
		}
		for i, v := range x[c : c+cl] {
			s[i%16] += float32(v * wc[i]) // chunkElems is a multiple of 16
		}
	}
	for h := 8; h > 0; h /= 2 {
		for j := range h {
			s[j] += s[j+h]
		}
	}
	return s[0]
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

// embedRow dequantises one embedding row: dequant's fast paths where it has
// them, else the reference (a row per token is not worth a kernel). It is
// apart from dequant because handing y to the reference makes the compiler
// move the float kernels' stack buffers to the heap.
func embedRow(dt dtype.Type, y []float32, w []byte) {
	switch dt {
	case dtype.F32, dtype.F16, dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q6_K:
		dequant(dt, y, w)
	default:
		dtype.DequantizeRow(dt, y, w)
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
