// SIMD kernels for the elementwise and attention ops of the CPU backend
// (see ops_cgo.go). As in simd.c, every function is compiled for its
// instruction set with a target attribute and chosen at run time by level,
// so the package builds with plain CFLAGS.
//
// exp is evaluated as Cephes' expf does: n = round(x·log2 e), r = x − n·ln 2
// in two parts (exact to a few ulp of r), e^r by a degree-7 polynomial and
// a scaling by 2^n, which is within 2 ulp of e^x. Both callers need it only
// for x ≤ 0 (silu takes e^−|x|, softmax e^(s − max)), so nothing overflows;
// results down to the subnormal range are kept, and NaN propagates.
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"
#include "simd_common.h"

// Below -104, e^x < 2^-150 rounds to zero: clamping there keeps 2^n
// representable while every result that is not zero is still computed.
#define EXP_LO -104.0f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f // 9 bits, so n·LN2_HI is exact
#define LN2_LO -2.12194440e-4f
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

// ---------------------------------------------------------------- AVX-512

// exp16 is e^x for x <= 0.
INLINE A5 __m512 exp16(__m512 x) {
	// max returns its second operand when either is NaN: NaN passes.
	x = _mm512_max_ps(_mm512_set1_ps(EXP_LO), x);
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
	                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
	__m512 p = _mm512_fmadd_ps(_mm512_set1_ps(P0), r, _mm512_set1_ps(P1));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
	// The small terms are summed before 1 is added: one rounding at 1.
	__m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1));
	// scalef rounds once, into the subnormal range too.
	return _mm512_scalef_ps(y, n);
}

// silu16 is x·sigmoid(x), from t = e^−|x| so that no exp overflows: x/(1+t)
// for x >= 0, x·t/(1+t) below (where x/(1+e^−x) would give x/inf = 0 for
// x < −88.7, though the true value is still a normal float).
INLINE A5 __m512 silu16(__m512 x) {
	__m512 t = exp16(_mm512_or_ps(x, _mm512_set1_ps(-0.0f)));
	__mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
	__m512 num = _mm512_mask_blend_ps(pos, _mm512_mul_ps(x, t), x);
	return _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1), t));
}

static A5 void silu_mul5(const float *g, const float *u, float *d, size_t n) {
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512 s0 = silu16(_mm512_loadu_ps(g + i)), s1 = silu16(_mm512_loadu_ps(g + i + 16));
		_mm512_storeu_ps(d + i, _mm512_mul_ps(s0, _mm512_loadu_ps(u + i)));
		_mm512_storeu_ps(d + i + 16, _mm512_mul_ps(s1, _mm512_loadu_ps(u + i + 16)));
	}
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 s = silu16(_mm512_maskz_loadu_ps(m, g + i));
		_mm512_mask_storeu_ps(d + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
	}
}

// softmax5 replaces s[0…L-1] by e^(s·scale − max), returning 1/Σ. The sum is
// kept in double, as the Go path does.
static A5 float softmax5(float *s, int L, float scale) {
	__m512 sc = _mm512_set1_ps(scale), mx = _mm512_set1_ps(-INFINITY);
	for (int j = 0; j < L; j += 16) {
		__mmask16 m = L - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (L - j)) - 1);
		__m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), sc);
		_mm512_mask_storeu_ps(s + j, m, x);
		mx = _mm512_mask_max_ps(mx, m, mx, x);
	}
	__m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
	__m512d sum0 = _mm512_setzero_pd(), sum1 = sum0;
	for (int j = 0; j < L; j += 16) {
		__mmask16 m = L - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (L - j)) - 1);
		__m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), mv)));
		_mm512_mask_storeu_ps(s + j, m, e);
		sum0 = _mm512_add_pd(sum0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		sum1 = _mm512_add_pd(sum1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
	}
	return (float)(1 / _mm512_reduce_add_pd(_mm512_add_pd(sum0, sum1)));
}

// attn5 is attention for GB query heads (q, out: GB consecutive heads of hd)
// that share one kv head (k, v: its first row; rows kvCols apart) over L
// positions. Each cache row loaded serves all GB heads. hd is held in NC
// registers, the last one masked; GB and NC are constants in every
// instantiation so that q and the accumulators stay in registers.
INLINE A5 void attn5(const float *q, const float *k, const float *v, float *out, float *s, int L, int kvCols,
                     int hd, float scale, const int GB, const int NC) {
	const __mmask16 tail = (hd & 15) ? (__mmask16)((1u << (hd & 15)) - 1) : (__mmask16)0xffff;
	__m512 qv[4][8], r[8];
	for (int g = 0; g < GB; g++) {
		for (int c = 0; c < NC; c++) {
			qv[g][c] = _mm512_maskz_loadu_ps(c == NC - 1 ? tail : 0xffff, q + g * hd + 16 * c);
		}
	}
	for (int j = 0; j < L; j++) {
		const float *kj = k + (size_t)j * kvCols;
		for (int c = 0; c < NC; c++) {
			r[c] = _mm512_maskz_loadu_ps(c == NC - 1 ? tail : 0xffff, kj + 16 * c);
		}
		for (int g = 0; g < GB; g++) {
			__m512 a = _mm512_mul_ps(qv[g][0], r[0]);
			for (int c = 1; c < NC; c++) {
				a = _mm512_fmadd_ps(qv[g][c], r[c], a);
			}
			s[g * L + j] = _mm512_reduce_add_ps(a);
		}
	}
	float inv[4];
	for (int g = 0; g < GB; g++) {
		inv[g] = softmax5(s + g * L, L, scale);
	}
	__m512 acc[4][8];
	for (int g = 0; g < GB; g++) {
		for (int c = 0; c < NC; c++) {
			acc[g][c] = _mm512_setzero_ps();
		}
	}
	for (int j = 0; j < L; j++) {
		const float *vj = v + (size_t)j * kvCols;
		for (int c = 0; c < NC; c++) {
			r[c] = _mm512_maskz_loadu_ps(c == NC - 1 ? tail : 0xffff, vj + 16 * c);
		}
		for (int g = 0; g < GB; g++) {
			__m512 p = _mm512_set1_ps(s[g * L + j]);
			for (int c = 0; c < NC; c++) {
				acc[g][c] = _mm512_fmadd_ps(p, r[c], acc[g][c]);
			}
		}
	}
	for (int g = 0; g < GB; g++) {
		__m512 iv = _mm512_set1_ps(inv[g]);
		for (int c = 0; c < NC; c++) {
			_mm512_mask_storeu_ps(out + g * hd + 16 * c, c == NC - 1 ? tail : 0xffff, _mm512_mul_ps(acc[g][c], iv));
		}
	}
}

// ---------------------------------------------------------------- AVX2

// lanes8 is the maskload/maskstore mask of the first n (< 8) lanes, or of
// all 8 when n is 0.
INLINE A2 __m256i lanes8(int n) {
	if (n == 0) {
		return _mm256_set1_epi32(-1);
	}
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// exp8 is exp16 for AVX2, which has no scalef: 2^n is applied as two
// factors 2^(n/2) so that each is a normal float even where the result is
// subnormal, and the product rounds once there.
INLINE A2 __m256 exp8(__m256 x) {
	x = _mm256_max_ps(_mm256_set1_ps(EXP_LO), x);
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
	__m256 p = _mm256_fmadd_ps(_mm256_set1_ps(P0), r, _mm256_set1_ps(P1));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P2));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P3));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P4));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P5));
	__m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1));
	__m256i ni = _mm256_cvtps_epi32(n);
	__m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
	__m256i bias = _mm256_set1_epi32(127);
	__m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
	__m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
	return _mm256_mul_ps(_mm256_mul_ps(y, f1), f2);
}

INLINE A2 __m256 silu8(__m256 x) {
	__m256 t = exp8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
	__m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
	__m256 num = _mm256_blendv_ps(_mm256_mul_ps(x, t), x, pos);
	return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1), t));
}

static A2 void silu_mul2(const float *g, const float *u, float *d, size_t n) {
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256 s0 = silu8(_mm256_loadu_ps(g + i)), s1 = silu8(_mm256_loadu_ps(g + i + 8));
		_mm256_storeu_ps(d + i, _mm256_mul_ps(s0, _mm256_loadu_ps(u + i)));
		_mm256_storeu_ps(d + i + 8, _mm256_mul_ps(s1, _mm256_loadu_ps(u + i + 8)));
	}
	for (; i < n; i += 8) {
		__m256i m = lanes8(n - i >= 8 ? 0 : (int)(n - i));
		__m256 s = silu8(_mm256_maskload_ps(g + i, m));
		_mm256_maskstore_ps(d + i, m, _mm256_mul_ps(s, _mm256_maskload_ps(u + i, m)));
	}
}

static A2 float softmax2(float *s, int L, float scale) {
	__m256 sc = _mm256_set1_ps(scale), mx = _mm256_set1_ps(-INFINITY);
	int j = 0;
	for (; j + 8 <= L; j += 8) {
		__m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), sc);
		_mm256_storeu_ps(s + j, x);
		mx = _mm256_max_ps(mx, x);
	}
	float m = hmax8(mx);
	for (; j < L; j++) {
		s[j] *= scale;
		m = s[j] > m ? s[j] : m;
	}
	__m256 mv = _mm256_set1_ps(m);
	__m256d sum0 = _mm256_setzero_pd(), sum1 = sum0;
	for (j = 0; j < L; j += 8) {
		__m256i lm = lanes8(L - j >= 8 ? 0 : L - j);
		// Lanes past L load 0 and would give e^−max: zero them.
		__m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(s + j, lm), mv)), _mm256_castsi256_ps(lm));
		_mm256_maskstore_ps(s + j, lm, e);
		sum0 = _mm256_add_pd(sum0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		sum1 = _mm256_add_pd(sum1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	__m256d t = _mm256_add_pd(sum0, sum1);
	__m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
	return (float)(1 / (_mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h))));
}

// attn2 is attn5 in 8-lane registers.
INLINE A2 void attn2(const float *q, const float *k, const float *v, float *out, float *s, int L, int kvCols,
                     int hd, float scale, const int GB, const int NC) {
	const __m256i all = _mm256_set1_epi32(-1), tail = lanes8(hd & 7);
	__m256 qv[4][16], r[16];
	for (int g = 0; g < GB; g++) {
		for (int c = 0; c < NC; c++) {
			qv[g][c] = _mm256_maskload_ps(q + g * hd + 8 * c, c == NC - 1 ? tail : all);
		}
	}
	for (int j = 0; j < L; j++) {
		const float *kj = k + (size_t)j * kvCols;
		for (int c = 0; c < NC; c++) {
			r[c] = _mm256_maskload_ps(kj + 8 * c, c == NC - 1 ? tail : all);
		}
		for (int g = 0; g < GB; g++) {
			__m256 a = _mm256_mul_ps(qv[g][0], r[0]);
			for (int c = 1; c < NC; c++) {
				a = _mm256_fmadd_ps(qv[g][c], r[c], a);
			}
			s[g * L + j] = hsum8(a);
		}
	}
	float inv[4];
	for (int g = 0; g < GB; g++) {
		inv[g] = softmax2(s + g * L, L, scale);
	}
	__m256 acc[4][16];
	for (int g = 0; g < GB; g++) {
		for (int c = 0; c < NC; c++) {
			acc[g][c] = _mm256_setzero_ps();
		}
	}
	for (int j = 0; j < L; j++) {
		const float *vj = v + (size_t)j * kvCols;
		for (int c = 0; c < NC; c++) {
			r[c] = _mm256_maskload_ps(vj + 8 * c, c == NC - 1 ? tail : all);
		}
		for (int g = 0; g < GB; g++) {
			__m256 p = _mm256_set1_ps(s[g * L + j]);
			for (int c = 0; c < NC; c++) {
				acc[g][c] = _mm256_fmadd_ps(p, r[c], acc[g][c]);
			}
		}
	}
	for (int g = 0; g < GB; g++) {
		__m256 iv = _mm256_set1_ps(inv[g]);
		for (int c = 0; c < NC; c++) {
			_mm256_maskstore_ps(out + g * hd + 8 * c, c == NC - 1 ? tail : all, _mm256_mul_ps(acc[g][c], iv));
		}
	}
}

// ---------------------------------------------------------------- dispatch

typedef void attn_fn(const float *q, const float *k, const float *v, float *out, float *s, int L, int kvCols, int hd,
                     float scale);

#define ATTN(ISA, G, N)                                                                                            \
	static ISA##_ATTR void attn##ISA##_##G##_##N(const float *q, const float *k, const float *v, float *out,   \
	                                               float *s, int L, int kvCols, int hd, float scale) {          \
		attn##ISA(q, k, v, out, s, L, kvCols, hd, scale, G, N);                                              \
	}
#define a5_ATTR A5
#define a2_ATTR A2
#define attna5 attn5
#define attna2 attn2

// AVX-512: up to 4 heads × 4 registers, or 2 × 8 (16 accumulators of 32).
ATTN(a5, 1, 1) ATTN(a5, 1, 2) ATTN(a5, 1, 3) ATTN(a5, 1, 4) ATTN(a5, 1, 5) ATTN(a5, 1, 6) ATTN(a5, 1, 7) ATTN(a5, 1, 8)
ATTN(a5, 2, 1) ATTN(a5, 2, 2) ATTN(a5, 2, 3) ATTN(a5, 2, 4) ATTN(a5, 2, 5) ATTN(a5, 2, 6) ATTN(a5, 2, 7) ATTN(a5, 2, 8)
ATTN(a5, 4, 1) ATTN(a5, 4, 2) ATTN(a5, 4, 3) ATTN(a5, 4, 4)

static attn_fn *const attn5_tab[3][8] = {
	{attna5_1_1, attna5_1_2, attna5_1_3, attna5_1_4, attna5_1_5, attna5_1_6, attna5_1_7, attna5_1_8},
	{attna5_2_1, attna5_2_2, attna5_2_3, attna5_2_4, attna5_2_5, attna5_2_6, attna5_2_7, attna5_2_8},
	{attna5_4_1, attna5_4_2, attna5_4_3, attna5_4_4},
};

// AVX2 has 16 registers: several heads only while their accumulators fit in
// half of them; one head of up to 16 registers spills q to the stack (L1).
ATTN(a2, 1, 1) ATTN(a2, 1, 2) ATTN(a2, 1, 3) ATTN(a2, 1, 4) ATTN(a2, 1, 5) ATTN(a2, 1, 6) ATTN(a2, 1, 7) ATTN(a2, 1, 8)
ATTN(a2, 1, 9) ATTN(a2, 1, 10) ATTN(a2, 1, 11) ATTN(a2, 1, 12) ATTN(a2, 1, 13) ATTN(a2, 1, 14) ATTN(a2, 1, 15)
ATTN(a2, 1, 16)
ATTN(a2, 2, 1) ATTN(a2, 2, 2) ATTN(a2, 2, 3) ATTN(a2, 2, 4)
ATTN(a2, 4, 1) ATTN(a2, 4, 2)

static attn_fn *const attn2_tab[3][16] = {
	{attna2_1_1, attna2_1_2, attna2_1_3, attna2_1_4, attna2_1_5, attna2_1_6, attna2_1_7, attna2_1_8, attna2_1_9,
	 attna2_1_10, attna2_1_11, attna2_1_12, attna2_1_13, attna2_1_14, attna2_1_15, attna2_1_16},
	{attna2_2_1, attna2_2_2, attna2_2_3, attna2_2_4},
	{attna2_4_1, attna2_4_2},
};

void glint_silu_mul(int level, const float *g, const float *u, float *d, size_t n) {
	if (level >= 2) {
		silu_mul5(g, u, d, n);
	} else {
		silu_mul2(g, u, d, n);
	}
}

void glint_attention(int level, const float *q, const float *k, const float *v, float *out, float *scores,
                     int heads, int kvHeads, int headDim, int stride, int pos0, int kvLen, float scale, int lo,
                     int hi) {
	if (headDim <= 0 || headDim > GLINT_ATTENTION_MAX_HEAD_DIM || kvHeads <= 0 || heads % kvHeads != 0) {
		return; // the Go caller checks; this only guards the tables
	}
	int group = heads / kvHeads, kvCols = kvHeads * headDim;
	int nc = level >= 2 ? (headDim + 15) / 16 : (headDim + 7) / 8;
	for (int it = lo; it < hi;) {
		int row = it / heads, h = it % heads, kvh = h / group;
		int L = kvLen > 0 ? kvLen : pos0 + row + 1;
		// Heads h… that share kv head kvh and are in this range.
		int left = (kvh + 1) * group - h;
		if (left > hi - it) {
			left = hi - it;
		}
		attn_fn *f = NULL;
		int gb = 4;
		for (int gi = 2; gi >= 0; gi--, gb /= 2) {
			f = gb > left ? NULL : level >= 2 ? attn5_tab[gi][nc - 1] : attn2_tab[gi][nc - 1];
			if (f != NULL) {
				break;
			}
		}
		size_t qo = (size_t)row * stride + (size_t)h * headDim;
		f(q + qo, k + (size_t)kvh * headDim, v + (size_t)kvh * headDim, out + qo, scores, L, kvCols, headDim, scale);
		it += gb;
	}
}
