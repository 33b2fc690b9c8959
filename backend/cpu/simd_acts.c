// Activation quantisation (Q8_0, Q8_1, Q8_K) and rounding (F16, BF16) for
// simd.c's matmuls.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd_kernels.h"

// ---------------------------------------------------------------- activations

// pack32 narrows four vectors of int32 (elements 0-7, 8-15, 16-23, 24-31,
// each within int8 range) to 32 int8 in element order: the packs interleave
// 128-bit lanes, which the final permute undoes.
INLINE A2 __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
	__m256i a = _mm256_packs_epi32(i0, i1), b = _mm256_packs_epi32(i2, i3);
	return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The multiplications, divisions and roundings below are exactly the float32
// operations of dtype.Q8_0Scale, dtype.Q8_KScale and dtype.RoundActivations
// (vcvtps2dq rounds half to even under the default MXCSR mode, as
// math.RoundToEven does), so the quantised values are bit-identical to the
// Go reference; simd_test.go checks that directly.
// quantize_q8_32 quantises k floats in blocks of 32 into q and the blocks'
// f16-rounded scales d, and per block either (c not NULL, Q8_0) c = −off·Σq
// or (Q8_1) s = f16((amax/127)·Σq), dtype.Q8_1Sum: the float32 product of
// the scale before its f16 rounding and the exact sum.
INLINE A2 void quantize_q8_32(const float *x, int k, int off, int8_t *q, float *d, int32_t *c, float *s) {
	const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
	for (int b = 0; b < k / 32; b++) {
		const float *xb = x + 32 * b;
		__m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
		__m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
		__m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs), _mm256_and_ps(v1, abs)),
		                         _mm256_max_ps(_mm256_and_ps(v2, abs), _mm256_and_ps(v3, abs)));
		float amax = hmax8(m);
		if (amax == 0) {
			memset(q + 32 * b, 0, 32);
			d[b] = 0;
			if (c != NULL) {
				c[b] = 0;
			} else {
				s[b] = 0;
			}
			continue;
		}
		float sc = amax / 127.0f;
		d[b] = _cvtsh_ss(_cvtss_sh(sc, _MM_FROUND_TO_NEAREST_INT));
		__m256 id = _mm256_set1_ps(127.0f / amax);
		__m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
		__m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
		int sum = hsum8i(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
		if (c != NULL) {
			c[b] = -off * sum;
		} else {
			s[b] = _cvtsh_ss(_cvtss_sh(sc * (float)sum, _MM_FROUND_TO_NEAREST_INT));
		}
		_mm256_storeu_si256((__m256i *)(q + 32 * b), pack32(i0, i1, i2, i3));
	}
}

static A2 void quantize_q8_k_avx2(const float *x, int k, int8_t *q, float *d, int16_t *bs) {
	const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
	const __m256i max127 = _mm256_set1_epi32(127);
	for (int b = 0; b < k / 256; b++) {
		const float *xb = x + 256 * b;
		__m256 m = _mm256_setzero_ps();
		for (int i = 0; i < 256; i += 8) {
			m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + i), abs));
		}
		float amax = hmax8(m);
		if (amax == 0) {
			memset(q + 256 * b, 0, 256);
			memset(bs + 16 * b, 0, 32);
			d[b] = 0;
			continue;
		}
		// The reference keeps the first element of largest magnitude.
		float mv = 0;
		for (int i = 0; i < 256; i++) {
			if (__builtin_fabsf(xb[i]) == amax) {
				mv = xb[i];
				break;
			}
		}
		float iscale = -127.0f / mv;
		d[b] = 1.0f / iscale;
		__m256 is = _mm256_set1_ps(iscale);
		for (int g = 0; g < 16; g++) {
			const float *xg = xb + 16 * g;
			__m256i i0 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg), is)), max127);
			__m256i i1 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + 8), is)), max127);
			bs[16 * b + g] = (int16_t)hsum8i(_mm256_add_epi32(i0, i1));
			__m256i p = pack32(i0, i1, i0, i1);
			_mm_storeu_si128((__m128i *)(q + 256 * b + 16 * g), _mm256_castsi256_si128(p));
		}
	}
}

// round_f16 and round_bf16 round to F16 (BF16) and back, to nearest even,
// bit for bit as dtype.RoundActivations: vcvtps2ph with an immediate
// rounding mode, and for BF16 the reference's own integer rounding (NaN stays
// a quiet NaN). round_f16 stores the rounded floats where dst is not NULL
// and their F16 bits where bits is not NULL (an f16 KV cache's rows: bits
// alone).
static A2 void round_f16(const float *x, float *dst, uint16_t *bits, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
		if (dst != NULL) {
			_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
		}
		if (bits != NULL) {
			_mm_storeu_si128((__m128i *)(bits + i), h);
		}
	}
	for (; i < n; i++) {
		uint16_t h = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
		if (dst != NULL) {
			dst[i] = _cvtsh_ss(h);
		}
		if (bits != NULL) {
			bits[i] = h;
		}
	}
}

static A2 void round_bf16(const float *x, float *dst, uint16_t *bits, size_t n) {
	const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
	const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), hi = _mm256_set1_epi32((int)0xFFFF0000u);
	const __m256i quiet = _mm256_set1_epi32(0x400000);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
		__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
		r = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
		r = _mm256_and_si256(r, hi);
		_mm256_storeu_si256((__m256i *)(dst + i), r);
		if (bits != NULL) {
			__m256i h = _mm256_srli_epi32(r, 16);
			_mm_storeu_si128((__m128i *)(bits + i),
			                 _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
		}
	}
	for (; i < n; i++) {
		uint32_t u;
		memcpy(&u, x + i, 4);
		if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
			u |= 0x400000u;
		} else {
			u += 0x7FFFu + ((u >> 16) & 1u);
		}
		u &= 0xFFFF0000u;
		memcpy(dst + i, &u, 4);
		if (bits != NULL) {
			bits[i] = (uint16_t)(u >> 16);
		}
	}
}

void glint_to_f16(const float *x, uint16_t *h, size_t n) {
	round_f16(x, NULL, h, n);
}

void glint_round_act(int type, const float *x, float *dst, uint16_t *bits, size_t n) {
	if (type == T_F16) {
		round_f16(x, dst, bits, n);
	} else {
		round_bf16(x, dst, bits, n);
	}
}

A2 void glint_quantize_q8_0(const float *x, int k, int off, int8_t *q, float *d, int32_t *c) {
	quantize_q8_32(x, k, off, q, d, c, NULL);
}

A2 void glint_quantize_q8_1(const float *x, int k, int8_t *q, float *d, float *s) {
	quantize_q8_32(x, k, 0, q, d, NULL, s);
}

void glint_quantize_q8_k(const float *x, int k, int8_t *q, float *d, int16_t *bs) {
	quantize_q8_k_avx2(x, k, q, d, bs);
}
