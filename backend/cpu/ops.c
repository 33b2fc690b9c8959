// SIMD kernels for the elementwise and attention ops of the CPU backend
// (see ops_cgo.go). As in simd.c, every function is compiled for its
// instruction set with a target attribute and chosen at run time.
//
// These kernels reproduce the portable Go code bit for bit (expf.go,
// attention.go, siluMulGo): the same float operations in the same order, so
// every SIMD level computes the activations that the next matmul rounds
// exactly as the reference does. AVX2+FMA+F16C is enough for that, and the
// ops are small next to the matmuls, so every level ≥ 1 runs this code.
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ops.h"
#include "simd_common.h"

// lanes8 is the maskload/maskstore mask of the first n (< 8) lanes, or of
// all 8 when n is 0.
INLINE A2 __m256i lanes8(int n) {
	if (n == 0) {
		return _mm256_set1_epi32(-1);
	}
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// expf8 is ggml's AVX2 ggml_v_expf, operation for operation (expf.go is its
// scalar twin).
INLINE A2 __m256 expf8(__m256 x) {
	const __m256 r = _mm256_set1_ps(0x1.8p23f);
	const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
	const __m256 n = _mm256_sub_ps(z, r);
	const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
	                                  _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
	const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
	const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
	const __m256i c =
	    _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(126), _CMP_GT_OQ));
	const __m256 u = _mm256_mul_ps(b, b);
	const __m256 j = _mm256_fmadd_ps(
	    _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
	                    _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
	    u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
	if (!_mm256_movemask_ps(_mm256_castsi256_ps(c))) {
		return _mm256_fmadd_ps(j, k, k);
	}
	const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
	                                   _mm256_set1_epi32((int)0x82000000u));
	const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
	const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
	const __m256i d =
	    _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(192), _CMP_GT_OQ));
	return _mm256_or_ps(
	    _mm256_and_ps(_mm256_castsi256_ps(d), _mm256_mul_ps(s1, s1)),
	    _mm256_andnot_ps(_mm256_castsi256_ps(d),
	                     _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(c), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
	                                  _mm256_andnot_ps(_mm256_castsi256_ps(c), _mm256_fmadd_ps(k, j, k)))));
}

// silu_mul8 is d = g/(1+e^−g)·u, as ggml's ggml_v_silu followed by its mul.
INLINE A2 __m256 silu_mul8(__m256 g, __m256 u) {
	__m256 e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), g));
	return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1), e)), u);
}

static A2 void silu_mul2(const float *g, const float *u, float *d, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_ps(d + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
	}
	if (i < n) {
		__m256i m = lanes8((int)(n - i));
		_mm256_maskstore_ps(d + i, m, silu_mul8(_mm256_maskload_ps(g + i, m), _mm256_maskload_ps(u + i, m)));
	}
}

void glint_silu_mul(int level, const float *g, const float *u, float *d, size_t n) {
	(void)level;
	silu_mul2(g, u, d, n);
}

// add8 is d = x + y, elementwise: a residual add, which as a Go loop costs
// a nanosecond an element (7 ms of a 128-token Llama 3.2 1B prompt).
static A2 void add8(const float *x, const float *y, float *d, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_ps(d + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
	}
	for (; i < n; i++) {
		d[i] = x[i] + y[i];
	}
}

// ---------------------------------------------------------------- attention

// at1 is one cache value (f16 where half) as a float.
INLINE A2 float at1(const void *c, int half, size_t i) {
	return half ? _cvtsh_ss(((const uint16_t *)c)[i]) : ((const float *)c)[i];
}

// fma1 is one fused multiply-add (fmaf in expf.go's Go).
INLINE A2 float fma1(float a, float b, float c) {
	return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// load8c reads 8 cache values (f16 where half) at element i of a row of n
// as floats; lanes at or past n are 0.
INLINE A2 __m256 load8c(const void *row, int half, int i, int n) {
	if (half) {
		const uint16_t *h = (const uint16_t *)row + i;
		if (n - i >= 8) {
			return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
		}
		uint16_t t[8] = {0};
		for (int j = 0; j < n - i; j++) {
			t[j] = h[j];
		}
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
	}
	const float *f = (const float *)row + i;
	return n - i >= 8 ? _mm256_loadu_ps(f) : _mm256_maskload_ps(f, lanes8(n - i));
}

// round_f16_8 rounds 8 floats to the nearest f16 (ties to even) and back.
INLINE A2 __m256 round_f16_8(__m256 x) {
	return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// dot_tail_f32 adds elements from…n-1 of an F32 cache row k times q to r as
// ggml_vec_dot_f32's remainder (tailF32): the products of whole groups of
// group rounded before they are added (_mm_mul_ss, _mm_add_ss: a plain
// x*y + r could be contracted into a fused multiply-add), the rest fused.
INLINE A2 float dot_tail_f32(float r, const void *k, const float *q, int from, int n, int group) {
	int whole = from + (n - from) / group * group, i = from;
	__m128 acc = _mm_set_ss(r);
	for (; i < whole; i++) {
		acc = _mm_add_ss(acc, _mm_mul_ss(_mm_set_ss(at1(k, 0, i)), _mm_set_ss(q[i])));
	}
	r = _mm_cvtss_f32(acc);
	for (; i < n; i++) {
		r = fma1(at1(k, 0, i), q[i], r);
	}
	return r;
}

// dot_vec8 is ggml_vec_dot_f16 / ggml_vec_dot_f32 on AVX2 (dotVec8): k
// holds n cache values (f16 where half), q n floats.
INLINE A2 float dot_vec8(const void *k, int half, const float *q, int n) {
	int np = n & ~31;
	__m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
	for (int i = 0; i < np; i += 32) {
		for (int j = 0; j < 4; j++) {
			s[j] = _mm256_fmadd_ps(load8c(k, half, i + 8 * j, n), _mm256_loadu_ps(q + i + 8 * j), s[j]);
		}
	}
	float r = reduce8(_mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3])));
	if (half) {
		double sum = r;
		for (int i = np; i < n; i++) {
			sum += (double)(at1(k, 1, i) * q[i]);
		}
		return (float)sum;
	}
	return dot_tail_f32(r, k, q, np, n, 4);
}

#define MAXG 4

// Prefetch distances in cells. A cache row of one kv head is a few lines
// a whole row of all heads apart (1 KiB for Llama 3.2 1B's f16 cache),
// a stride the hardware prefetchers do not follow: without prefetches, a
// decode step over thousands of cells spends most of its attention waiting
// for K and V from L3. About 300 cycles ahead, so that a row is in L1 by
// the time it is read: a K row serves up to MAXG heads' dots, a V column
// block one fused multiply-add per head.
#define ATTN_PF_K 8
#define ATTN_PF_V 32
#define ATTN_PF_512 16

// prefetch_row fetches the n bytes at p into L1 (prefetches never fault,
// so rows past the cache's end are harmless).
INLINE void prefetch_row(const char *p, size_t n) {
	for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < (uintptr_t)p + n; a += 64) {
		_mm_prefetch((const char *)a, _MM_HINT_T0);
	}
}

// far_cells reports whether the cells from runs[0] to the last run's end,
// rows of bytes each, span more than half a 1 MiB L2: only then do the
// kernels prefetch (a prompt's few hundred cells stay in L2 across its
// rows and heads, where the extra loads only cost time).
INLINE int far_cells(const int32_t *runs, int nruns, size_t bytes) {
	return (size_t)(runs[2 * nruns - 1] - runs[0]) * bytes > (512 << 10);
}

// score1 is a dot product as a score, as task.score in attention.go:
// rounded to float, soft-capped when softcap > 0 (× 1/cap, tanhf, × cap,
// llama.cpp's graph), then scaled.
static inline float score1(double dot, float scale, float softcap) {
	float s = (float)dot;
	if (softcap > 0) {
		s = softcap * tanhf(s * (1.0f / softcap));
	}
	return s * scale;
}

// mask_gaps sets s[j] to −∞ for the cells in [base+j0, last b) that runs
// (nruns pairs [a, b) of cell indices) leave out: their exp is then 0, as
// for llama.cpp's masked cells.
static inline void mask_gaps(float *s, const int32_t *runs, int nruns, int base, int j0) {
	int from = j0;
	for (int r = 0; r < nruns; r++) {
		for (int j = from; j < runs[2 * r] - base; j++) {
			s[j] = -INFINITY;
		}
		from = runs[2 * r + 1] - base;
	}
}

// load8w is load8c of 8 whole values (f16 where half) at element i: without
// load8c's partial-block path, whose stack copy kept the unrolled kernels'
// accumulators out of registers.
INLINE A2 __m256 load8w(const char *row, int half, int i) {
	return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)))
	            : _mm256_loadu_ps((const float *)row + i);
}

// scores_tiny is attn_group's scores for a prefill over an f16 K with hd a
// multiple of 8 (tinyBLAS's dot8 for every head and cell), G heads at a
// time and two cells at a time: each key block is converted once for the
// G heads, and the 2·G accumulators are independent chains, where one
// dot8 after another would wait on its own fused multiply-adds.
INLINE A2 void scores_tiny(const float (*qr)[GLINT_ATTENTION_MAX_HEAD_DIM + 8], const char *k, size_t rowBytes,
                           const int32_t *runs, int nruns, int base, float *s, int Ls, int hd, float scale,
                           float softcap, int far, size_t kpf, const int G) {
	for (int r = 0; r < nruns; r++) {
		const int e = runs[2 * r + 1];
		for (int j = runs[2 * r]; j < e; j += 2) {
			const int two = j + 1 < e;
			const char *k0 = k + (size_t)j * rowBytes, *k1 = two ? k0 + rowBytes : k0;
			if (far) {
				prefetch_row(k0 + kpf, (size_t)hd * 2);
				prefetch_row(k1 + kpf, (size_t)hd * 2);
			}
			__m256 a0[MAXG], a1[MAXG];
			for (int g = 0; g < G; g++) {
				a0[g] = a1[g] = _mm256_setzero_ps();
			}
			for (int i = 0; i < hd; i += 8) {
				__m256 x0 = load8w(k0, 1, i), x1 = load8w(k1, 1, i);
				for (int g = 0; g < G; g++) {
					__m256 qv = _mm256_loadu_ps(qr[g] + i);
					a0[g] = _mm256_fmadd_ps(x0, qv, a0[g]);
					a1[g] = _mm256_fmadd_ps(x1, qv, a1[g]);
				}
			}
			for (int g = 0; g < G; g++) {
				s[g * Ls + j - base] = score1(hsum8(a0[g]), scale, softcap);
				if (two) {
					s[g * Ls + j + 1 - base] = score1(hsum8(a1[g]), scale, softcap);
				}
			}
		}
	}
}

// pv_tiny8 is attn_group's outputs for a prefill (tinyBLAS's 8 lanes; hd a
// multiple of 8): for each head and block of 8 columns, the 8 lane sums
// stay in registers, cell i − base going to lane (i − base) % 8 as in the
// general loop, which kept MAXG × 32 lanes in memory, zeroed and reloaded
// for every block.
INLINE A2 void pv_tiny8(const char *v, int vf16, size_t rowBytes, const float *s, int Ls, const int32_t *runs,
                        int nruns, int base, int hd, int far, size_t vpf, float *out, int gb) {
	const size_t es = vf16 ? 2 : 4;
	for (int g = 0; g < gb; g++) {
		const float *p = s + g * Ls;
		for (int d = 0; d < hd; d += 8) {
			__m256 a[8];
			for (int l = 0; l < 8; l++) {
				a[l] = _mm256_setzero_ps();
			}
			// PV8 adds lane l's cell of the block at i0 (row: its V row).
#define PV8(l)                                                                                                         \
	do {                                                                                                               \
		const char *c = row + (size_t)(l) * rowBytes;                                                                  \
		if (far && g == 0) {                                                                                           \
			_mm_prefetch(c + vpf + (size_t)d * es, _MM_HINT_T0);                                                       \
		}                                                                                                              \
		a[l] = _mm256_fmadd_ps(load8w(c, vf16, d), _mm256_set1_ps(p[i0 + (l)]), a[l]);                               \
	} while (0)
			for (int r = 0; r < nruns; r++) {
				const int ia = runs[2 * r] - base, ie = runs[2 * r + 1] - base;
				for (int i0 = ia & ~7; i0 < ie; i0 += 8) {
					const char *row = v + (size_t)(base + i0) * rowBytes;
					if (i0 >= ia && i0 + 8 <= ie) {
						PV8(0); PV8(1); PV8(2); PV8(3); PV8(4); PV8(5); PV8(6); PV8(7);
						continue;
					}
					// A block the run starts or ends in; unrolled too, so
					// that every a[l] stays a register.
#pragma GCC unroll 8
					for (int l = 0; l < 8; l++) {
						if (i0 + l >= ia && i0 + l < ie) {
							PV8(l);
						}
					}
				}
			}
#undef PV8
			__m256 t0 = _mm256_add_ps(a[0], a[4]), t1 = _mm256_add_ps(a[1], a[5]);
			__m256 t2 = _mm256_add_ps(a[2], a[6]), t3 = _mm256_add_ps(a[3], a[7]);
			__m256 o = _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
			_mm256_storeu_ps(out + g * hd + d, o);
		}
	}
}

// Cells of one run go through the group kernels below in chunks of
// ATTN_CHUNK (a multiple of every lane count): a chunk's V rows of one kv
// head (32 KiB at f16 × 64) stay in L1 while every head of the group and
// every column tile reads them, where a head at a time read the whole
// view's V from L2 or L3 once per head and column block.
#define ATTN_CHUNK 256

_Static_assert(GLINT_ATTENTION_ACC_FLOATS >= MAXG * 64 * GLINT_ATTENTION_MAX_HEAD_DIM, "acc scratch");


// pv_tile8 is pv_tile512 in AVX2 for the AVX2 kernel (attn_group): the
// cells i in [c0, c1) ∩ [ia, ie) of lanes t8…t8+7 (lane i % ln, ln 8 or
// 32) of columns d…d+7 (hd a multiple of 8) added into acc (8 lane rows of
// hd floats), the 8 lane sums in registers across the chunk, where the
// general loop kept MAXG × 32 of them in memory and read the view's V once
// per head and column block.
INLINE A2 void pv_tile8(float *acc, const char *v, size_t rowBytes, int vf16, const float *p, int c0, int c1, int ia,
                        int ie, int t8, int ln, int d, int hd, int pf) {
	const size_t es = vf16 ? 2 : 4;
	__m256 x[8];
#pragma GCC unroll 8
	for (int l = 0; l < 8; l++) {
		x[l] = _mm256_loadu_ps(acc + (size_t)l * hd + d);
	}
	for (int i0 = c0 + t8; i0 < c1; i0 += ln) {
		const char *row = v + (size_t)i0 * rowBytes;
		if (pf) {
			for (int l = 0; l < 8; l++) {
				prefetch_row(row + ((size_t)l + ATTN_CHUNK) * rowBytes, (size_t)hd * es);
			}
		}
		if (i0 >= ia && i0 + 8 <= ie) {
#pragma GCC unroll 8
			for (int l = 0; l < 8; l++) {
				x[l] = _mm256_fmadd_ps(load8w(row + (size_t)l * rowBytes, vf16, d), _mm256_set1_ps(p[i0 + l]), x[l]);
			}
			continue;
		}
#pragma GCC unroll 8
		for (int l = 0; l < 8; l++) {
			if (i0 + l >= ia && i0 + l < ie) {
				x[l] = _mm256_fmadd_ps(load8w(row + (size_t)l * rowBytes, vf16, d), _mm256_set1_ps(p[i0 + l]), x[l]);
			}
		}
	}
#pragma GCC unroll 8
	for (int l = 0; l < 8; l++) {
		_mm256_storeu_ps(acc + (size_t)l * hd + d, x[l]);
	}
}

// pv_group8 is attn_group's outputs for one run of cells [ia, ie) (offsets
// from base; v: the row of base) and hd a multiple of 8: tinyBLAS's 8
// lanes (tiny) or vec_dot's 4×8, each head's lane sums kept in acc
// (GLINT_ATTENTION_ACC_FLOATS) across ATTN_CHUNK-cell chunks (pv_tile8),
// then folded and reduced as the general loop does.
static A2 void pv_group8(const char *v, int vf16, size_t rowBytes, const float *s, int Ls, int ia, int ie, int hd,
                         int tiny, int far, float *acc, float *out, int gb) {
	const int ln = tiny ? 8 : 32, nl = ln * hd;
	memset(acc, 0, sizeof(float) * (size_t)nl * (size_t)gb);
	for (int c0 = ia & ~63; c0 < ie; c0 += ATTN_CHUNK) {
		const int c1 = c0 + ATTN_CHUNK < ie ? c0 + ATTN_CHUNK : ie;
		for (int g = 0; g < gb; g++) {
			for (int d = 0; d < hd; d += 8) {
				for (int t = 0; t < ln / 8; t++) {
					pv_tile8(acc + (size_t)g * nl + (size_t)t * 8 * hd, v, rowBytes, vf16, s + g * Ls, c0, c1, ia, ie,
					         8 * t, ln, d, hd, far && g == 0 && d == 0);
				}
			}
		}
	}
	for (int g = 0; g < gb; g++) {
		const float *ag = acc + (size_t)g * nl;
		for (int d = 0; d < hd; d += 8) {
			__m256 x[32], o;
			for (int l = 0; l < ln; l++) {
				x[l] = _mm256_loadu_ps(ag + (size_t)l * hd + d);
			}
			if (!tiny) {
				for (int l = 0; l < 8; l++) {
					x[l] = _mm256_add_ps(x[l], x[16 + l]);
					x[8 + l] = _mm256_add_ps(x[8 + l], x[24 + l]);
					x[l] = _mm256_add_ps(x[l], x[8 + l]);
				}
			}
			__m256 t0 = _mm256_add_ps(x[0], x[4]), t1 = _mm256_add_ps(x[1], x[5]);
			__m256 t2 = _mm256_add_ps(x[2], x[6]), t3 = _mm256_add_ps(x[3], x[7]);
			if (tiny) {
				o = _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
			} else {
				o = _mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3));
			}
			_mm256_storeu_ps(out + (size_t)g * hd + d, o);
		}
	}
}

// attn_group is attention for gb (≤ MAXG) query heads q (gb rows of hd,
// consecutive) that share one kv head, whose rows (k, v) are kvCols
// elements apart, over the cells of runs (see glint_attention); s holds gb
// rows of Ls = roundup8(L) floats, L the last cell seen less base. It
// computes what attentionHeads in attention.go computes, in the same
// order: the scores (dot8 in attention.go: scores_tiny here; or dot_vec8),
// the softmax in 8-cell blocks of the row's view, each block's hsum8 added
// in double, then each output as ggml_mul_mat(v, kq) sums it, vectorised
// across 8 outputs: one accumulator per lane of tinyBLAS's 8 (pv_tiny8) or
// vec_dot's 4×8, a cell's lane its offset from base, folded and reduced
// lane-wise as reduce8Fold and hsum8 fold and reduce one output's.
static A2 void attn_group(const float *q, const void *k, const void *v, int kf16, int vf16, float *out, float *s,
                          float *acc, const int32_t *runs, int nruns, int base, int kvCols, int hd, int prefill, float scale,
                          float softcap, int gb) {
	float qr[MAXG][GLINT_ATTENTION_MAX_HEAD_DIM + 8];
	for (int g = 0; g < gb; g++) {
		for (int d = 0; d < hd; d += 8) {
			__m256i m = lanes8(hd - d >= 8 ? 0 : hd - d);
			__m256 x = _mm256_maskload_ps(q + g * hd + d, m);
			_mm256_storeu_ps(qr[g] + d, kf16 ? round_f16_8(x) : x);
		}
	}
	const int L = runs[2 * nruns - 1] - base, Ls = (L + 7) & ~7, j0 = (runs[0] - base) & ~7;
	for (int g = 0; g < gb; g++) {
		mask_gaps(s + g * Ls, runs, nruns, base, j0);
	}
	const int ke = kf16 ? 2 : 4, ve = vf16 ? 2 : 4;
	const int ktiny = prefill && kf16 && hd % 8 == 0, vtiny = prefill && hd % 4 == 0;
	const size_t kpf = (size_t)ATTN_PF_K * kvCols * ke, vpf = (size_t)ATTN_PF_V * kvCols * ve;
	const int far = far_cells(runs, nruns, (size_t)kvCols * ke);
	const size_t kRow = (size_t)kvCols * ke, vRow = (size_t)kvCols * ve;
	if (ktiny) {
		// A constant G lets the compiler keep the accumulators in registers.
		switch (gb) {
		case 4: scores_tiny(qr, k, kRow, runs, nruns, base, s, Ls, hd, scale, softcap, far, kpf, 4); break;
		case 3: scores_tiny(qr, k, kRow, runs, nruns, base, s, Ls, hd, scale, softcap, far, kpf, 3); break;
		case 2: scores_tiny(qr, k, kRow, runs, nruns, base, s, Ls, hd, scale, softcap, far, kpf, 2); break;
		default: scores_tiny(qr, k, kRow, runs, nruns, base, s, Ls, hd, scale, softcap, far, kpf, 1); break;
		}
	} else {
		for (int r = 0; r < nruns; r++) {
			for (int j = runs[2 * r]; j < runs[2 * r + 1]; j++) {
				const char *kj = (const char *)k + (size_t)j * kRow;
				if (far) {
					prefetch_row(kj + kpf, (size_t)hd * ke);
				}
				for (int g = 0; g < gb; g++) {
					s[g * Ls + j - base] = score1(dot_vec8(kj, kf16, qr[g], hd), scale, softcap);
				}
			}
		}
	}
	for (int g = 0; g < gb; g++) {
		float *sg = s + g * Ls;
		float m = -INFINITY;
		for (int j = j0; j < L; j++) {
			m = sg[j] > m ? sg[j] : m;
		}
		__m256 mv = _mm256_set1_ps(m);
		double sum = 0;
		for (int j = j0; j < L; j += 8) {
			__m256 lm = _mm256_castsi256_ps(lanes8(L - j >= 8 ? 0 : L - j));
			__m256 e = _mm256_and_ps(expf8(_mm256_sub_ps(_mm256_loadu_ps(sg + j), mv)), lm);
			_mm256_storeu_ps(sg + j, e);
			sum += (double)hsum8(e);
		}
		__m256 inv = _mm256_set1_ps((float)(1 / sum));
		for (int j = j0; j < L; j += 8) {
			__m256 p = _mm256_mul_ps(_mm256_loadu_ps(sg + j), inv);
			_mm256_storeu_ps(sg + j, vf16 ? round_f16_8(p) : p);
		}
	}
	if (nruns == 1 && hd % 8 == 0) {
		pv_group8((const char *)v + (size_t)base * vRow, vf16, vRow, s, Ls, runs[0] - base, L, hd, vtiny, far, acc, out, gb);
		return;
	}
	if (vtiny && hd % 8 == 0) {
		pv_tiny8(v, vf16, vRow, s, Ls, runs, nruns, base, hd, far, vpf, out, gb);
		return;
	}
	const int lanes = vtiny ? 8 : 32;
	for (int d = 0; d < hd; d += 8) {
		__m256 a[MAXG][32];
		for (int g = 0; g < gb; g++) {
			for (int l = 0; l < lanes; l++) {
				a[g][l] = _mm256_setzero_ps();
			}
		}
		for (int r = 0; r < nruns; r++) {
			for (int j = runs[2 * r]; j < runs[2 * r + 1]; j++) {
				if (far) {
					_mm_prefetch((const char *)v + (size_t)j * kvCols * ve + vpf + (size_t)d * ve, _MM_HINT_T0);
				}
				__m256 vj = load8c((const char *)v + (size_t)j * kvCols * ve, vf16, d, hd);
				int i = j - base, l = i & (lanes - 1);
				for (int g = 0; g < gb; g++) {
					a[g][l] = _mm256_fmadd_ps(vj, _mm256_set1_ps(s[g * Ls + i]), a[g][l]);
				}
			}
		}
		__m256i m = lanes8(hd - d >= 8 ? 0 : hd - d);
		for (int g = 0; g < gb; g++) {
			__m256 *x = a[g], o;
			if (!vtiny) {
				for (int l = 0; l < 8; l++) {
					x[l] = _mm256_add_ps(x[l], x[16 + l]);
					x[8 + l] = _mm256_add_ps(x[8 + l], x[24 + l]);
					x[l] = _mm256_add_ps(x[l], x[8 + l]);
				}
			}
			__m256 t0 = _mm256_add_ps(x[0], x[4]), t1 = _mm256_add_ps(x[1], x[5]);
			__m256 t2 = _mm256_add_ps(x[2], x[6]), t3 = _mm256_add_ps(x[3], x[7]);
			if (vtiny) {
				o = _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
			} else {
				o = _mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3));
			}
			_mm256_maskstore_ps(out + g * hd + d, m, o);
		}
	}
}

void glint_attention(int level, const float *q, const void *k, const void *v, int kf16, int vf16, float *out,
                     float *scores, float *acc, int heads, int kvHeads, int headDim, const int32_t *runs, int nruns, int base,
                     int prefill, float scale, float softcap, int h0, int h1) {
	(void)level;
	if (headDim <= 0 || headDim > GLINT_ATTENTION_MAX_HEAD_DIM || kvHeads <= 0 || heads % kvHeads != 0 || nruns <= 0) {
		return; // the Go caller checks; this only guards the stack arrays
	}
	int group = heads / kvHeads, kvCols = kvHeads * headDim;
	const int ke = kf16 ? 2 : 4, ve = vf16 ? 2 : 4;
	for (int h = h0; h < h1;) {
		int kvh = h / group;
		// Heads h… that share kv head kvh and are in this range.
		int gb = (kvh + 1) * group - h;
		gb = gb > h1 - h ? h1 - h : gb;
		gb = gb > MAXG ? MAXG : gb;
		size_t qo = (size_t)h * headDim;
		attn_group(q + qo, (const char *)k + (size_t)kvh * headDim * ke, (const char *)v + (size_t)kvh * headDim * ve,
		           kf16, vf16, out + qo, scores, acc, runs, nruns, base, kvCols, headDim, prefill, scale, softcap, gb);
		h += gb;
	}
}

// ---------------------------------------------------------------- ggml's AVX-512 flavour (flavor.go)

// expf16 is ggml's AVX-512 ggml_v_expf (expf512 in flavor.go).
INLINE A5 __m512 expf16(__m512 x) {
	const __m512 r = _mm512_set1_ps(0x1.8p23f);
	const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
	const __m512 n = _mm512_sub_ps(z, r);
	const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
	                                  _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
	const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
	const __m512 u = _mm512_mul_ps(b, b);
	const __m512 j = _mm512_fmadd_ps(
	    _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
	                    _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
	    u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
	const __m512 res = _mm512_scalef_ps(j, n);
	if (_mm512_kortestz(d, d)) {
		return res;
	}
	const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
	                                        _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
	return _mm512_mask_blend_ps(d, res, alt);
}

// glint_silu_mul512 is d = g/(1+e^−g)·u with expf16, elementwise (the
// caller keeps each row's last cols%16 elements, which ggml computes with
// libm's expf, for itself).
A5 void glint_silu_mul512(const float *g, const float *u, float *d, size_t n) {
	size_t i = 0;
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 x = _mm512_maskz_loadu_ps(m, g + i);
		__m512 e = expf16(_mm512_sub_ps(_mm512_setzero_ps(), x));
		__m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1), e));
		_mm512_mask_storeu_ps(d + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
	}
}

// load16c reads 16 cache values (f16 where half) at element i as floats.
INLINE A5 __m512 load16c(const void *c, int half, size_t i) {
	if (half) {
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)c + i)));
	}
	return _mm512_loadu_ps((const float *)c + i);
}

// round_f16_16 rounds 16 floats to the nearest f16 (ties to even) and back,
// as _cvtss_sh and _cvtsh_ss do one.
INLINE A5 __m512 round_f16_16(__m512 x) {
	return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// load16m is load16c of the lanes in m (others 0).
INLINE A5 __m512 load16m(const void *c, int half, size_t i, __mmask16 m) {
	if (half) {
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)c + i));
	}
	return _mm512_maskz_loadu_ps(m, (const float *)c + i);
}

// fold_reduce folds vec_dot's four accumulators (0+2, 1+3, 0+1) and reduces
// them (reduce16Fold).
INLINE A5 float fold_reduce(__m512 s[4]) {
	s[0] = _mm512_add_ps(s[0], s[2]);
	s[1] = _mm512_add_ps(s[1], s[3]);
	return _mm512_reduce_add_ps(_mm512_add_ps(s[0], s[1]));
}

// dot_vec512 is ggml_vec_dot_f16 / ggml_vec_dot_f32 on AVX-512 (dotVec512):
// k holds cache values, q floats (rounded to f16 over an f16 cache).
INLINE A5 float dot_vec512(const void *k, int half, const float *q, int n) {
	int np = n & ~63;
	__m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
	for (int i = 0; i < np; i += 64) {
		for (int j = 0; j < 4; j++) {
			s[j] = _mm512_fmadd_ps(load16c(k, half, i + 16 * j), _mm512_loadu_ps(q + i + 16 * j), s[j]);
		}
	}
	float r = fold_reduce(s);
	if (!half) {
		return dot_tail_f32(r, k, q, np, n, 8);
	}
	double sum = r;
	for (int i = np; i < n; i++) {
		sum += (double)(at1(k, 1, i) * q[i]);
	}
	return (float)sum;
}

// dot_tiny is tinyBLAS's dot on AVX-512 (dotTiny; n % 16 == 0).
INLINE A5 float dot_tiny(const void *k, int half, const float *q, int n) {
	__m512 s = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		s = _mm512_fmadd_ps(load16c(k, half, i), _mm512_loadu_ps(q + i), s);
	}
	return _mm512_reduce_add_ps(s);
}

// The p·V sums below vectorise across columns: a vector holds 16 columns of
// one lane, so each cell's row of V is loaded once for all of them and
// every column gets the same operations as one lane of the
// column-at-a-time form, which loaded V element by element and took most of
// a prompt's attention time. Lane (j − base) % lanes of column d takes cell
// j's fused multiply-add, cell after cell; lanes no cell reached read as
// the +0 they start as in that form.
typedef float pv_acc[GLINT_ATTENTION_MAX_HEAD_DIM] __attribute__((aligned(64)));

// cols16 is the mask of columns d…d+15 below hd.
INLINE A5 __mmask16 cols16(int hd, int d) {
	return hd - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hd - d)) - 1);
}

// pv_lanes adds the cells of runs before base + limit into acc's lanes and
// returns how many lanes it used (the first ones); far: prefetch V rows
// (far_cells).
INLINE A5 int pv_lanes(pv_acc *acc, int lanes, const void *v, int half, const float *p, const int32_t *runs,
                       int nruns, int base, int limit, int kvCols, size_t kvOff, int hd, int far) {
	const size_t es = half ? 2 : 4;
	int last = runs[2 * nruns - 1] - base, nl = last < limit ? last : limit;
	nl = nl < lanes ? nl : lanes;
	for (int l = 0; l < nl; l++) {
		for (int d = 0; d < hd; d += 16) {
			_mm512_store_ps(acc[l] + d, _mm512_setzero_ps());
		}
	}
	for (int r = 0; r < nruns; r++) {
		int end = runs[2 * r + 1] - base < limit ? runs[2 * r + 1] : base + limit;
		for (int j = runs[2 * r]; j < end; j++) {
			int i = j - base;
			float *a = acc[i % lanes];
			__m512 pj = _mm512_set1_ps(p[i]);
			size_t row = (size_t)j * kvCols + kvOff;
			if (far) {
				prefetch_row((const char *)v + (row + (size_t)ATTN_PF_512 * kvCols) * es, (size_t)hd * es);
			}
			for (int d = 0; d < hd; d += 16) {
				__m512 x = load16m(v, half, row + d, cols16(hd, d));
				_mm512_store_ps(a + d, _mm512_fmadd_ps(x, pj, _mm512_load_ps(a + d)));
			}
		}
	}
	return nl;
}

// pv_lane is columns d… of lane l of acc, +0 past the nl lanes used.
INLINE A5 __m512 pv_lane(pv_acc *acc, int nl, int l, int d) {
	return l < nl ? _mm512_load_ps(acc[l] + d) : _mm512_setzero_ps();
}

// reduce16x reduces 16 lanes, lane by lane, as _mm512_reduce_add_ps
// reduces a vector: halves 8 apart, then 4, then 2, then 1.
INLINE A5 __m512 reduce16x(__m512 x[16]) {
	for (int l = 0; l < 8; l++) {
		x[l] = _mm512_add_ps(x[l + 8], x[l]);
	}
	for (int l = 0; l < 4; l++) {
		x[l] = _mm512_add_ps(x[l + 4], x[l]);
	}
	return _mm512_add_ps(_mm512_add_ps(x[0], x[2]), _mm512_add_ps(x[1], x[3]));
}

// pv_run16 is lane sums x[0…15] of columns d… (mask m) for a view whose
// cells are the one run [base + a, base + e): lane l of x is what
// pv_lanes leaves in lane l (lanes 16) or, lanes 64, the fold of lanes l,
// 32 + l, 16 + l and 48 + l that pv_vec512 adds, so every lane gets the
// same fused multiply-adds in the same order. Each lane's sum stays in a
// register, where pv_lanes keeps lanes × hd floats in memory (zeroed, then
// loaded and stored for every cell), which at a short context, as in most
// decode steps, is most of attention's time. The AVX2 kernel (attn_group)
// keeps sums in memory: it shares each load of V among a group's heads,
// and per-lane registers there measured slower.
INLINE A5 void pv_run16(const void *v, int half, const float *p, int a, int e, int lanes, size_t row0, int kvCols,
                        int d, __mmask16 m, __m512 x[16]) {
	for (int l = 0; l < 16; l++) {
		__m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
		if (lanes == 16) {
			for (int i = l; i < e; i += 16) {
				if (i >= a) {
					s[0] = _mm512_fmadd_ps(load16m(v, half, row0 + (size_t)i * kvCols + d, m), _mm512_set1_ps(p[i]),
					                       s[0]);
				}
			}
			x[l] = s[0];
			continue;
		}
		for (int i0 = l; i0 < e; i0 += 64) {
			for (int t = 0; t < 4; t++) {
				int i = i0 + 16 * t;
				if (i >= a && i < e) {
					s[t] = _mm512_fmadd_ps(load16m(v, half, row0 + (size_t)i * kvCols + d, m), _mm512_set1_ps(p[i]),
					                       s[t]);
				}
			}
		}
		x[l] = _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
	}
}

// pv_tiny512 is a prefill row's output o[d] = Σ_j p_j·V_j[d], d < hd, in
// tinyBLAS's 16 lanes, reduced as _mm512_reduce_add_ps.
static A5 void pv_tiny512(const void *v, int half, const float *p, const int32_t *runs, int nruns, int base,
                          int kvCols, size_t kvOff, int hd, int far, float *o) {
	if (nruns == 1 && !far) {
		for (int d = 0; d < hd; d += 16) {
			__m512 x[16];
			pv_run16(v, half, p, runs[0] - base, runs[1] - base, 16, (size_t)base * kvCols + kvOff, kvCols, d,
			         cols16(hd, d), x);
			_mm512_mask_storeu_ps(o + d, cols16(hd, d), reduce16x(x));
		}
		return;
	}
	pv_acc acc[16];
	int nl = pv_lanes(acc, 16, v, half, p, runs, nruns, base, INT_MAX, kvCols, kvOff, hd, far);
	for (int d = 0; d < hd; d += 16) {
		__m512 x[16];
		for (int l = 0; l < 16; l++) {
			x[l] = pv_lane(acc, nl, l, d);
		}
		_mm512_mask_storeu_ps(o + d, cols16(hd, d), reduce16x(x));
	}
}

// pv_vec512 is a decode row's o[d] = Σ_j p_j·V_j[d], d < hd, in
// ggml_vec_dot_f16/f32's order (vColumnDot): the cells before base + np in
// 4×16 lanes (lane (j − base) % 64), folded and reduced as fold_reduce,
// then the cells from there one by one as float products, f32 added to the
// float (tail512: the view's remainder, 0 or 32 cells, is whole 8-element
// chunks), f16 to a double that starts from it.
// pv_tail16 adds to res (16 columns at d, lanes m) cells [j0, j1) past
// the lane sums, as ggml's vec_dot tail adds them: each product p·v
// rounded to float, then summed in float over an F32 V, or over an F16 V in
// double (lo and hi, which the caller narrows once at the end). Cell j is
// V row row0/kvCols + j and probability p[j].
INLINE A5 void pv_tail16(const void *v, int half, const float *p, int j0, int j1, size_t row0, int kvCols, int d,
                         __mmask16 m, __m512 *res, __m512d *lo, __m512d *hi) {
	for (int j = j0; j < j1; j++) {
		__m512 vj = load16m(v, half, row0 + (size_t)j * kvCols + d, m), pj = _mm512_set1_ps(p[j]);
		__m512 pr = _mm512_mul_ps(vj, pj);
		__asm__("" : "+v"(pr)); // rounded: kept from contraction
		if (!half) {
			*res = _mm512_add_ps(*res, pr);
			continue;
		}
		*lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(pr)));
		*hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(pr, 1)));
	}
}

static A5 void pv_vec512(const void *v, int half, const float *p, const int32_t *runs, int nruns, int base, int np,
                         int kvCols, size_t kvOff, int hd, int far, float *o) {
	// One run of cells close by sums its lanes in registers (pv_run16).
	const int fast = nruns == 1 && !far;
	pv_acc acc[64];
	int nl = fast ? 0 : pv_lanes(acc, 64, v, half, p, runs, nruns, base, np, kvCols, kvOff, hd, far);
	for (int d = 0; d < hd; d += 16) {
		__mmask16 m = cols16(hd, d);
		__m512 x[16];
		if (fast) {
			int e = runs[1] - base < np ? runs[1] - base : np;
			pv_run16(v, half, p, runs[0] - base, e, 64, (size_t)base * kvCols + kvOff, kvCols, d, m, x);
		} else {
			for (int l = 0; l < 16; l++) {
				x[l] = _mm512_add_ps(_mm512_add_ps(pv_lane(acc, nl, l, d), pv_lane(acc, nl, 32 + l, d)),
				                     _mm512_add_ps(pv_lane(acc, nl, 16 + l, d), pv_lane(acc, nl, 48 + l, d)));
			}
		}
		__m512 res = reduce16x(x);
		__m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(res)), hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(res, 1));
		for (int r = 0; r < nruns; r++) {
			int j = runs[2 * r] > base + np ? runs[2 * r] : base + np;
			pv_tail16(v, half, p, j - base, runs[2 * r + 1] - base, (size_t)base * kvCols + kvOff, kvCols, d, m, &res, &lo, &hi);
		}
		if (half) {
			res = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
		}
		_mm512_mask_storeu_ps(o + d, m, res);
	}
}

// scores_tiny16 is glint_attention512's scores for a prefill (dot_tiny,
// score1) over the cells of runs, whose K rows (k: the head's first) are
// rowBytes apart, four cells at a time: four independent accumulators,
// where one dot_tiny after another would wait on its own fused
// multiply-adds and reduction. It returns the largest score, taken in cell
// order.
INLINE A5 float scores_tiny16(const float *qr, const char *k, size_t rowBytes, int half, const int32_t *runs, int nruns,
                              int base, float *scores, int hd, float scale, float softcap, int far, size_t kpf) {
	const size_t es = half ? 2 : 4;
	float mx = -INFINITY;
	for (int r = 0; r < nruns; r++) {
		int j = runs[2 * r];
		const int e = runs[2 * r + 1];
		for (; j + 4 <= e; j += 4) {
			const char *k0 = k + (size_t)j * rowBytes;
			if (far) {
				for (int c = 0; c < 4; c++) {
					prefetch_row(k0 + c * rowBytes + kpf, (size_t)hd * es);
				}
			}
			__m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
			for (int i = 0; i < hd; i += 16) {
				__m512 qv = _mm512_loadu_ps(qr + i);
				for (int c = 0; c < 4; c++) {
					s[c] = _mm512_fmadd_ps(load16c(k0 + c * rowBytes, half, i), qv, s[c]);
				}
			}
			for (int c = 0; c < 4; c++) {
				float sj = score1(_mm512_reduce_add_ps(s[c]), scale, softcap);
				scores[j + c - base] = sj;
				mx = sj > mx ? sj : mx;
			}
		}
		for (; j < e; j++) {
			const char *kj = k + (size_t)j * rowBytes;
			if (far) {
				prefetch_row(kj + kpf, (size_t)hd * es);
			}
			float sj = score1(dot_tiny(kj, half, qr, hd), scale, softcap);
			scores[j - base] = sj;
			mx = sj > mx ? sj : mx;
		}
	}
	return mx;
}

// pv_tile512 adds the cells i in [c0, c1) ∩ [ia, ie) of lanes t16…t16+15
// (lane i % ln, ln 16 or 64, c0 a multiple of 64) of columns d… (mask m)
// into acc (16 lane rows of hd floats), p indexed by i, v the row of i = 0:
// the 16 lane sums stay in registers across the chunk, each lane getting
// its cells' fused multiply-adds in cell order, as pv_lanes gives them.
// pf: prefetch the rows ATTN_CHUNK cells ahead (the next chunk).
INLINE A5 void pv_tile512(float *acc, const char *v, size_t rowBytes, int half, const float *p, int c0, int c1, int ia,
                          int ie, int t16, int ln, int d, int hd, __mmask16 m, int pf) {
	const size_t es = half ? 2 : 4;
	__m512 x[16];
#pragma GCC unroll 16
	for (int l = 0; l < 16; l++) {
		x[l] = _mm512_maskz_loadu_ps(m, acc + (size_t)l * hd + d);
	}
	for (int i0 = c0 + t16; i0 < c1; i0 += ln) {
		const char *row = v + (size_t)i0 * rowBytes + (size_t)d * es;
		if (pf) {
			for (int l = 0; l < 16; l++) {
				prefetch_row(row + ((size_t)l + ATTN_CHUNK) * rowBytes, (size_t)hd * es);
			}
		}
		if (i0 >= ia && i0 + 16 <= ie) {
#pragma GCC unroll 16
			for (int l = 0; l < 16; l++) {
				x[l] = _mm512_fmadd_ps(load16m(row + (size_t)l * rowBytes, half, 0, m), _mm512_set1_ps(p[i0 + l]), x[l]);
			}
			continue;
		}
#pragma GCC unroll 16
		for (int l = 0; l < 16; l++) {
			if (i0 + l >= ia && i0 + l < ie) {
				x[l] = _mm512_fmadd_ps(load16m(row + (size_t)l * rowBytes, half, 0, m), _mm512_set1_ps(p[i0 + l]), x[l]);
			}
		}
	}
#pragma GCC unroll 16
	for (int l = 0; l < 16; l++) {
		_mm512_mask_storeu_ps(acc + (size_t)l * hd + d, m, x[l]);
	}
}

// group512 is glint_attention512 for the gb (≤ MAXG) heads q (consecutive
// rows of hd) of one kv head (k, v: its first element of cell 0) over the
// one run of cells [a, e): each K row is read once for the group's scores,
// then p·V goes through ATTN_CHUNK-cell chunks (pv_tile512), every head's
// lane sums kept in acc (GLINT_ATTENTION_ACC_FLOATS) between chunks and folded,
// reduced and finished (the decode tail) as pv_tiny512 and pv_vec512 do.
static A5 void group512(const float *q, const char *k, const char *v, int half, float *out, float *s, float *acc, int a,
                        int e, int base, int nkv, int prefill, float scale, float softcap, int kvCols, int hd, int gb) {
	const size_t es = half ? 2 : 4, rowBytes = (size_t)kvCols * es, kpf = (size_t)ATTN_PF_512 * rowBytes;
	const int tiny = prefill && hd % 16 == 0;
	const int L = e - base, Ls = (L + 15) & ~15, j0 = (a - base) & ~15;
	const int far = (size_t)(e - a) * rowBytes > (512 << 10);
	float qr[MAXG][GLINT_ATTENTION_MAX_HEAD_DIM];
	float mx[MAXG];
	for (int g = 0; g < gb; g++) {
		for (int d = 0; d < hd; d += 16) {
			__m512 x = _mm512_maskz_loadu_ps(cols16(hd, d), q + (size_t)g * hd + d);
			_mm512_mask_storeu_ps(qr[g] + d, cols16(hd, d), half ? round_f16_16(x) : x);
		}
		for (int j = j0; j < a - base; j++) {
			s[g * Ls + j] = -INFINITY;
		}
		mx[g] = -INFINITY;
	}
	for (int j = a; j < e; j++) {
		const char *kj = k + (size_t)j * rowBytes;
		if (far) {
			prefetch_row(kj + kpf, (size_t)hd * es);
		}
		for (int g = 0; g < gb; g++) {
			float sj = score1(tiny ? dot_tiny(kj, half, qr[g], hd) : dot_vec512(kj, half, qr[g], hd), scale, softcap);
			s[g * Ls + j - base] = sj;
			mx[g] = sj > mx[g] ? sj : mx[g];
		}
	}
	for (int g = 0; g < gb; g++) {
		float *sg = s + g * Ls;
		double sum = 0;
		for (int b0 = j0; b0 < L; b0 += 16) {
			__mmask16 m = cols16(L, b0);
			__m512 x = expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, sg + b0), _mm512_set1_ps(mx[g])));
			x = _mm512_maskz_mov_ps(m, x);
			_mm512_mask_storeu_ps(sg + b0, m, x);
			sum += _mm512_reduce_add_ps(x);
		}
		float inv = (float)(1 / sum);
		for (int b0 = j0; b0 < L; b0 += 16) {
			__mmask16 m = cols16(L, b0);
			__m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, sg + b0), _mm512_set1_ps(inv));
			_mm512_mask_storeu_ps(sg + b0, m, half ? round_f16_16(x) : x);
		}
	}
	// p·V: lanes of tinyBLAS's 16 (prefill) or vec_dot's 4×16 over the
	// cells before base + np (decode), the rest vec_dot's tail.
	const int ln = prefill ? 16 : 64, np = prefill ? L : (nkv & ~63);
	const int ia = a - base, ie = L < np ? L : np, nl = ln * hd;
	for (int g = 0; g < gb; g++) {
		memset(acc + (size_t)g * nl, 0, sizeof(float) * (size_t)nl);
	}
	for (int c0 = ia & ~63; c0 < ie; c0 += ATTN_CHUNK) {
		const int c1 = c0 + ATTN_CHUNK < ie ? c0 + ATTN_CHUNK : ie;
		for (int g = 0; g < gb; g++) {
			for (int d = 0; d < hd; d += 16) {
				for (int t = 0; t < ln / 16; t++) {
					pv_tile512(acc + (size_t)g * nl + (size_t)t * 16 * hd, v + (size_t)base * rowBytes, rowBytes, half, s + g * Ls, c0, c1, ia, ie,
					           16 * t, ln, d, hd, cols16(hd, d), far && g == 0 && d == 0);
				}
			}
		}
	}
	for (int g = 0; g < gb; g++) {
		const float *ag = acc + (size_t)g * nl, *p = s + g * Ls;
		float *o = out + (size_t)g * hd;
		for (int d = 0; d < hd; d += 16) {
			__mmask16 m = cols16(hd, d);
			__m512 x[16];
			for (int l = 0; l < 16; l++) {
				if (prefill) {
					x[l] = _mm512_maskz_loadu_ps(m, ag + (size_t)l * hd + d);
					continue;
				}
				__m512 a0 = _mm512_maskz_loadu_ps(m, ag + (size_t)l * hd + d);
				__m512 a1 = _mm512_maskz_loadu_ps(m, ag + (size_t)(16 + l) * hd + d);
				__m512 a2 = _mm512_maskz_loadu_ps(m, ag + (size_t)(32 + l) * hd + d);
				__m512 a3 = _mm512_maskz_loadu_ps(m, ag + (size_t)(48 + l) * hd + d);
				x[l] = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
			}
			__m512 res = reduce16x(x);
			if (!prefill) {
				__m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(res)),
				        hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(res, 1));
				pv_tail16(v, half, p, ia > np ? ia : np, L, (size_t)base * kvCols, kvCols, d, m, &res, &lo, &hi);
				if (half) {
					res = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
				}
			}
			_mm512_mask_storeu_ps(o + d, m, res);
		}
	}
}

// glint_attention512 is attentionHeads512 (flavor.go) for K and V caches
// both f16 (half) or both f32: heads h0…h1-1 of one row (q and out point at
// it) over the cells of runs, the row's view starting at cell base and nkv
// cells long; prefill is set in a batch of more than one row; scores
// scratch for roundup16(last b − base) floats.
A5 void glint_attention512(const float *q, const void *k, const void *v, int half, float *out, float *scores,
                           float *acc, int heads, int kvHeads, int hd, const int32_t *runs, int nruns, int base,
                           int nkv, int prefill, float scale, float softcap, int h0, int h1) {
	if (hd <= 0 || hd > GLINT_ATTENTION_MAX_HEAD_DIM || kvHeads <= 0 || heads % kvHeads != 0 || nruns <= 0) {
		return;
	}
	int group = heads / kvHeads, kvCols = kvHeads * hd;
	if (nruns == 1) {
		const size_t es = half ? 2 : 4;
		for (int h = h0; h < h1;) {
			int kvh = h / group, gb = (kvh + 1) * group - h;
			gb = gb > h1 - h ? h1 - h : gb;
			gb = gb > MAXG ? MAXG : gb;
			size_t kvOff = (size_t)kvh * hd * es;
			group512(q + (size_t)h * hd, (const char *)k + kvOff, (const char *)v + kvOff, half, out + (size_t)h * hd,
			         scores, acc, runs[0], runs[1], base, nkv, prefill, scale, softcap, kvCols, hd, gb);
			h += gb;
		}
		return;
	}
	int tiny = prefill && hd % 16 == 0;
	int L = runs[2 * nruns - 1] - base, j0 = (runs[0] - base) & ~15;
	float qr[GLINT_ATTENTION_MAX_HEAD_DIM];
	const size_t es = half ? 2 : 4, kpf = (size_t)ATTN_PF_512 * kvCols * es;
	const int far = far_cells(runs, nruns, (size_t)kvCols * es);
	for (int h = h0; h < h1; h++) {
		size_t kvOff = (size_t)(h / group) * hd;
		const float *qh = q + (size_t)h * hd;
		for (int d = 0; d < hd; d += 16) {
			__m512 x = _mm512_maskz_loadu_ps(cols16(hd, d), qh + d);
			_mm512_mask_storeu_ps(qr + d, cols16(hd, d), half ? round_f16_16(x) : x);
		}
		mask_gaps(scores, runs, nruns, base, j0);
		float mx = -INFINITY;
		if (tiny) {
			mx = scores_tiny16(qr, (const char *)k + kvOff * es, (size_t)kvCols * es, half, runs, nruns, base, scores, hd,
			                   scale, softcap, far, kpf);
		} else {
			for (int r = 0; r < nruns; r++) {
				for (int j = runs[2 * r]; j < runs[2 * r + 1]; j++) {
					const char *kj = (const char *)k + ((size_t)j * kvCols + kvOff) * es;
					if (far) {
						prefetch_row(kj + kpf, (size_t)hd * es);
					}
					float sj = score1(dot_vec512(kj, half, qr, hd), scale, softcap);
					scores[j - base] = sj;
					mx = sj > mx ? sj : mx;
				}
			}
		}
		double sum = 0;
		for (int b0 = j0; b0 < L; b0 += 16) {
			__mmask16 m = cols16(L, b0);
			__m512 e = expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + b0), _mm512_set1_ps(mx)));
			e = _mm512_maskz_mov_ps(m, e);
			_mm512_mask_storeu_ps(scores + b0, m, e);
			sum += _mm512_reduce_add_ps(e);
		}
		float inv = (float)(1 / sum);
		for (int b0 = j0; b0 < L; b0 += 16) {
			__mmask16 m = cols16(L, b0);
			__m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scores + b0), _mm512_set1_ps(inv));
			_mm512_mask_storeu_ps(scores + b0, m, half ? round_f16_16(p) : p);
		}
		float *o = out + (size_t)h * hd;
		if (prefill) {
			pv_tiny512(v, half, scores, runs, nruns, base, kvCols, kvOff, hd, far, o);
			continue;
		}
		pv_vec512(v, half, scores, runs, nruns, base, nkv & ~63, kvCols, kvOff, hd, far, o);
	}
}

// ---------------------------------------------------------------- RoPE

// rope2 is RoPE's Go loop with the C library's cosf and sinf called
// directly and the hardware's fused multiply-add, which rounds once as
// fmaf (expf.go) does: the Go loop pays a cgo call per cosine and sine and
// a software fmaf per product, which made RoPE a tenth of a prefill.
static A2 void rope2(float *x, int n, int cols, int heads, int headDim, const int32_t *pos, int dims,
                     float thetaScale, const float *freqs, float freqScale, float mscale, int neox, float *cs) {
	int half = dims / 2;
	for (int tok = 0; tok < n; tok++) {
		float theta = (float)pos[tok];
		for (int i = 0; i < half; i++) {
			float t = freqs != NULL ? theta / freqs[i] : theta;
			float a = rounded(freqScale * t);
			cs[2 * i] = rounded(cosf(a) * mscale);
			cs[2 * i + 1] = rounded(sinf(a) * mscale);
			theta *= thetaScale;
		}
		float *row = x + (size_t)tok * cols;
		for (int h = 0; h < heads; h++) {
			float *v = row + (size_t)h * headDim;
			for (int i = 0; i < half; i++) {
				int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
				float c = cs[2 * i], s = cs[2 * i + 1], x0 = v[a], x1 = v[b];
				v[a] = __builtin_fmaf(x0, c, -rounded(x1 * s));
				v[b] = __builtin_fmaf(x0, s, rounded(x1 * c));
			}
		}
	}
}

void glint_rope(float *x, int n, int cols, int heads, int headDim, const int32_t *pos, int dims, float thetaScale,
                const float *freqs, float freqScale, float mscale, int neox, float *cs) {
	rope2(x, n, cols, heads, headDim, pos, dims, thetaScale, freqs, freqScale, mscale, neox, cs);
}

// ---------------------------------------------------------------- add

void glint_add(const float *x, const float *y, float *d, size_t n) { add8(x, y, d, n); }
