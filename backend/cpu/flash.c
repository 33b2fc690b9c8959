// The online softmax of flash attention (flash.go), in C so that one call
// runs a row's whole sequence of the C library's expf and tanhf (a cgo call
// per cell would cost more than the cell).
#include <math.h>

#include "flash.h"

// glint_flash_weights runs ggml_compute_forward_flash_attn_ext_f16's
// softmax over n raw dot products d: s = d·scale (then cap·tanhf(s) when
// cap is not 0); on a new maximum ms = expf(Mold − M) and vs = 1, else
// ms = 1 and vs = expf(s − M); S = S·ms + vs. It stores each cell's ms and
// vs and returns S. This file is built without FMA, so S·ms + vs rounds
// twice, as in llama.cpp's build.
float glint_flash_weights(int n, const float *d, float scale, float cap, float *ms, float *vs) {
	float S = 0.0f, M = -INFINITY;
	for (int i = 0; i < n; i++) {
		float s = d[i] * scale;
		if (cap != 0.0f) {
			s = cap * tanhf(s);
		}
		float m1 = 1.0f, v1 = 1.0f;
		if (s > M) {
			const float Mold = M;
			M = s;
			m1 = expf(Mold - M);
		} else {
			v1 = expf(s - M);
		}
		ms[i] = m1;
		vs[i] = v1;
		S = S * m1 + v1;
	}
	return S;
}

// ---------------------------------------------------------------- SIMD parts
//
// The dot products and the accumulator updates of flash.go's flashGroup,
// each the Go code's arithmetic to the bit: the lanes of a dot product are
// those of ggml_vec_dot_f16 in the flavour's build (dotVec8, dotVec512),
// every accumulator element is its own widen·(fma or mul)·round, and the
// quantised keys take the matmul kernels of the level (glint_flash_qdots,
// simd.c). 256-bit vectors serve every level: a 16-lane sum of the AVX-512
// build is two 8-lane halves, the same operations per lane.

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "simd_kernels.h"

// widen_f16 stores n halves as floats.
static A2 void widen_f16(const uint16_t *h, float *x, int n) {
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
	}
	for (; i < n; i++) {
		x[i] = _cvtsh_ss(h[i]);
	}
}

// dot_vec8 is dotVec8 (attention.go) with half set: four 8-lane fma
// accumulators over 32-element steps, GGML_F32x8_REDUCE, the remainder's
// exact products added in double.
static A2 float dot_vec8(const float *x, const float *y, int n) {
	int np = n & ~31;
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	for (int i = 0; i < np; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
	}
	s0 = _mm256_add_ps(s0, s2);
	s1 = _mm256_add_ps(s1, s3);
	s0 = _mm256_add_ps(s0, s1);
	double sum = reduce8(s0);
	for (int i = np; i < n; i++) {
		sum += (double)rounded(x[i] * y[i]);
	}
	return (float)sum;
}

// dot_vec512 is dotVec512 (flavor.go) with half set: four 16-lane fma
// accumulators (lo and hi halves) over 64-element steps, folded 0+2, 1+3,
// 0+1, reduced as _mm512_reduce_add_ps (reduce16), the remainder in double.
static A2 float dot_vec512(const float *x, const float *y, int n) {
	int np = n & ~63;
	__m256 a[8];
	UNROLL for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
	for (int i = 0; i < np; i += 64) {
		UNROLL for (int j = 0; j < 8; j++) {
			a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j), _mm256_loadu_ps(y + i + 8 * j), a[j]);
		}
	}
	// accumulator j is a[2j] (lanes 0–7) and a[2j+1] (lanes 8–15).
	UNROLL for (int l = 0; l < 2; l++) {
		a[l] = _mm256_add_ps(a[l], a[4 + l]);
		a[2 + l] = _mm256_add_ps(a[2 + l], a[6 + l]);
		a[l] = _mm256_add_ps(a[l], a[2 + l]);
	}
	double sum = hsum8(_mm256_add_ps(a[0], a[1]));
	for (int i = np; i < n; i++) {
		sum += (double)rounded(x[i] * y[i]);
	}
	return (float)sum;
}

// glint_flash_f16_dots stores d[g·nv + i], the dot product of query head g
// (q + g·hd, f16 values) with the F16 key row of cells[i] (at k +
// cells[i]·cellBytes), for g < group and i < nv; kf is scratch for hd
// floats.
A2 void glint_flash_f16_dots(int wide, int hd, int group, const float *q, const uint8_t *k, size_t cellBytes,
                             const int32_t *cells, int nv, float *kf, float *d) {
	for (int i = 0; i < nv; i++) {
		const uint8_t *kr = k + (size_t)cells[i] * cellBytes;
		if (i + 2 < nv) {
			_mm_prefetch((const char *)(k + (size_t)cells[i + 2] * cellBytes), _MM_HINT_T0);
		}
		widen_f16((const uint16_t *)kr, kf, hd);
		for (int g = 0; g < group; g++) {
			d[g * nv + i] = wide ? dot_vec512(kf, q + g * hd, hd) : dot_vec8(kf, q + g * hd, hd);
		}
	}
}

// mad_f16 is ggml_vec_mad_f16 (madF16): y = f16(fma(f32(x), v, f32(y))).
static A2 void mad_f16(uint16_t *y, const uint16_t *x, float v, int n) {
	__m256 vv = _mm256_set1_ps(v);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i)));
		__m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
		_mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_fmadd_ps(b, vv, a), _MM_FROUND_TO_NEAREST_INT));
	}
	for (; i < n; i++) {
		y[i] = _cvtss_sh(fma1(_cvtsh_ss(x[i]), v, _cvtsh_ss(y[i])), _MM_FROUND_TO_NEAREST_INT);
	}
}

// scale_f16 is ggml_vec_scale_f16 (scaleF16): y = f16(f32(y)·v).
static A2 void scale_f16(uint16_t *y, float v, int n) {
	__m256 vv = _mm256_set1_ps(v);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i)));
		_mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_mul_ps(a, vv), _MM_FROUND_TO_NEAREST_INT));
	}
	for (; i < n; i++) {
		y[i] = _cvtss_sh(_cvtsh_ss(y[i]) * v, _MM_FROUND_TO_NEAREST_INT);
	}
}

// mad_f32 is ggml_vec_mad_f32 (madF32): y = fma(x, v, y).
static A2 void mad_f32(float *y, const float *x, float v, int n) {
	__m256 vv = _mm256_set1_ps(v);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vv, _mm256_loadu_ps(y + i)));
	}
	for (; i < n; i++) {
		y[i] = fma1(x[i], v, y[i]);
	}
}

// scale_f32 is ggml_vec_scale_f32 (scaleF32): y = y·v.
static A2 void scale_f32(float *y, float v, int n) {
	__m256 vv = _mm256_set1_ps(v);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vv));
	}
	for (; i < n; i++) {
		y[i] = y[i] * v;
	}
}

static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// dequant_row is dtype.DequantizeRow for the V types glint_flash_values
// takes in f32 (ggml's dequantize_row_*: each product and sum rounded on
// its own: the function is not inlined into one that has FMA, which
// would contract them); it reports 0
// for a type it does not know.
static __attribute__((noinline)) int dequant_row(int type, const uint8_t *r, float *y, int n) {
	switch (type) {
	case T_Q8_0:
	case T_Q4_0:
	case T_Q4_1:
	case T_Q5_0:
	case T_Q5_1:
	case T_IQ4_NL:
		break;
	default:
		if (type != T_F32 && type != T_BF16) {
			return 0;
		}
	}
	switch (type) {
	case T_F32:
		memcpy(y, r, (size_t)n * 4);
		return 1;
	case T_BF16:
		for (int i = 0; i < n; i++) {
			uint32_t u = (uint32_t)le16(r + 2 * i) << 16;
			memcpy(y + i, &u, 4);
		}
		return 1;
	}
	for (int b = 0; b < n / 32; b++, y += 32) {
		switch (type) {
		case T_Q8_0: {
			const uint8_t *blk = r + 34 * b;
			float d = glint_f16tab[le16(blk)];
			for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)blk[2 + j] * d;
			break;
		}
		case T_Q4_0: {
			const uint8_t *blk = r + 18 * b;
			float d = glint_f16tab[le16(blk)];
			for (int j = 0; j < 16; j++) {
				y[j] = (float)((blk[2 + j] & 0xF) - 8) * d;
				y[j + 16] = (float)((blk[2 + j] >> 4) - 8) * d;
			}
			break;
		}
		case T_Q4_1: {
			const uint8_t *blk = r + 20 * b;
			float d = glint_f16tab[le16(blk)], m = glint_f16tab[le16(blk + 2)];
			for (int j = 0; j < 16; j++) {
				y[j] = (float)(blk[4 + j] & 0xF) * d + m;
				y[j + 16] = (float)(blk[4 + j] >> 4) * d + m;
			}
			break;
		}
		case T_Q5_0:
		case T_Q5_1: {
			int one = type == T_Q5_1;
			const uint8_t *blk = r + (one ? 24 : 22) * b;
			float d = glint_f16tab[le16(blk)], m = one ? glint_f16tab[le16(blk + 2)] : 0.0f;
			uint32_t qh;
			memcpy(&qh, blk + (one ? 4 : 2), 4);
			const uint8_t *qs = blk + (one ? 8 : 6);
			for (int j = 0; j < 16; j++) {
				int h0 = (int)((qh >> j) << 4) & 0x10, h1 = (int)(qh >> (j + 12)) & 0x10;
				int x0 = (qs[j] & 0xF) | h0, x1 = (qs[j] >> 4) | h1;
				if (one) {
					y[j] = (float)x0 * d + m;
					y[j + 16] = (float)x1 * d + m;
				} else {
					y[j] = (float)(x0 - 16) * d;
					y[j + 16] = (float)(x1 - 16) * d;
				}
			}
			break;
		}
		case T_IQ4_NL: {
			const uint8_t *blk = r + 18 * b;
			float d = glint_f16tab[le16(blk)];
			for (int j = 0; j < 16; j++) {
				y[j] = d * (float)kvalues_iq4nl[blk[2 + j] & 0xF];
				y[j + 16] = d * (float)kvalues_iq4nl[blk[2 + j] >> 4];
			}
			break;
		}
		default:
			return 0;
		}
	}
	return 1;
}

// glint_flash_values runs flashGroup's value loop: for each cell i < nv (V
// row at v + cells[i]·cellBytes, of type vtype) and query head g < group,
// the accumulator of g scaled by ms[g·nv + i] unless that is 1, then the
// row added times vs[g·nv + i]: in f16 (acc16, group·hd halves) over an
// F16 V, else in f32 (acc) over the row dequantised into vrow (hd floats).
// It reports 0, having done nothing, for a V type it does not take.
A2 int glint_flash_values(int vtype, int hd, int group, const uint8_t *v, size_t cellBytes, const int32_t *cells,
                          int nv, const float *ms, const float *vs, float *acc, uint16_t *acc16, float *vrow) {
	if (vtype != T_F16 && !dequant_row(vtype, v, vrow, 0)) {
		return 0;
	}
	for (int i = 0; i < nv; i++) {
		const uint8_t *vr = v + (size_t)cells[i] * cellBytes;
		if (i + 2 < nv) {
			_mm_prefetch((const char *)(v + (size_t)cells[i + 2] * cellBytes), _MM_HINT_T0);
		}
		if (vtype == T_F16) {
			for (int g = 0; g < group; g++) {
				uint16_t *a = acc16 + g * hd;
				if (ms[g * nv + i] != 1.0f) {
					scale_f16(a, ms[g * nv + i], hd);
				}
				mad_f16(a, (const uint16_t *)vr, vs[g * nv + i], hd);
			}
			continue;
		}
		dequant_row(vtype, vr, vrow, hd);
		for (int g = 0; g < group; g++) {
			float *a = acc + g * hd;
			if (ms[g * nv + i] != 1.0f) {
				scale_f32(a, ms[g * nv + i], hd);
			}
			mad_f32(a, vrow, vs[g * nv + i], hd);
		}
	}
	return 1;
}
