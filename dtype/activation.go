package dtype

import (
	"math"
)

// Q8_K is ggml's activation type for K-quant weights: a float32 scale, 256
// int8 values and 16 int16 partial sums. glint never stores it in a file;
// it defines how activations are rounded for Q6_K matmuls.
const Q8_K Type = 15

// ActivationType is the type a matmul's activations are rounded to for
// weights of type t, as llama.cpp does (ggml's vec_dot_type): Q8_0 for Q4_0
// and Q8_0 weights, Q8_K for Q6_K, F16 for F16, BF16 for BF16, and F32 (no
// rounding) for F32. A product of two F16 (or two BF16) values is exact in
// float32, so rounding x is the whole difference from an f32 dot product.
//
// Rounding the activations is what lets a backend use integer dot products;
// glint does it on every backend, identically, so that quantised models give
// llama.cpp's tokens and every backend gives the same ones.
func (t Type) ActivationType() Type {
	switch t {
	case Q4_0, Q8_0:
		return Q8_0
	case Q6_K:
		return Q8_K
	case F16, BF16:
		return t
	}
	return F32
}

// RoundActivations writes to dst the values that the integer dot products
// see when a row x is quantised to activation type at (Q8_0 or Q8_K; F32
// copies). It is the reference every backend's matmul is tested against:
//
//   - Q8_0, per block of 32 (ggml's x86 quantize_row_q8_0): amax = max|x|,
//     d = amax/127 stored as f16, id = 127/amax (0 when amax is 0),
//     q = round-half-even(x·id), value = f16(d)·q.
//   - Q8_K, per block of 256 (quantize_row_q8_K_ref): m = the element of
//     largest magnitude (the first on ties), iscale = -127/m,
//     q = min(127, round-half-even(iscale·x)), value = q·(1/iscale).
//   - F16 and BF16, per element: round to nearest even (ggml's
//     GGML_FP32_TO_FP16 with F16C, GGML_FP32_TO_BF16).
func RoundActivations(at Type, dst, x []float32) {
	switch at {
	case Q8_0:
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
