package cpu

import (
	"math"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
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

// Float weights are summed as llama.cpp's CPU build sums them (its
// ggml_compute_forward_mul_mat), so that F16, BF16 and F32 files give its
// logits: in the flavour's order for the call (numerics.Order). The weights
// meet activations rounded to F16 or BF16 for those types, as llama.cpp's
// vec_dot_type rounds them; their products are then exact in float32, so a
// fused multiply-add and a rounded product added give the same bits. Every
// kernel level reproduces the Go kernels below bit for bit (simd.c).
type floatSum = numerics.Order

const (
	sumVec8     = numerics.SumVec8
	sumVec16    = numerics.SumVec16
	sumTiny8    = numerics.SumTiny8
	sumTiny16   = numerics.SumTiny16
	sumVecBF16  = numerics.SumVecBF16
	sumTinyBF16 = numerics.SumTinyBF16
)

// finishSum reduces the lanes of one output and adds the products of the
// elements past the last whole step (x, w: at most lanes-1 of them; tinyBLAS
// has none).
func finishSum(s floatSum, dt dtype.Type, acc *[64]float32, x, w []float32) float32 {
	switch s {
	case sumTiny8:
		return hsum8(*(*[8]float32)(acc[:8]))
	case sumTiny16, sumTinyBF16:
		return reduce16((*[16]float32)(acc[:16]))
	case sumVec8:
		var v [4][8]float32
		for j := range v {
			v[j] = [8]float32(acc[8*j:])
		}
		if dt == dtype.BF16 {
			// ggml_vec_dot_bf16 folds as F16 does but reduces as hsum8.
			for l := range 8 {
				v[0][l] = (v[0][l] + v[2][l]) + (v[1][l] + v[3][l])
			}
			return tailF64(float64(hsum8(v[0])), x, w)
		}
		r := reduce8Fold(&v)
		if dt == dtype.F16 {
			return tailF64(float64(r), x, w)
		}
		return tailF32(r, x, w, 4)
	}
	if dt == dtype.BF16 { // sumVec16 or sumVecBF16
		sum := float64(reduce16((*[16]float32)(acc[:16])))
		sum += float64(reduce16((*[16]float32)(acc[16:32])))
		return tailF64(sum, x, w)
	}
	var v [4][16]float32
	for j := range v {
		v[j] = [16]float32(acc[16*j:])
	}
	return tail512(&v, x, w, dt == dtype.F16)
}

// tailF64 is vec_dot's F16 and BF16 remainder: the (exact) products added
// to sum in float64.
func tailF64(sum float64, x, w []float32) float32 {
	for i, v := range x {
		sum += float64(v * w[i])
	}
	return float32(sum)
}

// tailF32 adds ggml_vec_dot_f32's remainder to r as gcc compiles its
// sumf += x·w: the products of whole groups of group elements (4 in the
// AVX2 build, 8 in the AVX-512 one: vmulps) rounded and added in order,
// the last len%group by fused multiply-adds.
func tailF32(r float32, x, w []float32, group int) float32 {
	whole := len(x) / group * group
	for i := range whole {
		r += float32(x[i] * w[i])
	}
	for i := whole; i < len(x); i++ {
		r = fmaf(x[i], w[i], r)
	}
	return r
}

// addLanes adds x[i]·w[i] into lane i%lanes of acc (len(x) a multiple of
// lanes), by fused multiply-adds: for F32 weights in software (fmaf), for
// F16 and BF16, whose products are exact, as a product added.
func addLanes(acc *[64]float32, x, w []float32, lanes int, fused bool) {
	w = w[:len(x)]
	if fused {
		for i, v := range x {
			acc[i&(lanes-1)] = fmaf(v, w[i], acc[i&(lanes-1)])
		}
		return
	}
	for i, v := range x {
		acc[i&(lanes-1)] += float32(v * w[i])
	}
}

// addPairs is addLanes for the vdpbf16ps orders, over steps of width
// elements (lanes): elements 2j and 2j+1 of a step go to lane j, the odd
// one first, each by a fused multiply-add that takes subnormal inputs as
// zero and flushes a subnormal result to zero, as vdpbf16ps does (checked
// against the instruction on Zen 4: TestDotBF16SIMD).
func addPairs(acc *[64]float32, x, w []float32, width int) {
	w = w[:len(x)]
	for i := 0; i+1 < len(x); i += 2 {
		l := (i & (width - 1)) >> 1
		a := ftz(fmaf(ftz(x[i+1]), ftz(w[i+1]), ftz(acc[l])))
		acc[l] = ftz(fmaf(ftz(x[i]), ftz(w[i]), a))
	}
}

// ftz is v with a subnormal flushed to a zero of its sign.
func ftz(v float32) float32 {
	if math.Float32bits(v)&0x7F800000 == 0 {
		return math.Float32frombits(math.Float32bits(v) & 0x80000000)
	}
	return v
}

func bf16(lo, hi byte) float32 {
	return math.Float32frombits(uint32(lo)<<16 | uint32(hi)<<24)
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
