// Float weights (F32, F16, BF16) for simd.c's matmuls: llama.cpp's summation
// orders at AVX2, AVX-512 and AVX512_BF16.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd_kernels.h"

// ---------------------------------------------------------------- float weights
//
// Float weights (F32, F16, BF16) are summed in llama.cpp's orders (kernels.go,
// floatSum): every output keeps float lanes, element i of a row in lane
// i % W, summed by fused multiply-adds (the F16 and BF16 products, over
// activations rounded to their type, are exact, so the Go kernels' rounded
// products added are the same), then reduced and its remainder added as the
// Go finish does. The 16-lane orders (llama.cpp's AVX-512 build) run here
// in pairs of 8-lane vectors, whose lane-wise arithmetic is the same, so
// both flavours run on any AVX2 CPU.

// The orders, as floatSum numbers them.
#define S_VEC8 0
#define S_VEC16 1
#define S_TINY8 2
#define S_TINY16 3
#define S_VECBF 4
#define S_TINYBF 5

// T_F16H is F16 weights whose tiles read the activations' F16 bits (x then
// points to uint16_t), as llama.cpp's do. For the 4 × 3 tiles of 256-bit
// vectors that beat reading them as float32 (F16 8192×2048 × 128 tokens,
// one thread, best of five: 103 against 98 GFLOP/s; llama.cpp's 99), as the
// 4 × 6 tiles of 512-bit vectors do not (98 against 106): the 256-bit
// tile's three tokens in F16 and four rows fit in a 32 KiB L1 together.
#define T_F16H 100

// wide8u loads 8 elements at p as floats, exactly.
INLINE A2 __m256 wide8u(int type, const uint8_t *p) {
	switch (type) {
	case T_F32:
		return _mm256_loadu_ps((const float *)p);
	case T_F16H:
	case T_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
	default:
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
	}
}

// at1 is element i of a weight row, as a float.
INLINE A2 float at1(int type, const uint8_t *p, int i) {
	switch (type) {
	case T_F32: {
		float f;
		memcpy(&f, p + 4 * (size_t)i, 4);
		return f;
	}
	case T_F16:
		return f16at(p + 2 * (size_t)i);
	default: {
		uint32_t u = (uint32_t)le16(p + 2 * (size_t)i) << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	}
}

// tail_f64 adds the products of elements from..k-1 to sum in double.
INLINE A2 float tail_f64(double sum, int type, const float *x, const uint8_t *w, int from, int k) {
	for (int i = from; i < k; i++) {
		sum += (double)rounded(x[i] * at1(type, w, i));
	}
	return (float)sum;
}

// tail_f32 adds elements from…k-1 of an F32 row to r as ggml_vec_dot_f32's
// remainder (tailF32): whole groups of group rounded products, the rest
// fused.
INLINE A2 float tail_f32(float r, int type, const float *x, const uint8_t *w, int from, int k, int group) {
	int whole = from + (k - from) / group * group, i = from;
	for (; i < whole; i++) {
		r += rounded(x[i] * at1(type, w, i));
	}
	for (; i < k; i++) {
		r = __builtin_fmaf(x[i], at1(type, w, i), r);
	}
	return r;
}

// finish is floatSum.finish: a[] holds the output's W lanes; elements np…k-1
// of the row are the remainder.
INLINE A2 float finish(int order, int type, const __m256 *a, const float *x, const uint8_t *w, int np, int k) {
	switch (order) {
	case S_TINY8:
		return hsum8(a[0]);
	case S_TINY16:
		return hsum8(_mm256_add_ps(a[0], a[1]));
	case S_VEC8: {
		if (type == T_BF16) {
			__m256 f = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
			return tail_f64(hsum8(f), type, x, w, np, k);
		}
		float r = reduce8(_mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3])));
		if (type == T_F16) {
			return tail_f64(r, type, x, w, np, k);
		}
		return tail_f32(r, type, x, w, np, k, 4);
	}
	}
	if (type == T_BF16) {
		double sum = hsum8(_mm256_add_ps(a[0], a[1]));
		sum += hsum8(_mm256_add_ps(a[2], a[3]));
		return tail_f64(sum, type, x, w, np, k);
	}
	// Four 16-lane vectors (a pair each) folded 0+2, 1+3, 0+1.
	__m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
	__m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
	float r = hsum8(_mm256_add_ps(lo, hi));
	if (type == T_F16) {
		return tail_f64(r, type, x, w, np, k);
	}
	return tail_f32(r, type, x, w, np, k, 8);
}

// vec_rows is R outputs of ggml_vec_dot_* (NA 8-lane accumulators each:
// W = 8·NA lanes) for one token x, rows at w, rowBytes apart. It asks for
// no prefetch: the weights sit in 2 MiB pages (weights.go), which Zen 4's
// hardware prefetchers alone streamed faster than with a prefetch 4 KiB
// ahead of each row (F16 8192×2048 from memory, one thread: 24 → 29 GB/s;
// the 1B F16 file's decode at the AVX2 level 92 → 78 ms a token).
INLINE A2 void vec_rows(int R, int NA, int order, int type, const float *x, int k, const uint8_t *w,
                        size_t rowBytes, float *dst) {
	size_t es = type == T_F32 ? 4 : 2;
	int W = 8 * NA, np = k & ~(W - 1);
	__m256 a[3][8];
	UNROLL
	for (int r = 0; r < R; r++) {
		UNROLL
		for (int j = 0; j < NA; j++) a[r][j] = _mm256_setzero_ps();
	}
	for (int i = 0; i < np; i += W) {
		UNROLL
		for (int r = 0; r < R; r++) {
			const uint8_t *p = w + r * rowBytes + es * (size_t)i;
			UNROLL
			for (int j = 0; j < NA; j++) {
				a[r][j] = _mm256_fmadd_ps(wide8u(type, p + 8 * es * (size_t)j), _mm256_loadu_ps(x + i + 8 * j), a[r][j]);
			}
		}
	}
	UNROLL
	for (int r = 0; r < R; r++) {
		dst[r] = finish(order, type, a[r], x, w + r * rowBytes, np, k);
	}
}

// xat is activation element off of x, float32 or (T_F16H) F16's bits.
INLINE const float *xat(int type, const float *x, size_t off) {
	return type == T_F16H ? (const float *)((const uint16_t *)x + off) : x + off;
}

// xload8 loads activation elements off…off+7 of x as floats.
INLINE A2 __m256 xload8(int type, const float *x, size_t off) {
	if (type == T_F16H) {
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)x + off)));
	}
	return _mm256_loadu_ps(x + off);
}

// VEC_ROWS is the shortest row that vec_dot_rows reads several at a time,
// as VEC16_ROWS for vec_dot_rows16 (F16 8192×2048 at the AVX2 level, one
// thread: 15 GB/s three rows at a time, 25 one at a time).
#define VEC_ROWS 8192

// vec_dot_rows runs vec_rows over rows lo…hi-1 of every token: R rows at a
// time share each load of the activations.
INLINE A2 void vec_dot_rows(int NA, int order, int type, const float *x, int n, int k, const uint8_t *w,
                            size_t rowBytes, int lo, int hi, float *dst, int m) {
	// Short rows stream best one at a time (see VEC16_ROWS).
	const int R = NA == 4 && rowBytes >= VEC_ROWS ? 3 : 1;
	for (int t = 0; t < n; t++) {
		const float *xt = x + (size_t)t * k;
		float *dt = dst + (size_t)t * m;
		int o = lo;
		for (; o + R <= hi; o += R) {
			vec_rows(R, NA, order, type, xt, k, w + (size_t)o * rowBytes, rowBytes, dt + o);
		}
		for (; o < hi; o++) {
			vec_rows(1, NA, order, type, xt, k, w + (size_t)o * rowBytes, rowBytes, dt + o);
		}
	}
}

// pf_spread prefetches the next tile's rows while a prefill's tile of rows
// sweeps the tokens, a slice per token tile: the hardware prefetchers left
// each new tile's first pass waiting on memory (F16 8192×2048 × 128 tokens
// at the AVX2 level, weights not in cache, one thread: 76 → 105 GFLOP/s).
typedef struct {
	const char *p;
	size_t bytes, step, at;
} pf_spread;

// pf_spread_next serves the R rows after those at w (left rows remain from
// w on, none past them) over tiles token tiles.
INLINE pf_spread pf_spread_next(const uint8_t *w, size_t rowBytes, int R, int left, int tiles) {
	pf_spread s = {(const char *)(w + (size_t)R * rowBytes), 0, 0, 0};
	if (left >= 2 * R) {
		s.bytes = (size_t)R * rowBytes;
	}
	s.step = (s.bytes / 64 / (size_t)tiles + 1) * 64;
	return s;
}

INLINE void pf_spread_step(pf_spread *s) {
	for (size_t e = s->at + s->step; s->at < e && s->at < s->bytes; s->at += 64) {
		_mm_prefetch(s->p + s->at, _MM_HINT_T0);
	}
}

// tiny_tile is tinyBLAS's gemm_bloc: RM rows × RN tokens, each output NA
// 8-lane accumulators (KN = 8·NA lanes) over the whole of k (a multiple of
// KN), then reduced.
INLINE A2 void tiny_tile(int RM, int RN, int NA, int order, int type, const float *x, int k, const uint8_t *w,
                         size_t rowBytes, float *dst, int m) {
	size_t es = type == T_F32 ? 4 : 2;
	__m256 a[4][3][2];
	UNROLL
	for (int r = 0; r < RM; r++) {
		UNROLL
		for (int c = 0; c < RN; c++) {
			UNROLL
			for (int j = 0; j < NA; j++) a[r][c][j] = _mm256_setzero_ps();
		}
	}
	for (int i = 0; i < k; i += 8 * NA) {
		UNROLL
		for (int j = 0; j < NA; j++) {
			__m256 xv[3];
			UNROLL
			for (int c = 0; c < RN; c++) xv[c] = xload8(type, x, (size_t)c * k + i + 8 * j);
			UNROLL
			for (int r = 0; r < RM; r++) {
				__m256 wv = wide8u(type, w + r * rowBytes + es * (size_t)(i + 8 * j));
				UNROLL
				for (int c = 0; c < RN; c++) a[r][c][j] = _mm256_fmadd_ps(wv, xv[c], a[r][c][j]);
			}
		}
	}
	UNROLL
	for (int r = 0; r < RM; r++) {
		UNROLL
		for (int c = 0; c < RN; c++) dst[(size_t)c * m + r] = finish(order, type, a[r][c], NULL, NULL, k, k);
	}
}

// tiny_rows runs tiny_tile over rows lo…hi-1 and every token: RM rows at a
// time sweep all the tokens, RN at a time, so that the rows stay in cache
// while the tokens stream past.
INLINE A2 void tiny_rows(int NA, int order, int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes,
                         int lo, int hi, float *dst, int m) {
	const int RM = NA == 1 ? 4 : 2, RN = 3;
	for (int o = lo; o < hi; o += RM) {
		const uint8_t *wo = w + (size_t)o * rowBytes;
		float *d = dst + o;
		int rm = hi - o < RM ? hi - o : RM, t = 0;
		pf_spread pf = pf_spread_next(wo, rowBytes, RM, hi - o, n / RN + 1);
		for (; t + RN <= n; t += RN) {
			pf_spread_step(&pf);
			const float *xt = xat(type, x, (size_t)t * k);
			float *dt = d + (size_t)t * m;
			if (rm == RM) {
				tiny_tile(RM, RN, NA, order, type, xt, k, wo, rowBytes, dt, m);
			} else {
				for (int r = 0; r < rm; r++) {
					tiny_tile(1, RN, NA, order, type, xt, k, wo + r * rowBytes, rowBytes, dt + r, m);
				}
			}
		}
		// The last tokens, fewer than RN, in one narrower tile: token by
		// token, each row's weights took two loads per multiply-add.
		int R = rm == RM ? RM : 1;
		for (int r = 0; t < n && r < rm; r += R) {
			const float *xt = xat(type, x, (size_t)t * k);
			float *dt = d + (size_t)t * m + r;
			switch (R * 8 + n - t) {
			case 9: tiny_tile(1, 1, NA, order, type, xt, k, wo + r * rowBytes, rowBytes, dt, m); break;
			case 10: tiny_tile(1, 2, NA, order, type, xt, k, wo + r * rowBytes, rowBytes, dt, m); break;
			case 17: tiny_tile(2, 1, NA, order, type, xt, k, wo + r * rowBytes, rowBytes, dt, m); break;
			case 18: tiny_tile(2, 2, NA, order, type, xt, k, wo + r * rowBytes, rowBytes, dt, m); break;
			case 33: tiny_tile(4, 1, NA, order, type, xt, k, wo + r * rowBytes, rowBytes, dt, m); break;
			default: tiny_tile(4, 2, NA, order, type, xt, k, wo + r * rowBytes, rowBytes, dt, m); break;
			}
		}
	}
}

// float_rows computes rows lo…hi-1 of every token in the order order,
// for weights of type type: a constant in each of the functions below, so
// that each type gets kernels of its own.
INLINE A2 void float_rows(int type, int order, const float *x, int n, int k, const uint8_t *w, size_t rowBytes,
                          int lo, int hi, float *dst, int m) {
	switch (order) {
	case S_VEC8: vec_dot_rows(4, order, type, x, n, k, w, rowBytes, lo, hi, dst, m); break;
	case S_VEC16:
		if (type == T_BF16) {
			vec_dot_rows(4, order, type, x, n, k, w, rowBytes, lo, hi, dst, m);
		} else {
			vec_dot_rows(8, order, type, x, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case S_TINY8: tiny_rows(1, order, type, x, n, k, w, rowBytes, lo, hi, dst, m); break;
	default: tiny_rows(2, order, type, x, n, k, w, rowBytes, lo, hi, dst, m); break;
	}
}

#define FLOAT_ARGS \
	int order, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m
#define FLOAT_PASS order, x, n, k, w, rowBytes, lo, hi, dst, m
static A2 void float_f32(FLOAT_ARGS) { float_rows(T_F32, FLOAT_PASS); }
static A2 void float_f16(FLOAT_ARGS) { float_rows(T_F16, FLOAT_PASS); }
static A2 void float_bf16(FLOAT_ARGS) { float_rows(T_BF16, FLOAT_PASS); }
static A2 void float_f16h(FLOAT_ARGS) { float_rows(T_F16H, FLOAT_PASS); }


// ---------------------------------------------------------------- AVX-512: float weights
//
// The 16-lane orders of llama.cpp's AVX-512 build (S_TINY16: tinyBLAS's KN =
// 16 lanes; S_VEC16: ggml_vec_dot_f16/f32's four 16-lane accumulators over
// 64-element steps) in 512-bit vectors, which the 256-bit kernels above
// emulate with pairs of 8 lanes: lane l is fed the same elements by the same
// fused multiply-adds, so the bits are the same, but with 32 registers a
// tile holds more outputs and each load of an activation or a weight serves
// more of them (tinyBLAS's 2 × 3 tile of pairs took five loads for six
// multiply-adds, which held Zen 4's prefill to about half its FMA rate).

// wide16u loads 16 elements at p as floats, exactly.
INLINE A5 __m512 wide16u(int type, const uint8_t *p) {
	switch (type) {
	case T_F32:
		return _mm512_loadu_ps((const float *)p);
	case T_F16:
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
	default:
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
	}
}

// halves16 splits a 16-lane accumulator into the pair of 8-lane ones that
// finish reads.
INLINE A5 void halves16(__m512 v, __m256 *a) {
	a[0] = _mm512_castps512_ps256(v);
	a[1] = _mm512_extractf32x8_ps(v, 1);
}

// tiny_tile16 is tiny_tile for S_TINY16: RM ≤ 4 rows × RN ≤ 6 tokens.
INLINE A5 void tiny_tile16(int RM, int RN, int type, const float *x, int k, const uint8_t *w, size_t rowBytes,
                           float *dst, int m) {
	size_t es = type == T_F32 ? 4 : 2;
	__m512 a[4][6];
	UNROLL
	for (int r = 0; r < RM; r++) {
		UNROLL
		for (int c = 0; c < RN; c++) a[r][c] = _mm512_setzero_ps();
	}
	for (int i = 0; i < k; i += 16) {
		__m512 xv[6];
		UNROLL
		for (int c = 0; c < RN; c++) xv[c] = _mm512_loadu_ps(x + (size_t)c * k + i);
		UNROLL
		for (int r = 0; r < RM; r++) {
			__m512 wv = wide16u(type, w + r * rowBytes + es * (size_t)i);
			UNROLL
			for (int c = 0; c < RN; c++) a[r][c] = _mm512_fmadd_ps(wv, xv[c], a[r][c]);
		}
	}
	UNROLL
	for (int r = 0; r < RM; r++) {
		UNROLL
		for (int c = 0; c < RN; c++) {
			__m256 h[2];
			halves16(a[r][c], h);
			dst[(size_t)c * m + r] = finish(S_TINY16, type, h, NULL, NULL, k, k);
		}
	}
}

// TINY_ROWS16 makes tiny_rows over a 4 × 6 tile of 512-bit vectors (tile:
// tiny_tile16, bf16_tile; XT the activations' element type).
#define TINY_ROWS16(name, attr, XT, tile)                                                                     \
	INLINE attr void name(int type, const XT *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, \
	                      float *dst, int m) {                                                                \
		enum { RM = 4, RN = 6 };                                                                           \
		for (int o = lo; o < hi; o += RM) {                                                                \
			const uint8_t *wo = w + (size_t)o * rowBytes;                                                  \
			float *d = dst + o;                                                                            \
			int rm = hi - o < RM ? hi - o : RM, t = 0;                                                     \
			pf_spread pf = pf_spread_next(wo, rowBytes, RM, hi - o, n / RN + 1);                           \
			for (; t + RN <= n; t += RN) {                                                                 \
				pf_spread_step(&pf);                                                                       \
				const XT *xt = x + (size_t)t * k;                                                          \
				float *dt = d + (size_t)t * m;                                                             \
				if (rm == RM) {                                                                            \
					tile(RM, RN, type, xt, k, wo, rowBytes, dt, m);                                        \
				} else {                                                                                   \
					for (int r = 0; r < rm; r++) {                                                         \
						tile(1, RN, type, xt, k, wo + r * rowBytes, rowBytes, dt + r, m);                  \
					}                                                                                      \
				}                                                                                          \
			}                                                                                              \
			/* The last tokens, fewer than RN, in one narrower tile (see tiny_rows). */                    \
			int R = rm == RM ? RM : 1;                                                                     \
			for (int r = 0; t < n && r < rm; r += R) {                                                     \
				const XT *xt = x + (size_t)t * k;                                                          \
				const uint8_t *wr = wo + r * rowBytes;                                                     \
				float *dt = d + (size_t)t * m + r;                                                         \
				switch (R * 8 + n - t) {                                                                   \
				case 9: tile(1, 1, type, xt, k, wr, rowBytes, dt, m); break;                               \
				case 10: tile(1, 2, type, xt, k, wr, rowBytes, dt, m); break;                              \
				case 11: tile(1, 3, type, xt, k, wr, rowBytes, dt, m); break;                              \
				case 12: tile(1, 4, type, xt, k, wr, rowBytes, dt, m); break;                              \
				case 13: tile(1, 5, type, xt, k, wr, rowBytes, dt, m); break;                              \
				case 33: tile(4, 1, type, xt, k, wr, rowBytes, dt, m); break;                              \
				case 34: tile(4, 2, type, xt, k, wr, rowBytes, dt, m); break;                              \
				case 35: tile(4, 3, type, xt, k, wr, rowBytes, dt, m); break;                              \
				case 36: tile(4, 4, type, xt, k, wr, rowBytes, dt, m); break;                              \
				default: tile(4, 5, type, xt, k, wr, rowBytes, dt, m); break;                              \
				}                                                                                          \
			}                                                                                              \
		}                                                                                                  \
	}
TINY_ROWS16(tiny_rows16, A5, float, tiny_tile16)

// vec_rows16 is vec_rows for S_VEC16 (F32 and F16): R ≤ 4 rows share each
// load of the activations, four 16-lane accumulators each.
INLINE A5 void vec_rows16(int R, int type, const float *x, int k, const uint8_t *w, size_t rowBytes, float *dst) {
	size_t es = type == T_F32 ? 4 : 2;
	int np = k & ~63;
	__m512 a[4][4];
	UNROLL
	for (int r = 0; r < R; r++) {
		UNROLL
		for (int j = 0; j < 4; j++) a[r][j] = _mm512_setzero_ps();
	}
	for (int i = 0; i < np; i += 64) {
		__m512 xv[4];
		UNROLL
		for (int j = 0; j < 4; j++) xv[j] = _mm512_loadu_ps(x + i + 16 * j);
		UNROLL
		for (int r = 0; r < R; r++) {
			const uint8_t *p = w + r * rowBytes + es * (size_t)i;
			UNROLL
			for (int j = 0; j < 4; j++) a[r][j] = _mm512_fmadd_ps(wide16u(type, p + 16 * es * (size_t)j), xv[j], a[r][j]);
		}
	}
	UNROLL
	for (int r = 0; r < R; r++) {
		__m256 h[8];
		UNROLL
		for (int j = 0; j < 4; j++) halves16(a[r][j], h + 2 * j);
		dst[r] = finish(S_VEC16, type, h, x, w + r * rowBytes, np, k);
	}
}

// VEC16_ROWS is the shortest row vec_dot_rows16 takes. A row of 8 KiB or
// more has activations that no longer sit in L1 beside the weights'
// stream, and four rows read them once (2048×8192 F16 from memory: 11 →
// 14 GB/s a thread); shorter ones go one at a time through vec_rows, which
// the prefetchers follow as one stream (vec_rows16 took 8192×2048 from 22
// to 10–15 GB/s, one row or four at a time).
#define VEC16_ROWS 8192

// vec_dot_rows16 is vec_dot_rows over vec_rows16, four rows at a time.
INLINE A5 void vec_dot_rows16(int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo, int hi,
                              float *dst, int m) {
	for (int t = 0; t < n; t++) {
		const float *xt = x + (size_t)t * k;
		float *dt = dst + (size_t)t * m;
		int o = lo;
		for (; o + 4 <= hi; o += 4) {
			vec_rows16(4, type, xt, k, w + (size_t)o * rowBytes, rowBytes, dt + o);
		}
		for (; o < hi; o++) {
			vec_rows16(1, type, xt, k, w + (size_t)o * rowBytes, rowBytes, dt + o);
		}
	}
}

// float_rows16 is float_rows for the orders that run in 512-bit vectors
// (see above); it reports 0, having done nothing, for the others.
INLINE A5 int float_rows16(int type, int order, const float *x, int n, int k, const uint8_t *w, size_t rowBytes,
                           int lo, int hi, float *dst, int m) {
	if (order == S_TINY16) {
		tiny_rows16(type, x, n, k, w, rowBytes, lo, hi, dst, m);
		return 1;
	}
	if (order == S_VEC16 && type != T_BF16 && rowBytes >= VEC16_ROWS) {
		vec_dot_rows16(type, x, n, k, w, rowBytes, lo, hi, dst, m);
		return 1;
	}
	return 0;
}
static A5 int float16_f32(FLOAT_ARGS) { return float_rows16(T_F32, FLOAT_PASS); }
static A5 int float16_f16(FLOAT_ARGS) { return float_rows16(T_F16, FLOAT_PASS); }
static A5 int float16_bf16(FLOAT_ARGS) { return float_rows16(T_BF16, FLOAT_PASS); }

// ---------------------------------------------------------------- AVX512_BF16: BF16 weights
//
// The orders of llama.cpp's build for a CPU with AVX512_BF16 (S_VECBF:
// ggml_vec_dot_bf16; S_TINYBF: tinyBLAS<32>), which sum BF16 weights and
// activations by vdpbf16ps: a lane takes a pair of elements a step, the odd
// one first, each by a fused multiply-add that takes subnormals as zero
// (addPairs in kernels.go). x is the activations' BF16 bits (Go's
// acts.h). Only hosts with the instruction run these (simdBF16).

INLINE float bf16f(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// bf16_vec_rows is ggml_vec_dot_bf16 for R ≤ 4 rows at w, rowBytes apart,
// sharing each load of x.
INLINE AB void bf16_vec_rows(int R, const uint16_t *x, int k, const uint8_t *w, size_t rowBytes, float *dst) {
	__m512 a[4][2];
	UNROLL
	for (int r = 0; r < R; r++) a[r][0] = a[r][1] = _mm512_setzero_ps();
	int i = 0;
	for (; i + 64 <= k; i += 64) {
		__m512bh x0 = (__m512bh)_mm512_loadu_si512(x + i), x1 = (__m512bh)_mm512_loadu_si512(x + i + 32);
		UNROLL
		for (int r = 0; r < R; r++) {
			const uint8_t *p = w + r * rowBytes + 2 * (size_t)i;
			a[r][0] = _mm512_dpbf16_ps(a[r][0], (__m512bh)_mm512_loadu_si512(p), x0);
			a[r][1] = _mm512_dpbf16_ps(a[r][1], (__m512bh)_mm512_loadu_si512(p + 64), x1);
		}
	}
	UNROLL
	for (int r = 0; r < R; r++) {
		double sum = _mm512_reduce_add_ps(a[r][0]);
		sum += _mm512_reduce_add_ps(a[r][1]);
		const uint8_t *p = w + r * rowBytes;
		for (int j = i; j < k; j++) {
			sum += (double)(bf16f(x[j]) * bf16f(le16(p + 2 * (size_t)j)));
		}
		dst[r] = (float)sum;
	}
}

// bf16_tile is tinyBLAS<32>'s tile: RM ≤ 4 rows × RN ≤ 6 tokens, k a
// multiple of 32 (type: T_BF16, as tiny_tile16's).
INLINE AB void bf16_tile(int RM, int RN, int type, const uint16_t *x, int k, const uint8_t *w, size_t rowBytes,
                         float *dst, int m) {
	(void)type;
	__m512 a[4][6];
	UNROLL
	for (int r = 0; r < RM; r++) {
		UNROLL
		for (int c = 0; c < RN; c++) a[r][c] = _mm512_setzero_ps();
	}
	for (int i = 0; i < k; i += 32) {
		__m512bh xv[6];
		UNROLL
		for (int c = 0; c < RN; c++) xv[c] = (__m512bh)_mm512_loadu_si512(x + (size_t)c * k + i);
		UNROLL
		for (int r = 0; r < RM; r++) {
			__m512bh wv = (__m512bh)_mm512_loadu_si512(w + r * rowBytes + 2 * (size_t)i);
			UNROLL
			for (int c = 0; c < RN; c++) a[r][c] = _mm512_dpbf16_ps(a[r][c], wv, xv[c]);
		}
	}
	UNROLL
	for (int r = 0; r < RM; r++) {
		UNROLL
		for (int c = 0; c < RN; c++) dst[(size_t)c * m + r] = _mm512_reduce_add_ps(a[r][c]);
	}
}

TINY_ROWS16(bf16_tiny_rows, AB, uint16_t, bf16_tile)

// bf16_rows computes rows lo…hi-1 of every token in the order order.
static AB void bf16_rows(int order, const uint16_t *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo,
                         int hi, float *dst, int m) {
	if (order == S_VECBF) {
		// Long rows share x's loads, as vec_dot_rows16's (VEC16_ROWS).
		const int R = rowBytes >= VEC16_ROWS ? 4 : 1;
		for (int t = 0; t < n; t++) {
			const uint16_t *xt = x + (size_t)t * k;
			float *dt = dst + (size_t)t * m;
			int o = lo;
			for (; o + R <= hi; o += R) bf16_vec_rows(R, xt, k, w + (size_t)o * rowBytes, rowBytes, dt + o);
			for (; o < hi; o++) bf16_vec_rows(1, xt, k, w + (size_t)o * rowBytes, rowBytes, dt + o);
		}
		return;
	}
	bf16_tiny_rows(T_BF16, x, n, k, w, rowBytes, lo, hi, dst, m);
}

static void matmat_chunk(glint_level level, int order, int type, const float *x, const uint16_t *xh, int n, int k,
                         const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {
	if (order == S_VECBF || order == S_TINYBF) {
		bf16_rows(order, xh, n, k, w, rowBytes, lo, hi, dst, m);
		return;
	}
	if (type == T_F16 && order == S_TINY8 && xh != NULL) {
		x = (const float *)xh;
		type = T_F16H;
	}
	if (level >= GLINT_AVX512) {
		int done;
		switch (type) {
		case T_F32: done = float16_f32(order, x, n, k, w, rowBytes, lo, hi, dst, m); break;
		case T_F16: done = float16_f16(order, x, n, k, w, rowBytes, lo, hi, dst, m); break;
		default: done = float16_bf16(order, x, n, k, w, rowBytes, lo, hi, dst, m); break;
		}
		if (done) {
			return;
		}
	}
	switch (type) {
	case T_F32: float_f32(order, x, n, k, w, rowBytes, lo, hi, dst, m); break;
	case T_F16H: float_f16h(order, x, n, k, w, rowBytes, lo, hi, dst, m); break;
	case T_F16: float_f16(order, x, n, k, w, rowBytes, lo, hi, dst, m); break;
	default: float_bf16(order, x, n, k, w, rowBytes, lo, hi, dst, m); break;
	}
}

void glint_matmat(glint_level level, int order, int type, const float *x, const uint16_t *xh, int n, int k, const uint8_t *w,
                  size_t rowBytes, glint_rows rows, float *dst, int m) {
	for (int lo, hi; glint_claim(&rows, &lo, &hi);) {
		matmat_chunk(level, order, type, x, xh, n, k, w, rowBytes, lo, hi, dst, m);
	}
}
