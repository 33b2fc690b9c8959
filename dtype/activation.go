package dtype

import (
	"math"
)

// The activation-only types: glint never stores them in a file; they define
// how activations are rounded for quantised matmuls.
const (
	// Q8_1 is Q8_0 plus a per-block sum s = f16(d·Σq), with d the block scale
	// before its f16 rounding: the weights with a min (Q4_1, Q5_1) add m·s.
	Q8_1 Type = 9
	// Q8_K is a float32 scale per 256 int8 values and 16 int16 partial sums
	// (the K-quants subtract their mins from those sums).
	Q8_K Type = 15
)

// ActivationType is the type a matmul's activations are rounded to for
// weights of type t, as llama.cpp does (ggml's vec_dot_type): Q8_0 for Q4_0,
// Q5_0, Q8_0 and IQ4_NL weights, Q8_1 for Q4_1 and Q5_1, Q8_K for the
// K-quants and IQ4_XS, F16 for F16, BF16 for BF16, and F32 (no rounding)
// for F32. A product of two F16 (or two BF16) values is exact in
// float32, so rounding x is the whole difference from an f32 dot product.
//
// Rounding the activations is what lets a backend use integer dot products;
// glint does it on every backend, identically, so that quantised models give
// llama.cpp's tokens and every backend gives the same ones.
func (t Type) ActivationType() Type {
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ4_NL:
		return Q8_0
	case Q4_1, Q5_1:
		return Q8_1
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS:
		return Q8_K
	case F16, BF16:
		return t
	}
	return F32
}

// RoundActivations writes to dst the values that the integer dot products
// see when a row x is quantised to activation type at (Q8_0, Q8_1 or Q8_K;
// F32 copies). It is the reference every backend's matmul is tested against:
//
//   - Q8_0 and Q8_1, per block of 32 (ggml's x86 quantize_row_q8_0/_1):
//     amax = max|x|, d = amax/127 stored as f16, id = 127/amax (0 when amax
//     is 0), q = round-half-even(x·id), value = f16(d)·q. Q8_1's block sum
//     (Q8_1Sum) is not a value: the matmul multiplies it by the weights' min.
//   - Q8_K, per block of 256 (quantize_row_q8_K_ref): m = the element of
//     largest magnitude (the first on ties), iscale = -127/m,
//     q = min(127, round-half-even(iscale·x)), value = q·(1/iscale).
//   - F16 and BF16, per element: round to nearest even (ggml's
//     GGML_FP32_TO_FP16 with F16C, GGML_FP32_TO_BF16).
func RoundActivations(at Type, dst, x []float32) {
	switch at {
	case Q8_0, Q8_1:
		for b := 0; b+QK8_0 <= len(x); b += QK8_0 {
			d, id := Q8_0Scale(x[b : b+QK8_0])
			for j := b; j < b+QK8_0; j++ {
				dst[j] = d * RoundEven(x[j]*id)
			}
		}
	case Q8_K:
		for b := 0; b+QK_K <= len(x); b += QK_K {
			d, iscale := Q8_KScale(x[b : b+QK_K])
			for j := b; j < b+QK_K; j++ {
				if iscale == 0 {
					dst[j] = 0
					continue
				}
				dst[j] = min(127, RoundEven(iscale*x[j])) * d
			}
		}
	case F16:
		for j, v := range x {
			dst[j] = F16ToF32(F32ToF16(v))
		}
	case BF16:
		for j, v := range x {
			dst[j] = BF16ToF32(F32ToBF16(v))
		}
	default:
		copy(dst, x)
	}
}

// Q8_0Scale returns a Q8_0 activation block's scale as stored (rounded to
// f16) and the multiplier that quantises it.
func Q8_0Scale(x []float32) (d, id float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		return 0, 0
	}
	return F16ToF32(F32ToF16(amax / 127)), 127 / amax
}

// Q8_KScale returns a Q8_K activation block's scale and the multiplier that
// quantises it (both 0 for an all-zero block).
func Q8_KScale(x []float32) (d, iscale float32) {
	m, amax := signedMax(x)
	if amax == 0 {
		return 0, 0
	}
	iscale = -127 / m
	return 1 / iscale, iscale
}

// RoundEven rounds to the nearest integer, ties to even (the x86 default
// rounding mode, and ggml's nearest_int).
func RoundEven(x float32) float32 { return float32(math.RoundToEven(float64(x))) }

// Q8_1Sum is a Q8_1 block's s: the sum of its quants times its scale before
// the f16 rounding (amax/127), rounded to f16, as ggml's x86
// quantize_row_q8_1 stores it.
func Q8_1Sum(x []float32) float32 {
	_, id := Q8_0Scale(x)
	var amax float32
	var s int32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
		s += int32(RoundEven(v * id))
	}
	return F16ToF32(F32ToF16(amax / 127 * float32(s)))
}
