// SIMD kernels for the CPU backend (see simd.go). Every function is compiled
// for its instruction set with a target attribute and chosen at run time, so
// the package builds with plain CFLAGS and still runs on CPUs that lack
// AVX-512 or AVX2.
//
// Float weights (F32, F16, BF16) meet float32 activations (rounded to F16
// or BF16 for those weights) and are widened exactly; every output is summed
// in the Go reference's order (kernels.go, floatSum: llama.cpp's).
// Quantised weights meet activations quantised as dtype.RoundActivations
// defines (llama.cpp's arithmetic): each block's dot product is exact in
// integers. Q4_0 matrices of a multiple of 8 rows add each block's
// total times the scales into one float32 by a fused multiply-add, in block
// order (ggml's repacked Q4_0); every other type, Q8_0 included, and other Q4_0 matrices,
// keep eight integer lanes per block and add them into eight float lanes by
// fused multiply-adds, in ggml's x86 order (quant_lanes.go). So every level
// gives the portable path's bits.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd.h"
#include "simd_common.h"

// f16tab maps every half-precision bit pattern to float, so that a block
// scale costs one load that vbroadcastss takes straight from memory: a
// scalar vcvtph2ps plus a register broadcast would spend two uops of the
// shuffle port, which unpacking the weights already saturates.
static float f16tab[65536];

A2 void glint_simd_init(void) {
	for (int i = 0; i < 65536; i++) {
		f16tab[i] = _cvtsh_ss((uint16_t)i);
	}
}

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

// pf_pass serves kernels that read R rows together, block by block (bb
// bytes each, row r's block b at w + r·rowBytes + b·bb), by prefetching the
// next pass, the R rows that follow. Short rows are too short a stream each
// for the hardware prefetchers to pick up, so there row r's block b asks for
// slice R·b + r of the next pass (and the line after it), which fetches the
// next pass's R·rowBytes bytes as one run in storage order: asking for the
// same block R rows on instead (R streams a rowBytes apart) left a thread
// at a third to a half of memory's speed on Zen 4 (BenchmarkKernelsDRAM,
// Q4_0 and Q6_K 8192×2048, 8 GB/s against 16–20). Long rows keep the R
// streams, where the run would be fetched too far ahead.
#define PASS_RUN_MAX (12 << 10)
INLINE void pf_pass(const uint8_t *w, size_t rowBytes, int R, int b, int r, size_t bb) {
	const uint8_t *next = w + (size_t)R * rowBytes;
	if ((size_t)R * rowBytes > PASS_RUN_MAX) {
		_mm_prefetch((const char *)(next + r * rowBytes + (size_t)b * bb), _MM_HINT_T0);
		_mm_prefetch((const char *)(next + r * rowBytes + (size_t)b * bb + 64), _MM_HINT_T0);
		return;
	}
	const char *p = (const char *)(next + ((size_t)R * b + r) * bb);
	for (size_t i = 0; i < bb + 64; i += 64) {
		_mm_prefetch(p + i, _MM_HINT_T0);
	}
}

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

#define FLOAT_KERNELS(name, type)                                                                               \
	static A2 void name(int order, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, \
	                    float *dst, int m) {                                                                     \
		switch (order) {                                                                                      \
		case S_VEC8: vec_dot_rows(4, order, type, x, n, k, w, rowBytes, lo, hi, dst, m); break;               \
		case S_VEC16:                                                                                         \
			if (type == T_BF16) {                                                                             \
				vec_dot_rows(4, order, type, x, n, k, w, rowBytes, lo, hi, dst, m);                           \
			} else {                                                                                          \
				vec_dot_rows(8, order, type, x, n, k, w, rowBytes, lo, hi, dst, m);                           \
			}                                                                                                 \
			break;                                                                                            \
		case S_TINY8: tiny_rows(1, order, type, x, n, k, w, rowBytes, lo, hi, dst, m); break;                 \
		default: tiny_rows(2, order, type, x, n, k, w, rowBytes, lo, hi, dst, m); break;                      \
		}                                                                                                     \
	}
FLOAT_KERNELS(float_f32, T_F32)
FLOAT_KERNELS(float_f16, T_F16)
FLOAT_KERNELS(float_bf16, T_BF16)
FLOAT_KERNELS(float_f16h, T_F16H)
#undef FLOAT_KERNELS


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

#define FLOAT_KERNELS16(name, type)                                                                           \
	static A5 int name(int order, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, \
	                   float *dst, int m) {                                                                    \
		if (order == S_TINY16) {                                                                              \
			tiny_rows16(type, x, n, k, w, rowBytes, lo, hi, dst, m);                                          \
			return 1;                                                                                         \
		}                                                                                                     \
		if (order == S_VEC16 && type != T_BF16 && rowBytes >= VEC16_ROWS) {                                  \
			vec_dot_rows16(type, x, n, k, w, rowBytes, lo, hi, dst, m);                                       \
			return 1;                                                                                         \
		}                                                                                                     \
		return 0;                                                                                             \
	}
FLOAT_KERNELS16(float16_f32, T_F32)
FLOAT_KERNELS16(float16_f16, T_F16)
FLOAT_KERNELS16(float16_bf16, T_BF16)
#undef FLOAT_KERNELS16

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

static void matmat_chunk(int level, int order, int type, const float *x, const uint16_t *xh, int n, int k,
                         const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {
	if (order == S_VECBF || order == S_TINYBF) {
		bf16_rows(order, xh, n, k, w, rowBytes, lo, hi, dst, m);
		return;
	}
	if (type == T_F16 && order == S_TINY8 && xh != NULL) {
		x = (const float *)xh;
		type = T_F16H;
	}
	if (level >= 2) {
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

void glint_matmat(int level, int order, int type, const float *x, const uint16_t *xh, int n, int k, const uint8_t *w,
                  size_t rowBytes, glint_rows rows, float *dst, int m) {
	for (int lo, hi; glint_claim(&rows, &lo, &hi);) {
		matmat_chunk(level, order, type, x, xh, n, k, w, rowBytes, lo, hi, dst, m);
	}
}

// ---------------------------------------------------------------- activations

INLINE A2 int hsum8i(__m256i v) {
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
	return _mm_cvtsi128_si32(s);
}

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
static A2 void quantize_q8_0_avx2(const float *x, int k, int off, int8_t *q, float *d, int32_t *c) {
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
			c[b] = 0;
			continue;
		}
		d[b] = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
		__m256 id = _mm256_set1_ps(127.0f / amax);
		__m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
		__m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
		c[b] = -off * hsum8i(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
		_mm256_storeu_si256((__m256i *)(q + 32 * b), pack32(i0, i1, i2, i3));
	}
}

// quantize_q8_1_avx2 is quantize_q8_0_avx2 (q and d) plus each block's
// s = f16((amax/127)·Σq), dtype.Q8_1Sum: the float32 product of the scale
// before its f16 rounding and the exact sum.
static A2 void quantize_q8_1_avx2(const float *x, int k, int8_t *q, float *d, float *s) {
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
			s[b] = 0;
			continue;
		}
		float sc = amax / 127.0f;
		d[b] = _cvtsh_ss(_cvtss_sh(sc, _MM_FROUND_TO_NEAREST_INT));
		__m256 id = _mm256_set1_ps(127.0f / amax);
		__m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
		__m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
		int sum = hsum8i(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
		s[b] = _cvtsh_ss(_cvtss_sh(sc * (float)sum, _MM_FROUND_TO_NEAREST_INT));
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

void glint_quantize_q8_0(const float *x, int k, int off, int8_t *q, float *d, int32_t *c) {
	quantize_q8_0_avx2(x, k, off, q, d, c);
}

void glint_quantize_q8_1(const float *x, int k, int8_t *q, float *d, float *s) {
	quantize_q8_1_avx2(x, k, q, d, s);
}

void glint_quantize_q8_k(const float *x, int k, int8_t *q, float *d, int16_t *bs) {
	quantize_q8_k_avx2(x, k, q, d, bs);
}

// ---------------------------------------------------------------- quantised dots
//
// A block dot product is Σ (qw − o)·qx with an exact int32 result. The
// unsigned×signed byte instructions (vpdpbusd, vpmaddubsw) want the weights
// unsigned, so they compute Σ u·qx with u = qw + o ≥ 0 and take o·Σ qx off.
// Q4_0 in ggml's repacked order (below) finds the correction c = −o·Σ qx of
// the block (o = 8: nibbles are stored as q+8) stored by the activation
// quantiser, and starts the vpdpbusd accumulator with it, so it costs a load
// and no arithmetic; the types in lanes (further down) take it off per lane.

// q4_unpack returns the 32 nibbles of a Q4_0 block in element order as
// unsigned bytes: byte j holds element j (low nibble) and j+16 (high), so the
// 16 bytes go to both 128-bit lanes and the upper lane shifts by 4.
INLINE A2 __m256i q4_unpack(const uint8_t *qs) {
	__m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
	v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
	return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// Block dots for Q4_0 (bytes at p, 16 bytes of nibbles): VNNI adds to the
// correction init; AVX2 multiplies in int16 (exact: at most 2·15·127) and
// sums pairs with vpmaddwd.
INLINE A3 __m256i bdot_q4_vnni(__m256i init, const uint8_t *qs, __m256i x) {
	return _mm256_dpbusd_epi32(init, q4_unpack(qs), x);
}

INLINE A2 __m256i bdot_q4_avx2(__m256i init, const uint8_t *qs, __m256i x) {
	__m256i p = _mm256_maddubs_epi16(q4_unpack(qs), x);
	return _mm256_add_epi32(init, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

// sum8x8 returns the sums of the eight int32 lanes of each of v[0…7], in
// that order: exact block dot products from their 8 lanes of partial sums.
INLINE A2 __m256i sum8x8(const __m256i v[8]) {
	__m256i t[4], u[2];
	for (int i = 0; i < 4; i++) {
		t[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
		                        _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
	}
	for (int i = 0; i < 2; i++) {
		u[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
		                        _mm256_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
	}
	return _mm256_add_epi32(_mm256_permute2x128_si256(u[0], u[1], 0x20), _mm256_permute2x128_si256(u[0], u[1], 0x31));
}

// QTILE defines a micro-kernel for R weight rows × T tokens of Q4_0 in
// ggml's repacked order (rows a multiple of 8, dotQ4_0Repacked): each
// unpacked weight block and each activation block is loaded once and used T
// (R) times. Per block, the dot products' lanes are summed to exact
// integers (sum8x8) and added, times dw·dx rounded to float32, into one
// float32 per pair by a fused multiply-add, block after block. Pair (r, t)
// keeps its sum in lane 4(r%2) + t of acc[r/2] (pairs past T are zero), so
// that the scales of a vector of 8 pairs are two rows' dw times the same
// four dx.
#define QTILE(name, attr, bdot)                                                                              \
	INLINE attr void name(int R, int T, const int8_t *q, const float *xd, const int32_t *xc, int k,            \
	                      const uint8_t *w, size_t rowBytes, float *dst, int m) {                            \
		__m256 acc[2];                                                                                        \
		for (int i = 0; i < 2; i++) acc[i] = _mm256_setzero_ps();                                             \
		int nb = k / 32;                                                                                      \
		for (int b = 0; b < nb; b++) {                                                                        \
			__m256i dp[16];                                                                                   \
			float dxs[4] = {0, 0, 0, 0};                                                                      \
			for (int t = 0; t < T; t++) dxs[t] = xd[(size_t)t * nb + b];                                      \
			__m128 dx4 = _mm_setr_ps(dxs[0], dxs[1], dxs[2], dxs[3]);                                         \
			__m256 dx8 = _mm256_set_m128(dx4, dx4);                                                           \
			for (int p = 0; p < 16; p++) dp[p] = _mm256_setzero_si256();                                      \
			for (int t = 0; t < T; t++) {                                                                     \
				__m256i xv = _mm256_loadu_si256((const __m256i *)(q + (size_t)t * k + 32 * b));               \
				__m256i init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(xc[(size_t)t * nb + b]));             \
				for (int r = 0; r < R; r++) dp[4 * r + t] = bdot(init, w + r * rowBytes + (size_t)b * 18 + 2, xv); \
			}                                                                                                 \
			for (int r = 0; r < R; r += 2) {                                                                  \
				__m128 d0 = _mm_set1_ps(f16tab[le16(w + r * rowBytes + (size_t)b * 18)]);                     \
				__m128 d1 = r + 1 < R ? _mm_set1_ps(f16tab[le16(w + (r + 1) * rowBytes + (size_t)b * 18)])    \
				                      : _mm_setzero_ps();                                                     \
				__m256 sc = _mm256_mul_ps(_mm256_set_m128(d1, d0), dx8);                                      \
				acc[r / 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum8x8(dp + 4 * r)), sc, acc[r / 2]);         \
			}                                                                                                 \
		}                                                                                                     \
		float out[16];                                                                                        \
		for (int i = 0; i < 2; i++) _mm256_storeu_ps(out + 8 * i, acc[i]);                                    \
		for (int r = 0; r < R; r++)                                                                           \
			for (int t = 0; t < T; t++) dst[(size_t)t * m + r] = out[4 * r + t];                              \
	}

QTILE(tile_q4_vnni, A3, bdot_q4_vnni)
QTILE(tile_q4_avx2, A2, bdot_q4_avx2)

// CASES4 expands to the four token counts of an R-row tile, each a call
// with constant shape.
#define CASE1(tile, R, T) \
	case R * 8 + T: tile(R, T, qt, dt, ct, k, wr, rowBytes, d, m); break;
#define CASES4(tile, R) CASE1(tile, R, 1) CASE1(tile, R, 2) CASE1(tile, R, 3) CASE1(tile, R, 4)

// Q4X8_PREFETCH is how far ahead of its block q4x8_tile fetches.
#define Q4X8_PREFETCH 1024

// The tiles: R rows × T tokens, with ragged edges dispatched to smaller
// constant shapes so that the compiler keeps every accumulator in a register
// (VNNI has 32 vector registers for 4×4 tiles; AVX2 16, for 2×4).
#define QMATMAT(name, attr, tile, R0)                                                                    \
	static attr void name(const int8_t *q, const float *xd, const int32_t *xc, int n, int k, const uint8_t *w,  \
	                      size_t rowBytes, int lo, int hi, float *dst, int m) {                                 \
		int nb = k / 32;                                                                                      \
		for (int o = lo; o < hi; o += R0) {                                                                   \
			int R = hi - o < R0 ? hi - o : R0;                                                                \
			const uint8_t *wr = w + (size_t)o * rowBytes;                                                     \
			for (int t = 0; t < n; t += 4) {                                                                  \
				int T = n - t < 4 ? n - t : 4;                                                                \
				const int8_t *qt = q + (size_t)t * k;                                                         \
				const float *dt = xd + (size_t)t * nb;                                                        \
				const int32_t *ct = xc + (size_t)t * nb;                                                      \
				float *d = dst + (size_t)t * m + o;                                                           \
				switch (R * 8 + T) {                                                                          \
				CASES4(tile, 1) CASES4(tile, 2) CASES4(tile, 3) CASES4(tile, 4)                               \
				}                                                                                             \
			}                                                                                                 \
		}                                                                                                     \
	}

QMATMAT(matmat_q4_vnni, A3, tile_q4_vnni, 4)
QMATMAT(matmat_q4_avx2, A2, tile_q4_avx2, 2)

// q4x8_tile computes 8 rows × T ≤ 4 tokens of a Q4_0 weight interleaved in
// eights (interleave.go): g is the group's first byte. A block's four
// 32-byte vectors hold 4 nibble bytes of each row per 32-bit lane; their low
// nibbles (elements 4j…4j+3 of vector j) meet activation word j broadcast
// to every lane and the high ones (16+4j…) word 4+j, so eight vpmaddubsw
// and int16 adds leave each row's products in its own lane, and one
// vpmaddwd finishes the block sums in row order, with no horizontal adds.
// Each int16 is at most 2·15·127 in magnitude and a lane adds eight of
// them, < 2^15: exact. The correction c completes the sums (exact int32),
// and one fused multiply-add per token adds them times dw·dx into its eight
// rows' float accumulators, block after block: dotQ4_0Repacked, bit for bit.
// The unpacked nibbles and the scales serve all T tokens.
//
// The stream is contiguous, which the hardware prefetchers follow; a line a
// block, Q4X8_PREFETCH ahead, keeps more of it in flight while several
// tokens' arithmetic runs. With VNNI (q4x8_tile_vnni) one vpdpbusd per
// vector adds its four products straight into the int32 lanes: the same
// exact sums in half the instructions.
#define Q4X8_TILE(name, attr, mac, widen, chains)                                                             \
	INLINE attr void name(int T, const int8_t *q, const float *xd, const int32_t *xc, int k, const uint8_t *g, \
	                      float *dst, int m) {                                                                 \
		const __m256i m4 = _mm256_set1_epi8(0x0F);                                                            \
		__m256 acc[4];                                                                                        \
		for (int t = 0; t < 4; t++) acc[t] = _mm256_setzero_ps();                                             \
		int nb = k / 32;                                                                                      \
		for (int b = 0; b < nb; b++) {                                                                        \
			const uint8_t *blk = g + (size_t)b * 144;                                                         \
			_mm_prefetch((const char *)blk + Q4X8_PREFETCH, _MM_HINT_T0);                                     \
			_mm_prefetch((const char *)blk + Q4X8_PREFETCH + 64, _MM_HINT_T0);                                \
			_mm_prefetch((const char *)blk + Q4X8_PREFETCH + 128, _MM_HINT_T0);                               \
			__m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));                               \
			__m256i lo[4], hi[4];                                                                             \
			for (int j = 0; j < 4; j++) {                                                                     \
				__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * j));                         \
				lo[j] = _mm256_and_si256(v, m4);                                                              \
				hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);                                        \
			}                                                                                                 \
			for (int t = 0; t < T; t++) {                                                                     \
				const int8_t *xb = q + (size_t)t * k + 32 * b;                                                \
				__m256i s[chains];                                                                            \
				UNROLL for (int i = 0; i < chains; i++) s[i] = _mm256_setzero_si256();                        \
				UNROLL for (int j = 0; j < 4; j++) {                                                          \
					int32_t wl, wh;                                                                           \
					memcpy(&wl, xb + 4 * j, 4);                                                               \
					memcpy(&wh, xb + 16 + 4 * j, 4);                                                          \
					s[j % chains] = mac(s[j % chains], lo[j], _mm256_set1_epi32(wl));                         \
					s[j % chains] = mac(s[j % chains], hi[j], _mm256_set1_epi32(wh));                         \
				}                                                                                             \
				UNROLL for (int i = 1; i < chains; i++) s[0] = _mm256_add_epi32(s[0], s[i]);                  \
				__m256i r = _mm256_add_epi32(widen(s[0]), _mm256_set1_epi32(xc[(size_t)t * nb + b]));        \
				__m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xd[(size_t)t * nb + b]));                         \
				acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(r), d, acc[t]);                                   \
			}                                                                                                 \
		}                                                                                                     \
		for (int t = 0; t < T; t++) _mm256_storeu_ps(dst + (size_t)t * m, acc[t]);                            \
	}

// AVX2 adds the products in int16 pairs and widens the sums at the end
// (vpmaddwd); VNNI adds them in int32 quads.
INLINE A2 __m256i q4x8_mac_avx2(__m256i s, __m256i u, __m256i x) {
	return _mm256_add_epi16(s, _mm256_maddubs_epi16(u, x));
}
INLINE A2 __m256i q4x8_widen_avx2(__m256i s) { return _mm256_madd_epi16(s, _mm256_set1_epi16(1)); }
INLINE A3 __m256i q4x8_mac_vnni(__m256i s, __m256i u, __m256i x) { return _mm256_dpbusd_epi32(s, u, x); }
INLINE A3 __m256i q4x8_widen_vnni(__m256i s) { return s; }

Q4X8_TILE(q4x8_tile, A2, q4x8_mac_avx2, q4x8_widen_avx2, 1)
Q4X8_TILE(q4x8_tile_vnni, A3, q4x8_mac_vnni, q4x8_widen_vnni, 2)

#define Q4X8_MATMAT(name, attr, tile)                                                                         \
	attr void name(const int8_t *q, const float *xd, const int32_t *xc, int n, int k, const uint8_t *w,        \
	               size_t rowBytes, int lo, int hi, float *dst, int m) {                                      \
		int nb = k / 32;                                                                                      \
		for (int o = lo; o + 8 <= hi; o += 8) {                                                               \
			const uint8_t *g = w + (size_t)o * rowBytes;                                                      \
			for (int t = 0; t < n; t += 4) {                                                                  \
				const int8_t *qt = q + (size_t)t * k;                                                         \
				const float *dt = xd + (size_t)t * nb;                                                        \
				const int32_t *ct = xc + (size_t)t * nb;                                                      \
				float *d = dst + (size_t)t * m + o;                                                           \
				switch (n - t < 4 ? n - t : 4) {                                                              \
				case 1: tile(1, qt, dt, ct, k, g, d, m); break;                                               \
				case 2: tile(2, qt, dt, ct, k, g, d, m); break;                                               \
				case 3: tile(3, qt, dt, ct, k, g, d, m); break;                                               \
				default: tile(4, qt, dt, ct, k, g, d, m); break;                                              \
				}                                                                                             \
			}                                                                                                 \
		}                                                                                                     \
	}
static Q4X8_MATMAT(matmat_q4x8_avx2, A2, q4x8_tile)
static Q4X8_MATMAT(matmat_q4x8_vnni, A3, q4x8_tile_vnni)

void glint_matmat_q4_0_x8(int level, const int8_t *q, const float *xd, const int32_t *xc, int n, int k,
                          const uint8_t *w, size_t rowBytes, glint_rows rows, float *dst, int m) {
	for (int lo, hi; glint_claim(&rows, &lo, &hi);) {
		(level >= 3 ? matmat_q4x8_vnni : matmat_q4x8_avx2)(q, xd, xc, n, k, w, rowBytes, lo, hi, dst, m);
	}
}

// ---------------------------------------------------------------- more block types
//
// Q8_0, the types below and the K-quants after them follow ggml's x86
// order (quant_lanes.go), not the one accumulator per output above: a
// block's dot product stays in eight exact int32 lanes, lane l holding
// elements 4l…4l+3 (what vpmaddwd or vpdpbusd leaves from a 32-byte block),
// each added by one fused multiply-add by d = dw·dx into eight float lanes,
// reduced by hsum8 at the end. Offsets of unsigned encodings are therefore
// taken off per lane, not per block.

#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q2_K 10
#define T_Q3_K 11
#define T_Q4_K 12
#define T_Q5_K 13
#define T_IQ4_NL 20
#define T_IQ4_XS 23

// kvalues_iq4nl, the 16 levels of IQ4_NL and IQ4_XS, as a pshufb table.
INLINE A2 __m256i iq4_table(void) {
	return _mm256_broadcastsi128_si256(
	    _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}

// q5_hbits spreads the 32 high bits of a Q5_0/Q5_1 block (bit e of the
// little-endian word at qh belongs to element e) to bytes 0x10 or 0 in
// element order, as q4_unpack lays out the nibbles.
INLINE A2 __m256i q5_hbits(const uint8_t *qh) {
	uint32_t h;
	memcpy(&h, qh, 4);
	const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
	                                        3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// Block dots for the 32-element types, given the block's first byte and
// the token's per-lane offset term c (see q32_corr): Q5_0 multiplies its
// unsigned q5 = q+16 (0…31) and takes off 16·qx per lane through c; Q4_1
// and Q5_1 are unsigned already (their min is a term of its own); IQ4_NL's
// levels are signed, so it multiplies |w| by qx with w's sign (ggml's trick:
// |w|·sign(qx, w), at most 2·127·127 per int16 pair; no level is 0, so sign
// never clears qx).
INLINE A2 __m256i madd1(__m256i p) { return _mm256_madd_epi16(p, _mm256_set1_epi16(1)); }

// q32_corr_* return the offset term of Q5_0 for activations x: AVX2 the
// int16 pair sums 16·(qx_2i + qx_2i+1), subtracted before the pairs are
// added; VNNI their negated lane sums, the vpdpbusd accumulator's start.
INLINE A2 __m256i q32_corr_avx2(__m256i x) { return _mm256_maddubs_epi16(_mm256_set1_epi8(16), x); }

INLINE A3 __m256i q32_corr_vnni(__m256i x) {
	return _mm256_sub_epi32(_mm256_setzero_si256(),
	                        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(16), x));
}

// q40_corr_* are q32_corr_* for Q4_0 in lanes (matrices whose rows are not
// a multiple of 8, see glint_matmat_q): its nibbles are stored as q+8.
INLINE A2 __m256i q40_corr_avx2(__m256i x) { return _mm256_maddubs_epi16(_mm256_set1_epi8(8), x); }

INLINE A3 __m256i q40_corr_vnni(__m256i x) {
	return _mm256_sub_epi32(_mm256_setzero_si256(),
	                        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), x));
}

// q80_corr_vnni is q40_corr_vnni for Q8_0, whose bytes become unsigned by
// flipping the sign bit (adding 128). AVX2 cannot take that offset: pairs of
// 255·127 overflow vpmaddubsw's int16, so it multiplies |qw| by qx with
// qw's sign instead (ggml's form: at most 2·128·127 per pair).
INLINE A3 __m256i q80_corr_vnni(__m256i x) {
	return _mm256_sub_epi32(_mm256_setzero_si256(),
	                        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), x));
}

INLINE A2 __m256i bdot_q5_0_avx2(__m256i c, const uint8_t *p, __m256i x) {
	__m256i u = _mm256_or_si256(q4_unpack(p + 6), q5_hbits(p + 2));
	return madd1(_mm256_sub_epi16(_mm256_maddubs_epi16(u, x), c));
}

INLINE A2 __m256i bdot_q4_1_avx2(__m256i c, const uint8_t *p, __m256i x) {
	(void)c;
	return madd1(_mm256_maddubs_epi16(q4_unpack(p + 4), x));
}

INLINE A2 __m256i bdot_q5_1_avx2(__m256i c, const uint8_t *p, __m256i x) {
	(void)c;
	__m256i u = _mm256_or_si256(q4_unpack(p + 8), q5_hbits(p + 4));
	return madd1(_mm256_maddubs_epi16(u, x));
}

INLINE A2 __m256i bdot_iq4nl_avx2(__m256i c, const uint8_t *p, __m256i x) {
	(void)c;
	__m256i v = _mm256_shuffle_epi8(iq4_table(), q4_unpack(p + 2));
	return madd1(_mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v)));
}

INLINE A2 __m256i bdot_q40l_avx2(__m256i c, const uint8_t *p, __m256i x) {
	return madd1(_mm256_sub_epi16(_mm256_maddubs_epi16(q4_unpack(p + 2), x), c));
}

INLINE A2 __m256i bdot_q8_0_avx2(__m256i c, const uint8_t *p, __m256i x) {
	(void)c;
	__m256i w = _mm256_loadu_si256((const __m256i *)(p + 2));
	return madd1(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)));
}

INLINE A3 __m256i bdot_q40l_vnni(__m256i c, const uint8_t *p, __m256i x) {
	return _mm256_dpbusd_epi32(c, q4_unpack(p + 2), x);
}

INLINE A3 __m256i bdot_q8_0_vnni(__m256i c, const uint8_t *p, __m256i x) {
	__m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + 2)), _mm256_set1_epi8((char)0x80));
	return _mm256_dpbusd_epi32(c, u, x);
}

INLINE A3 __m256i bdot_q5_0_vnni(__m256i c, const uint8_t *p, __m256i x) {
	return _mm256_dpbusd_epi32(c, _mm256_or_si256(q4_unpack(p + 6), q5_hbits(p + 2)), x);
}

INLINE A3 __m256i bdot_q4_1_vnni(__m256i c, const uint8_t *p, __m256i x) {
	(void)c;
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), q4_unpack(p + 4), x);
}

INLINE A3 __m256i bdot_q5_1_vnni(__m256i c, const uint8_t *p, __m256i x) {
	(void)c;
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_or_si256(q4_unpack(p + 8), q5_hbits(p + 4)), x);
}

INLINE A3 __m256i bdot_iq4nl_vnni(__m256i c, const uint8_t *p, __m256i x) {
	(void)c;
	__m256i v = _mm256_shuffle_epi8(iq4_table(), q4_unpack(p + 2));
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(v), _mm256_sign_epi8(x, v));
}

// fma1 is fmaf(a, b, c), one rounding, as the reference's fmaf.
INLINE A2 float fma1(float a, float b, float c) {
	return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// lane_fma is acc + d·(float)is per lane, one rounding each.
INLINE A2 __m256 lane_fma(float d, __m256i is, __m256 acc) {
	return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(is), acc);
}

// QTILEX defines a micro-kernel for R weight rows × T tokens of a
// 32-element type: each unpacked weight block and each activation block is
// loaded once and used T (R) times. usec says whether bdot takes the offset
// term corr, mn whether the weights have a min (Q4_1, Q5_1: f16 m after d),
// whose m·s (s the Q8_1 block sum) goes by fmaf into a scalar added after
// the reduction. With pairs (IQ4_NL decode: T = 1), even blocks go to one
// set of lanes and odd ones to another, and an odd last block is added by
// one scalar fmaf of its total, as ggml_vec_dot_iq4_nl_q8_0 does. pf: on
// the first tile of tokens over these rows, the rows a pass reads
// (QMATMATX's R0), whose next pass it prefetches (pf_pass); else 0.
#define QTILEX(name, attr, bdot, corr, bb, usec, mn)                                                          \
	INLINE attr void name(int R, int T, int pairs, int pf, const int8_t *q, const float *xd, const float *xs, \
	                      int k, const uint8_t *w, size_t rowBytes, float *dst, int m) {                     \
		__m256 acc[16], acc2[4];                                                                              \
		float summs[16];                                                                                      \
		for (int i = 0; i < 16; i++) acc[i] = _mm256_setzero_ps(), summs[i] = 0;                              \
		for (int i = 0; i < 4; i++) acc2[i] = _mm256_setzero_ps();                                            \
		int nb = k / 32, nbl = pairs ? nb & ~1 : nb;                                                          \
		for (int b = 0; b < nbl; b++) {                                                                       \
			float dw[4], mw[4];                                                                               \
			__m256 vw[4];                                                                                     \
			for (int r = 0; r < R; r++) {                                                                     \
				const uint8_t *p = w + r * rowBytes + (size_t)b * bb;                                         \
				if (pf) pf_pass(w, rowBytes, pf, b, r, bb);                                                    \
				dw[r] = f16tab[le16(p)];                                                                      \
				vw[r] = _mm256_set1_ps(dw[r]);                                                                \
				mw[r] = mn ? f16tab[le16(p + 2)] : 0;                                                         \
			}                                                                                                 \
			for (int t = 0; t < T; t++) {                                                                     \
				__m256i xv = _mm256_loadu_si256((const __m256i *)(q + (size_t)t * k + 32 * b));               \
				__m256i c = usec ? corr(xv) : _mm256_setzero_si256();                                         \
				float dx = xd[(size_t)t * nb + b], sx = mn ? xs[(size_t)t * nb + b] : 0;                      \
				__m256 vx = _mm256_set1_ps(dx);                                                               \
				for (int r = 0; r < R; r++) {                                                                 \
					__m256i dp = bdot(c, w + r * rowBytes + (size_t)b * bb, xv);                              \
					if (pairs && b % 2 == 1) {                                                                \
						acc2[r] = lane_fma(dw[r] * dx, dp, acc2[r]);                                          \
					} else {                                                                                  \
						acc[4 * r + t] = _mm256_fmadd_ps(_mm256_mul_ps(vw[r], vx), _mm256_cvtepi32_ps(dp),   \
						                                 acc[4 * r + t]);                                     \
					}                                                                                         \
					if (mn) summs[4 * r + t] = fma1(mw[r], sx, summs[4 * r + t]);                             \
				}                                                                                             \
			}                                                                                                 \
		}                                                                                                     \
		if (pairs && nb % 2 == 1) {                                                                           \
			int b = nb - 1;                                                                                   \
			__m256i xv = _mm256_loadu_si256((const __m256i *)(q + 32 * b));                                   \
			__m256i c = usec ? corr(xv) : _mm256_setzero_si256();                                             \
			for (int r = 0; r < R; r++) {                                                                     \
				const uint8_t *p = w + r * rowBytes + (size_t)b * bb;                                         \
				summs[4 * r] = fma1(f16tab[le16(p)] * xd[b], (float)hsum8i(bdot(c, p, xv)), summs[4 * r]);     \
			}                                                                                                 \
		}                                                                                                     \
		for (int r = 0; r < R; r++) {                                                                         \
			if (pairs) acc[4 * r] = _mm256_add_ps(acc[4 * r], acc2[r]);                                       \
			for (int t = 0; t < T; t++) dst[(size_t)t * m + r] = hsum8(acc[4 * r + t]) + summs[4 * r + t];    \
		}                                                                                                     \
	}

QTILEX(tile_q5_0_avx2, A2, bdot_q5_0_avx2, q32_corr_avx2, 22, 1, 0)
QTILEX(tile_q4_1_avx2, A2, bdot_q4_1_avx2, q32_corr_avx2, 20, 0, 1)
QTILEX(tile_q5_1_avx2, A2, bdot_q5_1_avx2, q32_corr_avx2, 24, 0, 1)
QTILEX(tile_iq4nl_avx2, A2, bdot_iq4nl_avx2, q32_corr_avx2, 18, 0, 0)
QTILEX(tile_q5_0_vnni, A3, bdot_q5_0_vnni, q32_corr_vnni, 22, 1, 0)
QTILEX(tile_q4_1_vnni, A3, bdot_q4_1_vnni, q32_corr_vnni, 20, 0, 1)
QTILEX(tile_q5_1_vnni, A3, bdot_q5_1_vnni, q32_corr_vnni, 24, 0, 1)
QTILEX(tile_iq4nl_vnni, A3, bdot_iq4nl_vnni, q32_corr_vnni, 18, 0, 0)
QTILEX(tile_q40l_avx2, A2, bdot_q40l_avx2, q40_corr_avx2, 18, 1, 0)
QTILEX(tile_q40l_vnni, A3, bdot_q40l_vnni, q40_corr_vnni, 18, 1, 0)
QTILEX(tile_q8_0_avx2, A2, bdot_q8_0_avx2, q32_corr_avx2, 34, 0, 0)
QTILEX(tile_q8_0_vnni, A3, bdot_q8_0_vnni, q80_corr_vnni, 34, 1, 0)

#define CASEX(tile, R, T) \
	case R * 8 + T: tile(R, T, pairs, t == 0 ? r0 : 0, qt, dt, st, k, wr, rowBytes, d, m); break;
#define CASESX(tile, R) CASEX(tile, R, 1) CASEX(tile, R, 2) CASEX(tile, R, 3) CASEX(tile, R, 4)

// QMATMATX runs the QTILEX tiles over every row and token (xs may be NULL
// where the tile does not read it). pairs: IQ4_NL decode (see QTILEX),
// whose single token runs tiles of T = 1. Call them with a literal pairs (not
// through a conditional function pointer): GCC then specialises them and
// keeps the tiles' accumulators in registers, where an unknown pairs left
// them on the stack.
#define QMATMATX(name, attr, tile, R0)                                                                   \
	static attr void name(int pairs, const int8_t *q, const float *xd, const float *xs, int n, int k,         \
	                      const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {              \
		int nb = k / 32, r0 = R0;                                                                             \
		for (int o = lo; o < hi; o += R0) {                                                                   \
			int R = hi - o < R0 ? hi - o : R0;                                                                \
			const uint8_t *wr = w + (size_t)o * rowBytes;                                                     \
			for (int t = 0; t < n; t += 4) {                                                                  \
				int T = n - t < 4 ? n - t : 4;                                                                \
				const int8_t *qt = q + (size_t)t * k;                                                         \
				const float *dt = xd + (size_t)t * nb;                                                        \
				const float *st = xs != NULL ? xs + (size_t)t * nb : NULL;                                    \
				float *d = dst + (size_t)t * m + o;                                                           \
				switch (R * 8 + T) {                                                                          \
				CASESX(tile, 1) CASESX(tile, 2) CASESX(tile, 3) CASESX(tile, 4)                               \
				}                                                                                             \
			}                                                                                                 \
		}                                                                                                     \
	}

// Q8TILE makes a prefill tile for Q8_0 in QTILEX's order: R ≤ RMAX rows ×
// T ≤ TMAX tokens. Each product's scale dw·dx is the same float32 multiply
// as ggml's, but eight blocks' at a time (dw widened once per tile of rows,
// in dwf), so that the multiply ports see only the integer dot and the
// multiply-add of each block; the scales then come as broadcasts from
// memory, which cost no vector port (8192×2048 × 128 tokens, one thread, at
// the AVX2 level: 80 → 88 GFLOP/s). wprep turns a weight block into what
// dot takes once for the T tokens, xprep a token's block once for the R
// rows, and dot(wp, w, x, xp) is one pair's eight int32 lanes.
#define Q8TILE(name, attr, RMAX, TMAX, wprep, xprep, dot)                                                     \
	INLINE attr void name(int R, int T, const int8_t *q, const float *xd, int k, const uint8_t *w,          \
	                      size_t rowBytes, const float *dwf, float *dst, int m) {                          \
		__m256 acc[RMAX][TMAX];                                                                           \
		float ds[RMAX][TMAX][8] __attribute__((aligned(32)));                                             \
		UNROLL                                                                                            \
		for (int r = 0; r < RMAX; r++) {                                                                  \
			UNROLL                                                                                        \
			for (int t = 0; t < TMAX; t++) acc[r][t] = _mm256_setzero_ps();                               \
		}                                                                                                 \
		int nb = k / 32;                                                                                  \
		for (int b0 = 0; b0 < nb; b0 += 8) {                                                              \
			int bn = nb - b0 < 8 ? nb - b0 : 8;                                                           \
			if (bn == 8) {                                                                                \
				UNROLL                                                                                    \
				for (int r = 0; r < R; r++) {                                                             \
					__m256 dw = _mm256_loadu_ps(dwf + (size_t)r * nb + b0);                               \
					UNROLL                                                                                \
					for (int t = 0; t < T; t++) {                                                         \
						_mm256_store_ps(ds[r][t], _mm256_mul_ps(dw, _mm256_loadu_ps(xd + (size_t)t * nb + b0))); \
					}                                                                                     \
				}                                                                                         \
			} else {                                                                                      \
				for (int r = 0; r < R; r++) {                                                             \
					for (int t = 0; t < T; t++) {                                                         \
						for (int j = 0; j < bn; j++) {                                                    \
							ds[r][t][j] = dwf[(size_t)r * nb + b0 + j] * xd[(size_t)t * nb + b0 + j];     \
						}                                                                                 \
					}                                                                                     \
				}                                                                                         \
			}                                                                                             \
			for (int j = 0; j < bn; j++) {                                                                \
				int b = b0 + j;                                                                           \
				__m256i wv[RMAX], wp[RMAX];                                                               \
				UNROLL                                                                                    \
				for (int r = 0; r < R; r++) {                                                             \
					wv[r] = _mm256_loadu_si256((const __m256i *)(w + r * rowBytes + (size_t)b * 34 + 2)); \
					wp[r] = wprep(wv[r]);                                                                 \
				}                                                                                         \
				UNROLL                                                                                    \
				for (int t = 0; t < T; t++) {                                                             \
					__m256i xv = _mm256_loadu_si256((const __m256i *)(q + (size_t)t * k + 32 * b));       \
					__m256i xp = xprep(xv);                                                               \
					UNROLL                                                                                \
					for (int r = 0; r < R; r++) {                                                         \
						__m256 f = _mm256_cvtepi32_ps(dot(wp[r], wv[r], xv, xp));                         \
						acc[r][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[r][t][j]), f, acc[r][t]);     \
					}                                                                                     \
				}                                                                                         \
			}                                                                                             \
		}                                                                                                 \
		UNROLL                                                                                            \
		for (int r = 0; r < R; r++) {                                                                     \
			UNROLL                                                                                        \
			for (int t = 0; t < T; t++) dst[(size_t)t * m + r] = hsum8(acc[r][t]);                        \
		}                                                                                                 \
	}

// The AVX2 tile multiplies |w| by x with w's sign (see q80_corr_vnni); 2 × 3
// keeps its accumulators in registers (2 × 4 spilled two). VNNI's takes w
// offset to unsigned and subtracts the offset's share, per token.
INLINE A2 __m256i q8_abs(__m256i w) { return _mm256_sign_epi8(w, w); }
INLINE A2 __m256i q8_none(__m256i x) { return x; }
INLINE A2 __m256i q8_dot_avx2(__m256i aw, __m256i w, __m256i x, __m256i xp) {
	(void)xp;
	return madd1(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w)));
}
INLINE A3 __m256i q8_unsigned(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)); }
INLINE A3 __m256i q8_dot_vnni(__m256i uw, __m256i w, __m256i x, __m256i c) {
	(void)w;
	return _mm256_dpbusd_epi32(c, uw, x);
}
Q8TILE(q8_tile_avx2, A2, 2, 3, q8_abs, q8_none, q8_dot_avx2)
Q8TILE(q8_tile_vnni, A3, 4, 4, q8_unsigned, q80_corr_vnni, q8_dot_vnni)

#define Q8CASE(tile, R, T) \
	case R * 8 + T: tile(R, T, qt, dt, k, wr, rowBytes, dwf, d, m); break;

// Q8MATMAT runs a Q8TILE over every row and token (prefill; decode and a few
// tokens take QMATMATX's tiles, which read the weights once for up to four
// tokens, as fast as memory delivers them).
#define Q8MATMAT(name, attr, RMAX, TMAX, cases)                                                        \
	static attr void name(const int8_t *q, const float *xd, int n, int k, const uint8_t *w, size_t rowBytes, \
	                      int lo, int hi, float *dst, int m) {                                                \
		int nb = k / 32;                                                                                     \
		float dwf[RMAX * nb];                                                                                \
		for (int o = lo; o < hi; o += RMAX) {                                                                \
			int R = hi - o < RMAX ? hi - o : RMAX;                                                           \
			const uint8_t *wr = w + (size_t)o * rowBytes;                                                    \
			for (int r = 0; r < R; r++) {                                                                    \
				for (int b = 0; b < nb; b++) dwf[r * nb + b] = f16tab[le16(wr + r * rowBytes + (size_t)b * 34)]; \
			}                                                                                                \
			for (int t = 0; t < n; t += TMAX) {                                                              \
				int T = n - t < TMAX ? n - t : TMAX;                                                         \
				const int8_t *qt = q + (size_t)t * k;                                                        \
				const float *dt = xd + (size_t)t * nb;                                                       \
				float *d = dst + (size_t)t * m + o;                                                          \
				switch (R * 8 + T) { cases }                                                                 \
			}                                                                                                \
		}                                                                                                    \
	}
Q8MATMAT(matmat_q8_avx2, A2, 2, 3,
         Q8CASE(q8_tile_avx2, 1, 1) Q8CASE(q8_tile_avx2, 1, 2) Q8CASE(q8_tile_avx2, 1, 3)
         Q8CASE(q8_tile_avx2, 2, 1) Q8CASE(q8_tile_avx2, 2, 2) Q8CASE(q8_tile_avx2, 2, 3))
Q8MATMAT(matmat_q8_vnni, A3, 4, 4,
         Q8CASE(q8_tile_vnni, 1, 1) Q8CASE(q8_tile_vnni, 1, 2) Q8CASE(q8_tile_vnni, 1, 3) Q8CASE(q8_tile_vnni, 1, 4)
         Q8CASE(q8_tile_vnni, 2, 1) Q8CASE(q8_tile_vnni, 2, 2) Q8CASE(q8_tile_vnni, 2, 3) Q8CASE(q8_tile_vnni, 2, 4)
         Q8CASE(q8_tile_vnni, 3, 1) Q8CASE(q8_tile_vnni, 3, 2) Q8CASE(q8_tile_vnni, 3, 3) Q8CASE(q8_tile_vnni, 3, 4)
         Q8CASE(q8_tile_vnni, 4, 1) Q8CASE(q8_tile_vnni, 4, 2) Q8CASE(q8_tile_vnni, 4, 3) Q8CASE(q8_tile_vnni, 4, 4))

QMATMATX(matmat_q5_0_avx2, A2, tile_q5_0_avx2, 2)
QMATMATX(matmat_q4_1_avx2, A2, tile_q4_1_avx2, 2)
QMATMATX(matmat_q5_1_avx2, A2, tile_q5_1_avx2, 2)
QMATMATX(matmat_iq4nl_avx2, A2, tile_iq4nl_avx2, 2)
QMATMATX(matmat_q5_0_vnni, A3, tile_q5_0_vnni, 4)
QMATMATX(matmat_q4_1_vnni, A3, tile_q4_1_vnni, 4)
QMATMATX(matmat_q5_1_vnni, A3, tile_q5_1_vnni, 4)
QMATMATX(matmat_iq4nl_vnni, A3, tile_iq4nl_vnni, 4)
QMATMATX(matmat_q40l_avx2, A2, tile_q40l_avx2, 2)
QMATMATX(matmat_q40l_vnni, A3, tile_q40l_vnni, 4)
QMATMATX(matmat_q8_0_avx2, A2, tile_q8_0_avx2, 2)
QMATMATX(matmat_q8_0_vnni, A3, tile_q8_0_vnni, 4)


// ---------------------------------------------------------------- K-quants and IQ4_XS
//
// ggml's x86 order (quant_lanes.go): per super-block, eight exact int32
// lanes, lane l holding the elements 4l…4l+3 of every 32-element chunk
// times their group's scale, which is what vpmaddwd leaves when a chunk's
// vpmaddubsw pair sums meet its 32 activations; then one fused
// multiply-add per block into eight float lanes, and hsum8 at the end.
// Offsets of unsigned encodings (Q6_K's 32, Q3_K's 4) are therefore taken
// off per pair of products, as ggml does, not from the group sums; the mins
// of Q2_K, Q4_K and Q5_K do come from the group sums bs, in each type's own
// accumulator. One row's super-block is unpacked once and multiplied
// against T tokens (T ≤ 4; decode is T = 1).

// kq_prefetch asks for the super-block pf bytes further on: rows are read
// in order, and the hardware prefetchers stop at each 4 KiB page.
INLINE void kq_prefetch(const uint8_t *blk, size_t bytes, size_t pf) {
	for (size_t i = 0; i < bytes; i += 64) {
		_mm_prefetch((const char *)(blk + pf + i), _MM_HINT_T0);
	}
}

// scale_pair broadcasts, from 8 int16 scales in each 128-bit lane of s8,
// scale 2j to the lower lane and 2j+1 to the upper: the groups of 16 whose
// pair sums vpmaddubsw leaves in those lanes.
INLINE A2 __m256i scale_pair(__m256i s8, int j) {
	const __m256i sh = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
	                                    2, 3, 2, 3, 2, 3);
	return _mm256_shuffle_epi8(s8, _mm256_add_epi8(sh, _mm256_set1_epi8((char)(4 * j))));
}

// bit_to moves bit `from` of every byte of v to bit `to`, other bits zero.
INLINE A2 __m256i bit_to(__m256i v, int from, int to) {
	if (from > to) {
		v = _mm256_srli_epi16(v, from - to);
	} else if (from < to) {
		v = _mm256_slli_epi16(v, to - from);
	}
	return _mm256_and_si256(v, _mm256_set1_epi8((char)(1 << to)));
}

// k4_scales unpacks Q4_K's and Q5_K's eight 6-bit scales (bytes 0-7 of
// the result) and mins (8-15) from their 12 bytes (ggml's
// get_scale_min_k4, four at a time).
INLINE A2 __m128i k4_scales(const uint8_t *p) {
	uint32_t a0, a1, a2;
	memcpy(&a0, p, 4);
	memcpy(&a1, p + 4, 4);
	memcpy(&a2, p + 8, 4);
	const uint32_t k6 = 0x3F3F3F3F, k4 = 0x0F0F0F0F, k2 = 0x03030303;
	return _mm_setr_epi32((int)(a0 & k6), (int)((a2 & k4) | (a0 >> 6 & k2) << 4), (int)(a1 & k6),
	                      (int)((a2 >> 4 & k4) | (a1 >> 6 & k2) << 4));
}

// q3k_scales unpacks Q3_K's sixteen signed 6-bit scales (dtype's
// q3KScales), four at a time: low 4 bits from bytes 0-7 (low then high
// nibbles), high 2 bits from bytes 8-11 (bit pairs 0, 2, 4, 6).
INLINE A2 __m128i q3k_scales(const uint8_t *p) {
	uint32_t a0, a1, a2;
	memcpy(&a0, p, 4);
	memcpy(&a1, p + 4, 4);
	memcpy(&a2, p + 8, 4);
	const uint32_t k4 = 0x0F0F0F0F, k2 = 0x03030303;
	__m128i sc = _mm_setr_epi32((int)((a0 & k4) | (a2 & k2) << 4), (int)((a1 & k4) | (a2 >> 2 & k2) << 4),
	                            (int)((a0 >> 4 & k4) | (a2 >> 4 & k2) << 4), (int)((a1 >> 4 & k4) | (a2 >> 6 & k2) << 4));
	return _mm_sub_epi8(sc, _mm_set1_epi8(32));
}

// bcast16 broadcasts int16 element j of each 128-bit lane of v.
INLINE A2 __m256i bcast16(__m256i v, int j) {
	return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)((2 * j + 1) << 8 | 2 * j)));
}

// hsum4 reduces Q4_K's four min lanes as ggml does: (m0+m2) + (m1+m3).
INLINE A2 float hsum4(__m128 a) {
	a = _mm_add_ps(a, _mm_movehl_ps(a, a));
	a = _mm_add_ss(a, _mm_movehdup_ps(a));
	return _mm_cvtss_f32(a);
}

// q6k_unpack rebuilds the 6-bit values (0…63, the stored q+32) of the four
// 32-element groups of one 128-element half of a Q6_K super-block (ggml's
// layout: low nibbles in ql, two high bits each in qh).
INLINE A2 void q6k_unpack(const uint8_t *ql, const uint8_t *qh, __m256i q[4]) {
	const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
	__m256i a = _mm256_loadu_si256((const __m256i *)ql);
	__m256i c = _mm256_loadu_si256((const __m256i *)(ql + 32));
	__m256i h = _mm256_loadu_si256((const __m256i *)qh);
	q[0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
	q[1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
	q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(h, m30));
	q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
}

// q4k_lanes computes out[t·os] = token t's dot with one Q4_K (five: Q5_K)
// row, for tokens at q + t*k (scales xd + t*nb, group sums bs + t*k/16).
// Group 2i is the low nibbles of bytes 32i…32i+31, group 2i+1 their high
// nibbles (Q5_K: plus bit g of the qh byte at the same offset). Q4_K keeps
// its mins in four lanes of their own, Q5_K in one scalar (quant_lanes.go).
INLINE A2 void q4k_lanes(int T, int five, const int8_t *q, const float *xd, const int16_t *bs, int k,
                         const uint8_t *wr, size_t pf, float *out, size_t os) {
	const size_t bb = five ? 176 : 144, qo = five ? 48 : 16;
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	int nb = k / 256;
	__m256 acc[4];
	__m128 accm[4];
	float summs[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
		accm[t] = _mm_setzero_ps();
		summs[t] = 0;
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *p = wr + (size_t)b * bb;
		if (pf) {
			kq_prefetch(p, bb, pf);
		}
		__m128i sm = k4_scales(p + 4);
		__m256i s8 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
		__m128i m8 = _mm_srli_si128(sm, 8);
		__m256i mm = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
		float dw = f16tab[le16(p)], mw = f16tab[le16(p + 2)];
		for (int t = 0; t < T; t++) {
			// Lane j: m_j·(bs[2j] + bs[2j+1]); pairs of lanes are ggml's
			// four min products.
			__m256i ms = _mm256_madd_epi16(mm, _mm256_loadu_si256((const __m256i *)(bs + (size_t)t * (k / 16) + 16 * b)));
			float dmin = -xd[(size_t)t * nb + b] * mw;
			if (five) {
				summs[t] = fma1(dmin, (float)hsum8i(ms), summs[t]);
			} else {
				__m128i p4 = _mm_hadd_epi32(_mm256_castsi256_si128(ms), _mm256_extracti128_si256(ms, 1));
				accm[t] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(p4), accm[t]);
			}
		}
		__m256i is[4];
		for (int t = 0; t < 4; t++) {
			is[t] = _mm256_setzero_si256();
		}
		__m256i qh = five ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
		for (int i = 0; i < 4; i++) {
			__m256i qv = _mm256_loadu_si256((const __m256i *)(p + qo + 32 * i));
			__m256i lo = _mm256_and_si256(qv, m4), hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
			if (five) {
				lo = _mm256_or_si256(lo, bit_to(qh, 2 * i, 4));
				hi = _mm256_or_si256(hi, bit_to(qh, 2 * i + 1, 4));
			}
			__m256i sa = bcast16(s8, 2 * i), sb = bcast16(s8, 2 * i + 1);
			for (int t = 0; t < T; t++) {
				const int8_t *xb = q + (size_t)t * k + 256 * b + 64 * i;
				__m256i pa = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)xb)), sa);
				__m256i pb = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xb + 32))), sb);
				is[t] = _mm256_add_epi32(is[t], _mm256_add_epi32(pa, pb));
			}
		}
		for (int t = 0; t < T; t++) {
			acc[t] = lane_fma(dw * xd[(size_t)t * nb + b], is[t], acc[t]);
		}
	}
	for (int t = 0; t < T; t++) {
		out[t * os] = hsum8(acc[t]) + (five ? summs[t] : hsum4(accm[t]));
	}
}

// q6k_lanes is q4k_lanes for Q6_K: the stored q+32 (0…63) times qx in
// vpmaddubsw pairs, less 32·qx in pairs (ggml's m32s), then the group's
// signed scale by vpmaddwd.
INLINE A2 void q6k_lanes(int T, const int8_t *q, const float *xd, const int16_t *bs, int k, const uint8_t *wr,
                         size_t pf, float *out, size_t os) {
	(void)bs;
	const __m256i m32 = _mm256_set1_epi8(32);
	int nb = k / 256;
	__m256 acc[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = wr + (size_t)b * 210;
		if (pf) {
			kq_prefetch(blk, 210, pf);
		}
		const int8_t *sc = (const int8_t *)(blk + 192);
		__m256i is[4];
		for (int t = 0; t < 4; t++) {
			is[t] = _mm256_setzero_si256();
		}
		for (int half = 0; half < 2; half++) {
			__m256i qv[4];
			q6k_unpack(blk + 64 * half, blk + 128 + 32 * half, qv);
			__m256i s8 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(sc + 8 * half))));
			for (int j = 0; j < 4; j++) {
				__m256i sj = scale_pair(s8, j);
				for (int t = 0; t < T; t++) {
					__m256i x = _mm256_loadu_si256((const __m256i *)(q + (size_t)t * k + 256 * b + 128 * half + 32 * j));
					__m256i pr = _mm256_sub_epi16(_mm256_maddubs_epi16(qv[j], x), _mm256_maddubs_epi16(m32, x));
					is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(pr, sj));
				}
			}
		}
		float dw = f16tab[le16(blk + 208)];
		for (int t = 0; t < T; t++) {
			acc[t] = lane_fma(dw * xd[(size_t)t * nb + b], is[t], acc[t]);
		}
	}
	for (int t = 0; t < T; t++) {
		out[t * os] = hsum8(acc[t]);
	}
}

// q23k_lanes is q4k_lanes for Q2_K and (three) Q3_K. The 2-bit values of
// element 128h+32j+i are bits 2j of byte i of the h-th 32 bytes; its group
// is 8h+2j+i/16. Q3_K's value is u − 4 with u = q2 + 4·hbit (0…7; the high
// bit of element 128h+32j+i is bit 4h+j of hmask byte i), the 4·qx taken
// off in pairs; Q2_K's mins go into the same lanes before the block's
// scaled sums, lane l getting m_2l·bs_2l + m_2l+1·bs_2l+1.
INLINE A2 void q23k_lanes(int T, int three, const int8_t *q, const float *xd, const int16_t *bs, int k,
                          const uint8_t *wr, size_t pf, float *out, size_t os) {
	const size_t bb = three ? 110 : 84, qo = three ? 32 : 16;
	const __m128i m4 = _mm_set1_epi8(0x0F);
	const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
	int nb = k / 256;
	__m256 acc[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = wr + (size_t)b * bb;
		if (pf) {
			kq_prefetch(blk, bb, pf);
		}
		__m128i sc;
		if (three) {
			sc = q3k_scales(blk + 96);
		} else {
			sc = _mm_loadu_si128((const __m128i *)blk);
			__m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
			float mw = f16tab[le16(blk + 82)];
			for (int t = 0; t < T; t++) {
				__m256i ms = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)(bs + (size_t)t * (k / 16) + 16 * b)));
				acc[t] = lane_fma(-xd[(size_t)t * nb + b] * mw, ms, acc[t]);
			}
			sc = _mm_and_si128(sc, m4);
		}
		__m256i is[4];
		for (int t = 0; t < 4; t++) {
			is[t] = _mm256_setzero_si256();
		}
		__m256i hm = three ? _mm256_loadu_si256((const __m256i *)blk) : _mm256_setzero_si256();
		for (int h = 0; h < 2; h++) {
			__m256i qv = _mm256_loadu_si256((const __m256i *)(blk + qo + 32 * h));
			__m256i s8 = _mm256_broadcastsi128_si256(three ? _mm_cvtepi8_epi16(h ? _mm_srli_si128(sc, 8) : sc)
			                                               : _mm_cvtepu8_epi16(h ? _mm_srli_si128(sc, 8) : sc));
			for (int j = 0; j < 4; j++) {
				__m256i u = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
				if (three) {
					u = _mm256_or_si256(u, bit_to(hm, 4 * h + j, 2));
				}
				__m256i sj = scale_pair(s8, j);
				for (int t = 0; t < T; t++) {
					__m256i x = _mm256_loadu_si256((const __m256i *)(q + (size_t)t * k + 256 * b + 128 * h + 32 * j));
					__m256i pr = _mm256_maddubs_epi16(u, x);
					if (three) {
						pr = _mm256_sub_epi16(pr, _mm256_maddubs_epi16(four, x));
					}
					is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(pr, sj));
				}
			}
		}
		float dw = f16tab[le16(blk + (three ? 108 : 80))];
		for (int t = 0; t < T; t++) {
			acc[t] = lane_fma(dw * xd[(size_t)t * nb + b], is[t], acc[t]);
		}
	}
	for (int t = 0; t < T; t++) {
		out[t * os] = hsum8(acc[t]);
	}
}

// iq4xs_lanes is q4k_lanes for IQ4_XS: eight IQ4_NL-like groups of 32 (16
// bytes each, laid out as Q4_0's), with scale ls_j − 32. The signed levels
// multiply as ggml's |w|·sign(qx, w) (Q8_K quants are within ±127, so the
// sign never overflows).
INLINE A2 void iq4xs_lanes(int T, const int8_t *q, const float *xd, const int16_t *bs, int k, const uint8_t *wr,
                           size_t pf, float *out, size_t os) {
	(void)bs;
	const __m256i kv = iq4_table();
	int nb = k / 256;
	__m256 acc[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = wr + (size_t)b * 136;
		if (pf) {
			kq_prefetch(blk, 136, pf);
		}
		uint32_t sl, sh = le16(blk + 2);
		memcpy(&sl, blk + 4, 4);
		__m256i is[4];
		for (int t = 0; t < 4; t++) {
			is[t] = _mm256_setzero_si256();
		}
		for (int j = 0; j < 8; j++) {
			int ls = (int)((sl >> (4 * j) & 0xF) | (sh >> (2 * j) & 3) << 4) - 32;
			__m256i v = _mm256_shuffle_epi8(kv, q4_unpack(blk + 8 + 16 * j));
			__m256i va = _mm256_sign_epi8(v, v), lv = _mm256_set1_epi16((short)ls);
			for (int t = 0; t < T; t++) {
				__m256i x = _mm256_loadu_si256((const __m256i *)(q + (size_t)t * k + 256 * b + 32 * j));
				__m256i p = _mm256_maddubs_epi16(va, _mm256_sign_epi8(x, v));
				is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(p, lv));
			}
		}
		float dw = f16tab[le16(blk)];
		for (int t = 0; t < T; t++) {
			acc[t] = lane_fma(dw * xd[(size_t)t * nb + b], is[t], acc[t]);
		}
	}
	for (int t = 0; t < T; t++) {
		out[t * os] = hsum8(acc[t]);
	}
}

// matmat_kq_avx2 runs the kernels above over every row for tiles of 4
// tokens (ty: the type). Rows go in blocks of about 16 KiB, every tile of
// tokens over a block before the next, so that a block read once from
// memory serves the further tiles from L1. The first tile prefetches two
// rows ahead, for n > 1 as for decode: several tokens' arithmetic per block
// leaves the memory stalls uncovered all the more.
static A2 void matmat_kq_avx2(int ty, const int8_t *q, const float *xd, const int16_t *bs, int n, int k,
                              const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {
	int nb = k / 256;
	int rb = rowBytes >= 16384 ? 1 : (int)(16384 / rowBytes);
	for (int o0 = lo; o0 < hi; o0 += rb) {
		int o1 = hi - o0 < rb ? hi : o0 + rb;
		for (int t0 = 0; t0 < n; t0 += 4) {
			int T = n - t0 < 4 ? n - t0 : 4;
			const int8_t *qt = q + (size_t)t0 * k;
			const float *dt = xd + (size_t)t0 * nb;
			const int16_t *bt = bs + (size_t)t0 * (k / 16);
			size_t pf = t0 == 0 ? 2 * rowBytes : 0;
			for (int o = o0; o < o1; o++) {
				const uint8_t *wr = w + (size_t)o * rowBytes;
				float *d = dst + (size_t)t0 * m + o;
				switch (ty * 8 + T) {
#define KQ(T)                                                                                  \
	case T_Q4_K * 8 + T: q4k_lanes(T, 0, qt, dt, bt, k, wr, pf, d, m); break;              \
	case T_Q5_K * 8 + T: q4k_lanes(T, 1, qt, dt, bt, k, wr, pf, d, m); break;              \
	case T_Q6_K * 8 + T: q6k_lanes(T, qt, dt, bt, k, wr, pf, d, m); break;                 \
	case T_Q2_K * 8 + T: q23k_lanes(T, 0, qt, dt, bt, k, wr, pf, d, m); break;             \
	case T_Q3_K * 8 + T: q23k_lanes(T, 1, qt, dt, bt, k, wr, pf, d, m); break;             \
	case T_IQ4_XS * 8 + T: iq4xs_lanes(T, qt, dt, bt, k, wr, pf, d, m); break;
				KQ(1) KQ(2) KQ(3) KQ(4)
#undef KQ
				}
			}
		}
	}
}


// DECODE_KMAX bounds k for the per-call activation layouts of the K-quant
// decode kernels below, which live on the (C) stack: about 2k bytes.
#define DECODE_KMAX 16384

// ---------------------------------------------------------------- AVX-512: K-quant decode
//
// One token against Q4_K weights spends much of q4k_lanes's instructions
// outside the multiplies: unpacking each super-block's scales and mins. The
// decode kernels here (AVX-512 F/BW, every level from 2) share that work
// among four rows, and multiply in 512-bit vectors, two 32-element chunks
// each. A chunk sits in one 256-bit half, so adding the halves (exact, in
// int32) gives the block's eight lanes as quant_lanes.go defines them; then
// each row's lanes take their fused multiply-add as in q4k_lanes.
//
// Q4_K: the 64 bytes of nibbles at 32i hold groups 4i (low nibbles, first
// 32 bytes), 4i+2 (low, last 32), 4i+1 and 4i+3 (high), so the activations
// are laid out once per call to match, and each group's scale reaches its
// pair sums by one vpshufb. The four rows' scales and mins are unpacked
// together (one 4 × 4 transpose of the first 16 bytes of each block, then
// the get_scale_min_k4 bit arithmetic on all four at once), and their min
// products are ggml's four per row, one row per 128-bit lane. Q5_K adds its
// fifth bits with a byte mask.

// lane_totals4 returns the totals of each 128-bit lane of v.
INLINE A5 __m128i lane_totals4(__m512i v) {
	v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0x4E));
	v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)0xB1));
	return _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v));
}

// lane_bcast broadcasts 128-bit lane r of v.
INLINE A5 __m512i lane_bcast(__m512i v, int r) {
	switch (r) {
	case 0: return _mm512_shuffle_i32x4(v, v, 0x00);
	case 1: return _mm512_shuffle_i32x4(v, v, 0x55);
	case 2: return _mm512_shuffle_i32x4(v, v, 0xAA);
	default: return _mm512_shuffle_i32x4(v, v, 0xFF);
	}
}

// fold8 adds the two 256-bit halves of v: the lanes of two chunks.
INLINE A5 __m256i fold8(__m512i v) {
	return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// k4_ctl is the vpshufb control that spreads int16 scale s0 over 128-bit
// lanes 0-1 and s1 over lanes 2-3.
INLINE A5 __m512i k4_ctl(int s0, int s1) {
	uint8_t c[64];
	for (int i = 0; i < 64; i++) {
		int s = i < 32 ? s0 : s1;
		c[i] = (uint8_t)(2 * s + (i & 1));
	}
	return _mm512_loadu_si512(c);
}

// qh_bit4 adds 16 to the bytes of v whose fifth bit (Q5_K) is set: bit lo
// of the byte of qh at the same offset for v's first 32 bytes, bit hi for
// its last 32 (qh holds the 32 bytes twice).
INLINE A5 __m512i qh_bit4(__m512i v, __m512i qh, int lo, int hi) {
	__m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << lo)), _mm256_set1_epi8((char)(1 << hi)), 1);
	return _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(qh, sel), v, _mm512_set1_epi8(0x10));
}

// q4k_decode_rows computes the dots of R rows (R ≤ 4) with the laid-out
// activations xr (bsp: the sums of activation groups 2j and 2j+1), in
// out[0…R-1], for Q4_K or (five) Q5_K, whose fifth bit of group g is bit g
// of the qh byte at the same offset as the value's nibble byte.
INLINE A5 void q4k_decode_rows(int R, int five, const int8_t *xr, const int16_t *bsp, const float *xd, int nb,
                               const uint8_t *w, size_t rowBytes, float *out) {
	const size_t bb = five ? 176 : 144, qo = five ? 48 : 16;
	const __m512i m4 = _mm512_set1_epi8(0x0F);
	const __m512i c00 = k4_ctl(0, 2), c01 = k4_ctl(1, 3), c10 = k4_ctl(4, 6), c11 = k4_ctl(5, 7);
	const __m128i k6 = _mm_set1_epi32(0x3F3F3F3F), k4 = _mm_set1_epi32(0x0F0F0F0F), k2 = _mm_set1_epi32(0x03030303);
	__m256 acc[4];
	for (int r = 0; r < 4; r++) {
		acc[r] = _mm256_setzero_ps();
	}
	// Row r's min lanes in 128-bit lane r: Q4_K's four, Q5_K's one scalar.
	__m512 accm = _mm512_setzero_ps();
	__m128 summs = _mm_setzero_ps();
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + (size_t)b * bb;
		// Words: d and dmin, then the 12 bytes of scales and mins.
		__m128i v[4];
		for (int r = 0; r < 4; r++) {
			v[r] = r < R ? _mm_loadu_si128((const __m128i *)(blk + r * rowBytes)) : _mm_setzero_si128();
		}
		__m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpacklo_epi32(v[2], v[3]);
		__m128i t2 = _mm_unpackhi_epi32(v[0], v[1]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
		__m128i dd = _mm_unpacklo_epi64(t0, t1), a0 = _mm_unpackhi_epi64(t0, t1);
		__m128i a1 = _mm_unpacklo_epi64(t2, t3), a2 = _mm_unpackhi_epi64(t2, t3);
		// get_scale_min_k4 on four rows (one per 32-bit lane): see k4_scales.
		__m128i slo = _mm_and_si128(a0, k6), mlo = _mm_and_si128(a1, k6);
		__m128i shi = _mm_or_si128(_mm_and_si128(a2, k4), _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(a0, 6), k2), 4));
		__m128i mhi = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(a2, 4), k4),
		                           _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(a1, 6), k2), 4));
		// Row r's eight scales (mins) as int16 in 128-bit lane r.
		__m512i S = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi32(slo, shi), _mm_unpacklo_epi32(slo, shi)));
		__m512i M = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi32(mlo, mhi), _mm_unpacklo_epi32(mlo, mhi)));
		__m512i bp = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(bsp + 8 * b)));
		__m512i mp = _mm512_madd_epi16(M, bp);
		// d·dx in lanes 0-3, dmin·dx in 4-7 (rows in order).
		__m128 dx = _mm_set1_ps(xd[b]);
		__m256 dw = _mm256_cvtph_ps(dd);
		dw = _mm256_permutevar8x32_ps(dw, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
		__m128 dwd = _mm_mul_ps(_mm256_castps256_ps128(dw), dx);
		__m128 dwm = _mm_mul_ps(_mm256_extractf128_ps(dw, 1), _mm_sub_ps(_mm_setzero_ps(), dx));
		if (five) {
			summs = _mm_fmadd_ps(dwm, _mm_cvtepi32_ps(lane_totals4(mp)), summs);
		} else {
			__m512 dm16 = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
			                                    _mm512_castps128_ps512(dwm));
			accm = _mm512_fmadd_ps(dm16, _mm512_cvtepi32_ps(mp), accm);
		}
		const int8_t *xb = xr + 256 * b;
		__m512i x00 = _mm512_loadu_si512(xb), x01 = _mm512_loadu_si512(xb + 64);
		__m512i x10 = _mm512_loadu_si512(xb + 128), x11 = _mm512_loadu_si512(xb + 192);
		float ds[4];
		_mm_storeu_ps(ds, dwd);
		for (int r = 0; r < R; r++) {
			const uint8_t *p = blk + r * rowBytes;
			pf_pass(w, rowBytes, 4, b, r, bb);
			__m512i q0 = _mm512_loadu_si512(p + qo), q1 = _mm512_loadu_si512(p + qo + 64);
			__m512i l0 = _mm512_and_si512(q0, m4), h0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
			__m512i l1 = _mm512_and_si512(q1, m4), h1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
			if (five) {
				__m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
				l0 = qh_bit4(l0, qh, 0, 2);
				h0 = qh_bit4(h0, qh, 1, 3);
				l1 = qh_bit4(l1, qh, 4, 6);
				h1 = qh_bit4(h1, qh, 5, 7);
			}
			__m512i sr = lane_bcast(S, r);
			__m512i a = _mm512_madd_epi16(_mm512_maddubs_epi16(l0, x00), _mm512_shuffle_epi8(sr, c00));
			__m512i c = _mm512_madd_epi16(_mm512_maddubs_epi16(h0, x01), _mm512_shuffle_epi8(sr, c01));
			a = _mm512_add_epi32(a, _mm512_madd_epi16(_mm512_maddubs_epi16(l1, x10), _mm512_shuffle_epi8(sr, c10)));
			c = _mm512_add_epi32(c, _mm512_madd_epi16(_mm512_maddubs_epi16(h1, x11), _mm512_shuffle_epi8(sr, c11)));
			acc[r] = lane_fma(ds[r], fold8(_mm512_add_epi32(a, c)), acc[r]);
		}
	}
	float sm[4], am[16];
	_mm_storeu_ps(sm, summs);
	_mm512_storeu_ps(am, accm);
	for (int r = 0; r < R; r++) {
		out[r] = hsum8(acc[r]) + (five ? sm[r] : hsum4(_mm_loadu_ps(am + 4 * r)));
	}
}

// matvec_q4k_512 lays out the activations for q4k_decode_rows (per 128
// elements: 0-31, 64-95, 32-63, 96-127, the order of the nibble groups) and
// the pair sums of the group sums, then runs it over the rows four at a
// time.
static A5 void matvec_q4k_512(int five, const int8_t *q, const float *xd, const int16_t *bs, int k, const uint8_t *w,
                              size_t rowBytes, int lo, int hi, float *dst) {
	int nb = k / 256;
	int8_t xr[k + 64] __attribute__((aligned(64)));
	int16_t bsp[k / 32 + 8] __attribute__((aligned(64)));
	for (int h = 0; h < k / 128; h++) {
		const int8_t *s = q + 128 * h;
		int8_t *d = xr + 128 * h;
		memcpy(d, s, 32);
		memcpy(d + 32, s + 64, 32);
		memcpy(d + 64, s + 32, 32);
		memcpy(d + 96, s + 96, 32);
	}
	for (int j = 0; j < k / 32; j++) {
		bsp[j] = (int16_t)(bs[2 * j] + bs[2 * j + 1]);
	}
	for (int o = lo; o < hi; o += 4) {
		int R = hi - o < 4 ? hi - o : 4;
		const uint8_t *wr = w + (size_t)o * rowBytes;
		switch (R) {
#define Q4KR(R)                                                                 \
	if (five) {                                                                 \
		q4k_decode_rows(R, 1, xr, bsp, xd, nb, wr, rowBytes, dst + o);      \
	} else {                                                                    \
		q4k_decode_rows(R, 0, xr, bsp, xd, nb, wr, rowBytes, dst + o);      \
	}                                                                           \
	break;
		case 1: Q4KR(1)
		case 2: Q4KR(2)
		case 3: Q4KR(3)
		default: Q4KR(4)
#undef Q4KR
		}
	}
}

// The two ways of a product: at AVX-512, vpmaddubsw pairs less the 32·qx
// pairs c (int16), then the scales by vpmaddwd; with VNNI, vpdpbusd's sums
// of four on top of c = −32·(sum of the four qx) (int32), then the scale by
// vpdpwssd, whose int32 lanes hold it in the low int16 and 0 in the high.
// The sums of four of the stored q−32 times qx fit in int16 (|·| ≤
// 4·32·127), so the high half of each, its sign, meets the 0. Both leave
// the same sums of four in the same int32 lanes, so the same bits; VNNI
// takes two instructions for four.
INLINE A5 __m512i q6k_mac_512(__m512i a, __m512i u, __m512i x, __m512i c, __m512i sv) {
	return _mm512_add_epi32(a, _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(u, x), c), sv));
}
INLINE A3 __m512i q6k_mac_vnni(__m512i a, __m512i u, __m512i x, __m512i c, __m512i sv) {
	return _mm512_dpwssd_epi32(a, _mm512_dpbusd_epi32(c, u, x), sv);
}
INLINE A5 __m512i q6k_corr_512(__m512i x) { return _mm512_maddubs_epi16(_mm512_set1_epi8(32), x); }
INLINE A3 __m512i q6k_corr_vnni(__m512i x) {
	return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32), x));
}
// The vpshufb controls that spread group scales (int32 lanes of ss, see
// above) for vector v of a super-block: the int16 twice, or once over 0.
INLINE A5 __m512i q6k_sctl_512(int v) { return _mm512_set1_epi16((short)((4 * v + 1) << 8 | 4 * v)); }
INLINE A5 __m512i q6k_sctl_vnni(int v) { return _mm512_set1_epi32((int)(0x80800000u | (unsigned)((4 * v + 1) << 8 | 4 * v))); }

// q6k_unpack512 rebuilds the stored values (0…63) of 64-element vectors
// 2h and 2h+1 of super-block p, in the order the activations keep.
INLINE A5 void q6k_unpack512(const uint8_t *p, int h, __m512i u[2]) {
	const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
	// Shift counts for the high bit pairs: elements 0-31 of a half take
	// bits 0-1 (low nibbles) or 4-5 (high), elements 32-63 bits 2-3 or 6-7.
	const __m512i sl = _mm512_setr_epi64(4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL,
	                                     4 * 0x0001000100010001LL, 2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL,
	                                     2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL);
	const __m512i sr = _mm512_setr_epi64(0, 0, 0, 0, 2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL,
	                                     2 * 0x0001000100010001LL, 2 * 0x0001000100010001LL);
	__m512i ql = _mm512_loadu_si512(p + 64 * h);
	__m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
	u[0] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, sl), m30));
	u[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(qh, sr), m30));
}

// q6k_scales512 is super-block p's group scales as int32: lane L holds
// those of groups L, L+4, L+8 and L+12, for vpshufb to spread.
INLINE A5 __m512i q6k_scales512(const uint8_t *p) {
	const __m128i order = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	return _mm512_cvtepi8_epi32(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 192)), order));
}

// Q6K_DECODE defines name(R, …), the dots of R rows (R ≤ 4) with
// activations q, in out[0…R-1], by mac, corr and sctl (see above).
#define Q6K_DECODE(name, attr, mac, corr, sctl)                                                                    \
	INLINE attr void name(int R, const int8_t *q, const float *xd, int nb, const uint8_t *w, size_t rowBytes,    \
	                      float *out) {                                                                          \
		__m512i ctl[4];                                                                                          \
		for (int v = 0; v < 4; v++) ctl[v] = sctl(v);                                                            \
		__m256 acc[4];                                                                                           \
		for (int r = 0; r < 4; r++) acc[r] = _mm256_setzero_ps();                                                \
		for (int b = 0; b < nb; b++) {                                                                           \
			const uint8_t *blk = w + (size_t)b * 210;                                                            \
			const int8_t *xb = q + 256 * b;                                                                      \
			__m512i x[4], c[4];                                                                                  \
			for (int i = 0; i < 4; i++) {                                                                        \
				x[i] = _mm512_loadu_si512(xb + 64 * i);                                                          \
				c[i] = corr(x[i]);                                                                               \
			}                                                                                                    \
			for (int r = 0; r < R; r++) {                                                                        \
				const uint8_t *p = blk + r * rowBytes;                                                           \
				pf_pass(w, rowBytes, 4, b, r, 210);                                                              \
				__m512i ss = q6k_scales512(p), u[4];                                                             \
				q6k_unpack512(p, 0, u);                                                                          \
				q6k_unpack512(p, 1, u + 2);                                                                      \
				__m512i a = _mm512_setzero_si512();                                                              \
				for (int v = 0; v < 4; v++) a = mac(a, u[v], x[v], c[v], _mm512_shuffle_epi8(ss, ctl[v]));       \
				acc[r] = lane_fma(f16tab[le16(p + 208)] * xd[b], fold8(a), acc[r]);                              \
			}                                                                                                    \
		}                                                                                                        \
		for (int r = 0; r < R; r++) out[r] = hsum8(acc[r]);                                                      \
	}

// Q6_K: a half (128 elements) is 64 bytes of low nibbles and 32 of high
// bit pairs; the low nibbles of its 64 bytes are elements 0-63 in order and
// the high nibbles 64-127, so the activations need no layout. Each 128-bit
// lane of a product is one group of 16, whose scale one vpshufb spreads
// over it (q6k_scales512). The 32 of the stored values comes off as the
// token's sums of 32·qx (q6k_mac_512), shared by the rows.
Q6K_DECODE(q6k_decode_rows, A5, q6k_mac_512, q6k_corr_512, q6k_sctl_512)
Q6K_DECODE(q6k_decode_rows_vnni, A3, q6k_mac_vnni, q6k_corr_vnni, q6k_sctl_vnni)

#define Q6K_MATVEC(name, attr, rows)                                                                               \
	static attr void name(const int8_t *q, const float *xd, int k, const uint8_t *w, size_t rowBytes, int lo,    \
	                      int hi, float *dst) {                                                                  \
		int nb = k / 256;                                                                                        \
		for (int o = lo; o < hi; o += 4) {                                                                       \
			int R = hi - o < 4 ? hi - o : 4;                                                                     \
			const uint8_t *wr = w + (size_t)o * rowBytes;                                                        \
			switch (R) {                                                                                         \
			case 1: rows(1, q, xd, nb, wr, rowBytes, dst + o); break;                                            \
			case 2: rows(2, q, xd, nb, wr, rowBytes, dst + o); break;                                            \
			case 3: rows(3, q, xd, nb, wr, rowBytes, dst + o); break;                                            \
			default: rows(4, q, xd, nb, wr, rowBytes, dst + o); break;                                           \
			}                                                                                                    \
		}                                                                                                        \
	}
Q6K_MATVEC(matvec_q6k_512, A5, q6k_decode_rows)
Q6K_MATVEC(matvec_q6k_vnni, A3, q6k_decode_rows_vnni)

// Q2_K and Q3_K: the 2-bit values at shift 2j of the two 32-byte halves of
// qs are elements 32j…32j+31 and 128+32j…128+32j+31, so one 512-bit load
// and shift serves both, against activations laid out to match (per
// super-block, for each j: those two runs of 32). A 128-bit lane of a
// product is one group of 16 (groups 2j, 2j+1, 8+2j, 9+2j), whose scale a
// vpshufb spreads from a vector holding the four groups of lane L (as for
// Q6_K). Q3_K's 4 comes off in pairs, shared by the rows as Q6_K's 32;
// Q2_K's mins come from the activation group sums, as in q23k_lanes.

// The four groups of each 128-bit lane, j = 0…3 (see above).
INLINE A5 __m512i k23_scales(__m128i sc) {
	return _mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)));
}

// q23k_decode_rows computes the dots of R rows (R ≤ 4) of Q2_K or (three)
// Q3_K weights with the laid-out activations xr (group sums bs), in
// out[0…R-1].
INLINE A5 void q23k_decode_rows(int R, int three, const int8_t *xr, const int16_t *bs, const float *xd, int nb,
                                const uint8_t *w, size_t rowBytes, float *out) {
	const size_t bb = three ? 110 : 84;
	const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
	const __m128i m4 = _mm_set1_epi8(0x0F);
	__m512i ctl[4], sel[4];
	for (int j = 0; j < 4; j++) {
		ctl[j] = _mm512_set1_epi16((short)((4 * j + 1) << 8 | 4 * j));
		sel[j] = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << j)), _mm256_set1_epi8((char)(1 << (4 + j))), 1);
	}
	__m256 acc[4];
	for (int r = 0; r < 4; r++) {
		acc[r] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + (size_t)b * bb;
		const int8_t *xb = xr + 256 * b;
		__m256i bsv = _mm256_loadu_si256((const __m256i *)(bs + 16 * b));
		__m512i x[4], c[4];
		for (int j = 0; j < 4; j++) {
			x[j] = _mm512_loadu_si512(xb + 64 * j);
			c[j] = three ? _mm512_maddubs_epi16(four, x[j]) : _mm512_setzero_si512();
		}
		float dx = xd[b];
		for (int r = 0; r < R; r++) {
			const uint8_t *p = blk + r * rowBytes;
			pf_pass(w, rowBytes, 4, b, r, bb);
			__m512i ss, qv, hm = _mm512_setzero_si512();
			if (three) {
				ss = k23_scales(q3k_scales(p + 96));
				hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
				qv = _mm512_loadu_si512(p + 32);
			} else {
				__m128i sc = _mm_loadu_si128((const __m128i *)p);
				ss = k23_scales(_mm_and_si128(sc, m4));
				__m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
				acc[r] = lane_fma(-dx * f16tab[le16(p + 82)], _mm256_madd_epi16(mins, bsv), acc[r]);
				qv = _mm512_loadu_si512(p + 16);
			}
			__m512i a = _mm512_setzero_si512();
			for (int j = 0; j < 4; j++) {
				__m512i u = _mm512_and_si512(_mm512_srli_epi16(qv, 2 * j), m3);
				__m512i pr;
				if (three) {
					u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(hm, sel[j]), u, four);
					pr = _mm512_sub_epi16(_mm512_maddubs_epi16(u, x[j]), c[j]);
				} else {
					pr = _mm512_maddubs_epi16(u, x[j]);
				}
				a = _mm512_add_epi32(a, _mm512_madd_epi16(pr, _mm512_shuffle_epi8(ss, ctl[j])));
			}
			acc[r] = lane_fma(f16tab[le16(p + (three ? 108 : 80))] * dx, fold8(a), acc[r]);
		}
	}
	for (int r = 0; r < R; r++) {
		out[r] = hsum8(acc[r]);
	}
}

static A5 void matvec_q23k_512(int three, const int8_t *q, const float *xd, const int16_t *bs, int k,
                               const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst) {
	int nb = k / 256;
	int8_t xr[k + 64] __attribute__((aligned(64)));
	for (int b = 0; b < nb; b++) {
		for (int j = 0; j < 4; j++) {
			memcpy(xr + 256 * b + 64 * j, q + 256 * b + 32 * j, 32);
			memcpy(xr + 256 * b + 64 * j + 32, q + 256 * b + 128 + 32 * j, 32);
		}
	}
	for (int o = lo; o < hi; o += 4) {
		int R = hi - o < 4 ? hi - o : 4;
		const uint8_t *wr = w + (size_t)o * rowBytes;
		switch (R * 2 + three) {
#define Q23R(R)                                                                                         \
	case R * 2: q23k_decode_rows(R, 0, xr, bs, xd, nb, wr, rowBytes, dst + o); break;                   \
	case R * 2 + 1: q23k_decode_rows(R, 1, xr, bs, xd, nb, wr, rowBytes, dst + o); break;
			Q23R(1) Q23R(2) Q23R(3) Q23R(4)
#undef Q23R
		}
	}
}

// ---------------------------------------------------------------- AVX-512: K-quant prefill
//
// The decode kernels turned around: one row's super-block is unpacked once
// and multiplied against T tokens (T ≤ 4), each token's products folded
// into its eight lanes and added by its own fused multiply-adds.

// q4k_tile_tokens computes out[t·os] = token t's dot with one Q4_K (five:
// Q5_K) row for T tokens (T ≤ 4). Token t's activations are laid out as
// for decode at xr + t*k; bspT holds, per super-block, the four tokens'
// pair sums (8 each, token t in 128-bit lane t, so that one vpmaddwd gives
// every token's four min products) and dxT their four scales.
INLINE A5 void q4k_tile_tokens(int T, int five, const int8_t *xr, int k, const int16_t *bspT, const float *dxT,
                               int nb, const uint8_t *wr, float *out, size_t os) {
	const size_t bb = five ? 176 : 144, qo = five ? 48 : 16;
	const __m512i m4 = _mm512_set1_epi8(0x0F);
	const __m512i c00 = k4_ctl(0, 2), c01 = k4_ctl(1, 3), c10 = k4_ctl(4, 6), c11 = k4_ctl(5, 7);
	const __m512i tok = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
	__m256 acc[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
	}
	__m512 accm = _mm512_setzero_ps();
	__m128 summs = _mm_setzero_ps();
	for (int b = 0; b < nb; b++) {
		const uint8_t *p = wr + (size_t)b * bb;
		__m128i sm = k4_scales(p + 4);
		__m512i S = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm));
		__m512i M = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
		__m512i mp = _mm512_madd_epi16(M, _mm512_loadu_si512(bspT + 32 * b));
		__m128 dx = _mm_loadu_ps(dxT + 4 * b);
		__m128 dmin = _mm_mul_ps(_mm_sub_ps(_mm_setzero_ps(), dx), _mm_set1_ps(f16tab[le16(p + 2)]));
		if (five) {
			summs = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(lane_totals4(mp)), summs);
		} else {
			accm = _mm512_fmadd_ps(_mm512_permutexvar_ps(tok, _mm512_castps128_ps512(dmin)), _mm512_cvtepi32_ps(mp), accm);
		}
		__m512i s00 = _mm512_shuffle_epi8(S, c00), s01 = _mm512_shuffle_epi8(S, c01);
		__m512i s10 = _mm512_shuffle_epi8(S, c10), s11 = _mm512_shuffle_epi8(S, c11);
		__m512i q0 = _mm512_loadu_si512(p + qo), q1 = _mm512_loadu_si512(p + qo + 64);
		__m512i l0 = _mm512_and_si512(q0, m4), h0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
		__m512i l1 = _mm512_and_si512(q1, m4), h1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
		if (five) {
			__m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
			l0 = qh_bit4(l0, qh, 0, 2);
			h0 = qh_bit4(h0, qh, 1, 3);
			l1 = qh_bit4(l1, qh, 4, 6);
			h1 = qh_bit4(h1, qh, 5, 7);
		}
		float dw = f16tab[le16(p)];
		for (int t = 0; t < T; t++) {
			const int8_t *xb = xr + (size_t)t * k + 256 * b;
			__m512i a = _mm512_madd_epi16(_mm512_maddubs_epi16(l0, _mm512_loadu_si512(xb)), s00);
			__m512i c = _mm512_madd_epi16(_mm512_maddubs_epi16(h0, _mm512_loadu_si512(xb + 64)), s01);
			a = _mm512_add_epi32(a, _mm512_madd_epi16(_mm512_maddubs_epi16(l1, _mm512_loadu_si512(xb + 128)), s10));
			c = _mm512_add_epi32(c, _mm512_madd_epi16(_mm512_maddubs_epi16(h1, _mm512_loadu_si512(xb + 192)), s11));
			acc[t] = lane_fma(dw * dxT[4 * b + t], fold8(_mm512_add_epi32(a, c)), acc[t]);
		}
	}
	float sm[4], am[16];
	_mm_storeu_ps(sm, summs);
	_mm512_storeu_ps(am, accm);
	for (int t = 0; t < T; t++) {
		out[t * os] = hsum8(acc[t]) + (five ? sm[t] : hsum4(_mm_loadu_ps(am + 4 * t)));
	}
}

// matmat_q4k_512 runs q4k_tile_tokens over tiles of 4 tokens, laying out
// each tile's activations once; the rows lo…hi-1 it then sweeps stay in L2
// across tiles. It returns 0 (having done nothing) when the layout buffer
// cannot be allocated.
static A5 int matmat_q4k_512(int five, const int8_t *q, const float *xd, const int16_t *bs, int n, int k,
                             const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {
	int nb = k / 256;
	size_t xn = (size_t)4 * k, bn = (size_t)4 * (k / 32) * 2, dn = (size_t)4 * nb * 4;
	uint8_t *buf = aligned_alloc(64, (xn + bn + dn + 63) / 64 * 64);
	if (buf == NULL) {
		return 0;
	}
	int8_t *xr = (int8_t *)buf;
	int16_t *bspT = (int16_t *)(buf + xn);
	float *dxT = (float *)(buf + xn + bn);
	for (int t0 = 0; t0 < n; t0 += 4) {
		int T = n - t0 < 4 ? n - t0 : 4;
		memset(bspT, 0, bn);
		memset(dxT, 0, dn);
		for (int t = 0; t < T; t++) {
			const int8_t *qt = q + (size_t)(t0 + t) * k;
			const int16_t *bt = bs + (size_t)(t0 + t) * (k / 16);
			int8_t *xt = xr + (size_t)t * k;
			for (int h = 0; h < k / 128; h++) {
				memcpy(xt + 128 * h, qt + 128 * h, 32);
				memcpy(xt + 128 * h + 32, qt + 128 * h + 64, 32);
				memcpy(xt + 128 * h + 64, qt + 128 * h + 32, 32);
				memcpy(xt + 128 * h + 96, qt + 128 * h + 96, 32);
			}
			for (int b = 0; b < nb; b++) {
				for (int j = 0; j < 8; j++) {
					bspT[32 * b + 8 * t + j] = (int16_t)(bt[16 * b + 2 * j] + bt[16 * b + 2 * j + 1]);
				}
				dxT[4 * b + t] = xd[(size_t)(t0 + t) * nb + b];
			}
		}
		for (int o = lo; o < hi; o++) {
			const uint8_t *wr = w + (size_t)o * rowBytes;
			float *d = dst + (size_t)t0 * m + o;
			switch (T * 2 + five) {
			case 2: q4k_tile_tokens(1, 0, xr, k, bspT, dxT, nb, wr, d, m); break;
			case 3: q4k_tile_tokens(1, 1, xr, k, bspT, dxT, nb, wr, d, m); break;
			case 4: q4k_tile_tokens(2, 0, xr, k, bspT, dxT, nb, wr, d, m); break;
			case 5: q4k_tile_tokens(2, 1, xr, k, bspT, dxT, nb, wr, d, m); break;
			case 6: q4k_tile_tokens(3, 0, xr, k, bspT, dxT, nb, wr, d, m); break;
			case 7: q4k_tile_tokens(3, 1, xr, k, bspT, dxT, nb, wr, d, m); break;
			case 8: q4k_tile_tokens(4, 0, xr, k, bspT, dxT, nb, wr, d, m); break;
			default: q4k_tile_tokens(4, 1, xr, k, bspT, dxT, nb, wr, d, m); break;
			}
		}
	}
	free(buf);
	return 1;
}

// Q6K_TILE defines name(R, T, …), q6k_decode_rows turned around (as
// q4k_tile_tokens): R rows (R ≤ 2, rowBytes apart) against T tokens (T ≤
// 4) at q + t*k, scales dxT[4b + t], whose corrections (corr) are at
// c + t*k bytes; out[t*os + r]. Two rows share each load of the tokens,
// which with four tokens were as many loads as there were products.
#define Q6K_TILE(name, attr, mac, sctl)                                                                            \
	INLINE attr void name(int R, int T, const int8_t *q, const uint8_t *c, int k, const float *dxT, int nb,      \
	                      const uint8_t *wr, size_t rowBytes, float *out, size_t os) {                           \
		__m256 acc[2][4];                                                                                        \
		UNROLL for (int r = 0; r < 2; r++) UNROLL for (int t = 0; t < 4; t++) acc[r][t] = _mm256_setzero_ps();  \
		for (int b = 0; b < nb; b++) {                                                                           \
			const uint8_t *p[2] = {wr + (size_t)b * 210, wr + rowBytes + (size_t)b * 210};                       \
			__m512i ss[2], a[2][4];                                                                              \
			UNROLL for (int r = 0; r < R; r++) {                                                                 \
				pf_pass(wr, rowBytes, 2, b, r, 210);                                                             \
				ss[r] = q6k_scales512(p[r]);                                                                     \
				UNROLL for (int t = 0; t < 4; t++) a[r][t] = _mm512_setzero_si512();                             \
			}                                                                                                    \
			UNROLL for (int h = 0; h < 2; h++) {                                                                 \
				__m512i u[2][2];                                                                                 \
				UNROLL for (int r = 0; r < R; r++) q6k_unpack512(p[r], h, u[r]);                                 \
				UNROLL for (int j = 0; j < 2; j++) {                                                             \
					int v = 2 * h + j;                                                                           \
					__m512i sv[2];                                                                               \
					UNROLL for (int r = 0; r < R; r++) sv[r] = _mm512_shuffle_epi8(ss[r], sctl(v));              \
					UNROLL for (int t = 0; t < T; t++) {                                                         \
						__m512i x = _mm512_loadu_si512(q + (size_t)t * k + 256 * b + 64 * v);                    \
						__m512i cv = _mm512_loadu_si512(c + (size_t)t * k + 256 * b + 64 * v);                   \
						UNROLL for (int r = 0; r < R; r++) a[r][t] = mac(a[r][t], u[r][j], x, cv, sv[r]);       \
					}                                                                                            \
				}                                                                                                \
			}                                                                                                    \
			UNROLL for (int r = 0; r < R; r++) {                                                                 \
				float dw = f16tab[le16(p[r] + 208)];                                                             \
				UNROLL for (int t = 0; t < T; t++) acc[r][t] = lane_fma(dw * dxT[4 * b + t], fold8(a[r][t]), acc[r][t]); \
			}                                                                                                    \
		}                                                                                                        \
		UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) out[t * os + r] = hsum8(acc[r][t]); \
	}
Q6K_TILE(q6k_tile_tokens, A5, q6k_mac_512, q6k_sctl_512)
Q6K_TILE(q6k_tile_tokens_vnni, A3, q6k_mac_vnni, q6k_sctl_vnni)

// Q6K_PANEL is how many tokens a pass over the rows serves, in tiles of
// four: a few sequences decoding together then read each row from memory
// once, and its block stays in L1 from one tile to the next.
#define Q6K_PANEL 16

// Q6K_MATMAT defines name, which runs tile over panels of tokens,
// computing each token's corrections once.
#define Q6K_MATMAT(name, attr, tile, corr)                                                                         \
	static attr int name(const int8_t *q, const float *xd, int n, int k, const uint8_t *w, size_t rowBytes,      \
	                     int lo, int hi, float *dst, int m) {                                                    \
		int nb = k / 256;                                                                                        \
		size_t cn = (size_t)Q6K_PANEL * k, dn = (size_t)Q6K_PANEL * 4 * nb;                                      \
		uint8_t *buf = aligned_alloc(64, cn + (dn + 63) / 64 * 64);                                              \
		if (buf == NULL) return 0;                                                                               \
		uint8_t *c = buf;                                                                                        \
		float *dxT = (float *)(buf + cn);                                                                        \
		for (int p0 = 0; p0 < n; p0 += Q6K_PANEL) {                                                              \
			int P = n - p0 < Q6K_PANEL ? n - p0 : Q6K_PANEL;                                                     \
			memset(dxT, 0, dn);                                                                                  \
			for (int t = 0; t < P; t++) {                                                                        \
				const int8_t *qt = q + (size_t)(p0 + t) * k;                                                     \
				for (int i = 0; i < k; i += 64)                                                                  \
					_mm512_storeu_si512(c + (size_t)t * k + i, corr(_mm512_loadu_si512(qt + i)));                \
				for (int b = 0; b < nb; b++) dxT[(t / 4 * nb + b) * 4 + t % 4] = xd[(size_t)(p0 + t) * nb + b];  \
			}                                                                                                    \
			for (int o = lo; o < hi; o += 2) {                                                                  \
				const uint8_t *wr = w + (size_t)o * rowBytes;                                                    \
				int R = hi - o < 2 ? 1 : 2;                                                                      \
				for (int t0 = 0; t0 < P; t0 += 4) {                                                              \
					const int8_t *qt = q + (size_t)(p0 + t0) * k;                                                \
					const uint8_t *ct = c + (size_t)t0 * k;                                                      \
					const float *dt = dxT + (size_t)t0 * nb;                                                     \
					float *d = dst + (size_t)(p0 + t0) * m + o;                                                  \
					switch (R * 8 + (P - t0 < 4 ? P - t0 : 4)) {                                                 \
					case 9: tile(1, 1, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                            \
					case 10: tile(1, 2, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                           \
					case 11: tile(1, 3, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                           \
					case 12: tile(1, 4, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                           \
					case 17: tile(2, 1, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                           \
					case 18: tile(2, 2, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                           \
					case 19: tile(2, 3, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                           \
					default: tile(2, 4, qt, ct, k, dt, nb, wr, rowBytes, d, m); break;                           \
					}                                                                                            \
				}                                                                                                \
			}                                                                                                    \
		}                                                                                                        \
		free(buf);                                                                                               \
		return 1;                                                                                                \
	}
Q6K_MATMAT(matmat_q6k_512, A5, q6k_tile_tokens, q6k_corr_512)
Q6K_MATMAT(matmat_q6k_vnni, A3, q6k_tile_tokens_vnni, q6k_corr_vnni)

// q23k_tile_tokens is q23k_decode_rows turned around (as q4k_tile_tokens):
// one row against T tokens (T ≤ 4) laid out at xr + t*k, group sums
// bs + t*k/16, scales dxT[4b + t]; Q3_K's pair sums 4·(qx_2i + qx_2i+1) in
// the same layout at c4 + t*k/2.
INLINE A5 void q23k_tile_tokens(int T, int three, const int8_t *xr, const int16_t *c4, const int16_t *bs, int k,
                                const float *dxT, int nb, const uint8_t *wr, float *out, size_t os) {
	const size_t bb = three ? 110 : 84;
	const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
	const __m128i m4 = _mm_set1_epi8(0x0F);
	__m256 acc[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *p = wr + (size_t)b * bb;
		__m512i ss, qv, hm = _mm512_setzero_si512();
		if (three) {
			ss = k23_scales(q3k_scales(p + 96));
			hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
			qv = _mm512_loadu_si512(p + 32);
		} else {
			__m128i sc = _mm_loadu_si128((const __m128i *)p);
			ss = k23_scales(_mm_and_si128(sc, m4));
			__m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
			float mw = f16tab[le16(p + 82)];
			for (int t = 0; t < T; t++) {
				__m256i ms = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)(bs + (size_t)t * (k / 16) + 16 * b)));
				acc[t] = lane_fma(-dxT[4 * b + t] * mw, ms, acc[t]);
			}
			qv = _mm512_loadu_si512(p + 16);
		}
		__m512i u[4], sv[4];
		for (int j = 0; j < 4; j++) {
			u[j] = _mm512_and_si512(_mm512_srli_epi16(qv, 2 * j), m3);
			if (three) {
				__m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << j)), _mm256_set1_epi8((char)(1 << (4 + j))), 1);
				u[j] = _mm512_mask_add_epi8(u[j], _mm512_test_epi8_mask(hm, sel), u[j], four);
			}
			sv[j] = _mm512_shuffle_epi8(ss, _mm512_set1_epi16((short)((4 * j + 1) << 8 | 4 * j)));
		}
		float dw = f16tab[le16(p + (three ? 108 : 80))];
		for (int t = 0; t < T; t++) {
			const int8_t *xb = xr + (size_t)t * k + 256 * b;
			const int16_t *cb = c4 + (size_t)t * (k / 2) + 128 * b;
			__m512i a = _mm512_setzero_si512();
			for (int j = 0; j < 4; j++) {
				__m512i pr = _mm512_maddubs_epi16(u[j], _mm512_loadu_si512(xb + 64 * j));
				if (three) {
					pr = _mm512_sub_epi16(pr, _mm512_loadu_si512(cb + 32 * j));
				}
				a = _mm512_add_epi32(a, _mm512_madd_epi16(pr, sv[j]));
			}
			acc[t] = lane_fma(dw * dxT[4 * b + t], fold8(a), acc[t]);
		}
	}
	for (int t = 0; t < T; t++) {
		out[t * os] = hsum8(acc[t]);
	}
}

// matmat_q23k_512 runs q23k_tile_tokens over tiles of 4 tokens (see
// matmat_q4k_512).
static A5 int matmat_q23k_512(int three, const int8_t *q, const float *xd, const int16_t *bs, int n, int k,
                              const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {
	int nb = k / 256;
	size_t xn = (size_t)4 * k, cn = (size_t)4 * k * 2, dn = (size_t)16 * nb;
	uint8_t *buf = aligned_alloc(64, (xn + cn + dn + 63) / 64 * 64);
	if (buf == NULL) {
		return 0;
	}
	int8_t *xr = (int8_t *)buf;
	int16_t *c4 = (int16_t *)(buf + xn);
	float *dxT = (float *)(buf + xn + cn);
	for (int t0 = 0; t0 < n; t0 += 4) {
		int T = n - t0 < 4 ? n - t0 : 4;
		memset(dxT, 0, dn);
		for (int t = 0; t < T; t++) {
			const int8_t *qt = q + (size_t)(t0 + t) * k;
			int8_t *xt = xr + (size_t)t * k;
			for (int b = 0; b < nb; b++) {
				for (int j = 0; j < 4; j++) {
					memcpy(xt + 256 * b + 64 * j, qt + 256 * b + 32 * j, 32);
					memcpy(xt + 256 * b + 64 * j + 32, qt + 256 * b + 128 + 32 * j, 32);
				}
				dxT[4 * b + t] = xd[(size_t)(t0 + t) * nb + b];
			}
			if (three) {
				for (int i = 0; i < k; i += 64) {
					_mm512_storeu_si512(c4 + (size_t)t * (k / 2) + i / 2,
					                    _mm512_maddubs_epi16(_mm512_set1_epi8(4), _mm512_loadu_si512(xt + i)));
				}
			}
		}
		const int16_t *bt = bs + (size_t)t0 * (k / 16);
		for (int o = lo; o < hi; o++) {
			const uint8_t *wr = w + (size_t)o * rowBytes;
			float *d = dst + (size_t)t0 * m + o;
			switch (T * 2 + three) {
#define Q23T(T)                                                                                          \
	case T * 2: q23k_tile_tokens(T, 0, xr, c4, bt, k, dxT, nb, wr, d, m); break;                      \
	case T * 2 + 1: q23k_tile_tokens(T, 1, xr, c4, bt, k, dxT, nb, wr, d, m); break;
				Q23T(1) Q23T(2) Q23T(3) Q23T(4)
#undef Q23T
			}
		}
	}
	free(buf);
	return 1;
}

// ---------------------------------------------------------------- AVX-512 VNNI: IQ4_XS
//
// Four rows per pass for decode, four tokens per row for prefill, as for
// the K-quants. AVX-512 has no vpsignb for the signed×signed trick, so the
// levels are looked up biased by 128 (1…241, unsigned) and multiplied by
// vpdpbusd, which accumulates in int32 and so cannot saturate; the bias
// comes off per lane through the accumulator's start,
// −128·(qx_4i + … + qx_4i+3), which depends on the token alone and is shared
// by the rows (for prefill it is computed once per tile of tokens). A
// group's 16 bytes go to both 128-bit lanes of a 256-bit half, the upper
// one shifted by 4 (as q4_unpack), so a 512-bit vector holds two whole
// groups in element order against the activations as they lie; each half
// is multiplied by its group's scale in int32, and the halves fold into the
// block's eight lanes.

INLINE A3 void iq4xs_decode_rows(int R, const int8_t *q, const float *xd, int nb, const uint8_t *w, size_t rowBytes,
                                 float *out) {
	const __m512i m4 = _mm512_set1_epi8(0x0F), sh = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
	const __m512i tab = _mm512_broadcast_i32x4(
	    _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141, (char)153, (char)166, (char)181,
	                  (char)197, (char)217, (char)241));
	const __m512i dup0 = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), dup1 = _mm512_setr_epi64(4, 5, 4, 5, 6, 7, 6, 7);
	const __m256i lsh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), hsh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
	__m512i sidx[4];
	for (int j = 0; j < 4; j++) {
		sidx[j] = _mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1);
	}
	__m256 acc[4];
	for (int r = 0; r < 4; r++) {
		acc[r] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + (size_t)b * 136;
		const int8_t *xb = q + 256 * b;
		__m512i x[4], c[4];
		for (int j = 0; j < 4; j++) {
			x[j] = _mm512_loadu_si512(xb + 64 * j);
			c[j] = _mm512_sub_epi32(_mm512_setzero_si512(),
			                        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), x[j]));
		}
		float dx = xd[b];
		for (int r = 0; r < R; r++) {
			const uint8_t *p = blk + r * rowBytes;
			pf_pass(w, rowBytes, 4, b, r, 136);
			uint32_t sl;
			memcpy(&sl, p + 4, 4);
			// ls_j − 32 for the eight groups, as int32.
			__m256i ls = _mm256_or_si256(
			    _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), lsh), _mm256_set1_epi32(0xF)),
			    _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(le16(p + 2)), hsh), _mm256_set1_epi32(3)), 4));
			__m512i lz = _mm512_castsi256_si512(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)));
			__m512i a = _mm512_setzero_si512();
			for (int h = 0; h < 2; h++) {
				__m512i qv = _mm512_loadu_si512(p + 8 + 64 * h);
				for (int i = 0; i < 2; i++) {
					int j = 2 * h + i;
					__m512i u = _mm512_permutexvar_epi64(i ? dup1 : dup0, qv);
					u = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srlv_epi64(u, sh), m4));
					__m512i d = _mm512_dpbusd_epi32(c[j], u, x[j]);
					a = _mm512_add_epi32(a, _mm512_mullo_epi32(d, _mm512_permutexvar_epi32(sidx[j], lz)));
				}
			}
			acc[r] = lane_fma(f16tab[le16(p)] * dx, fold8(a), acc[r]);
		}
	}
	for (int r = 0; r < R; r++) {
		out[r] = hsum8(acc[r]);
	}
}

static A3 void matvec_iq4xs_vnni(const int8_t *q, const float *xd, int k, const uint8_t *w, size_t rowBytes, int lo,
                                 int hi, float *dst) {
	int nb = k / 256;
	for (int o = lo; o < hi; o += 4) {
		int R = hi - o < 4 ? hi - o : 4;
		const uint8_t *wr = w + (size_t)o * rowBytes;
		switch (R) {
		case 1: iq4xs_decode_rows(1, q, xd, nb, wr, rowBytes, dst + o); break;
		case 2: iq4xs_decode_rows(2, q, xd, nb, wr, rowBytes, dst + o); break;
		case 3: iq4xs_decode_rows(3, q, xd, nb, wr, rowBytes, dst + o); break;
		default: iq4xs_decode_rows(4, q, xd, nb, wr, rowBytes, dst + o); break;
		}
	}
}

// iq4xs_tile_tokens is iq4xs_decode_rows turned around (as
// q4k_tile_tokens): one row against T tokens (T ≤ 4) at q + t*k, scales
// dxT[4b + t]; the tokens' bias terms −128·(qx_4i + … + qx_4i+3) at
// c128 + t*k/4.
INLINE A3 void iq4xs_tile_tokens(int T, const int8_t *q, const int32_t *c128, int k, const float *dxT, int nb,
                                 const uint8_t *wr, float *out, size_t os) {
	const __m512i m4 = _mm512_set1_epi8(0x0F), sh = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
	const __m512i tab = _mm512_broadcast_i32x4(
	    _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141, (char)153, (char)166, (char)181,
	                  (char)197, (char)217, (char)241));
	const __m512i dup0 = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), dup1 = _mm512_setr_epi64(4, 5, 4, 5, 6, 7, 6, 7);
	const __m256i lsh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), hsh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
	__m256 acc[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *p = wr + (size_t)b * 136;
		uint32_t sl;
		memcpy(&sl, p + 4, 4);
		__m256i ls = _mm256_or_si256(
		    _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), lsh), _mm256_set1_epi32(0xF)),
		    _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(le16(p + 2)), hsh), _mm256_set1_epi32(3)), 4));
		__m512i lz = _mm512_castsi256_si512(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)));
		__m512i u[4], sv[4];
		for (int h = 0; h < 2; h++) {
			__m512i qv = _mm512_loadu_si512(p + 8 + 64 * h);
			for (int i = 0; i < 2; i++) {
				int j = 2 * h + i;
				__m512i v = _mm512_permutexvar_epi64(i ? dup1 : dup0, qv);
				u[j] = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srlv_epi64(v, sh), m4));
				sv[j] = _mm512_permutexvar_epi32(_mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1), lz);
			}
		}
		float dw = f16tab[le16(p)];
		for (int t = 0; t < T; t++) {
			const int8_t *xb = q + (size_t)t * k + 256 * b;
			const int32_t *cb = c128 + (size_t)t * (k / 4) + 64 * b;
			__m512i a = _mm512_setzero_si512();
			for (int j = 0; j < 4; j++) {
				__m512i d = _mm512_dpbusd_epi32(_mm512_loadu_si512(cb + 16 * j), u[j], _mm512_loadu_si512(xb + 64 * j));
				a = _mm512_add_epi32(a, _mm512_mullo_epi32(d, sv[j]));
			}
			acc[t] = lane_fma(dw * dxT[4 * b + t], fold8(a), acc[t]);
		}
	}
	for (int t = 0; t < T; t++) {
		out[t * os] = hsum8(acc[t]);
	}
}

// matmat_iq4xs_vnni runs iq4xs_tile_tokens over tiles of 4 tokens (see
// matmat_q4k_512), computing each tile's bias terms once.
static A3 int matmat_iq4xs_vnni(const int8_t *q, const float *xd, int n, int k, const uint8_t *w, size_t rowBytes,
                                int lo, int hi, float *dst, int m) {
	int nb = k / 256;
	size_t cn = (size_t)4 * k, dn = (size_t)16 * nb;
	uint8_t *buf = aligned_alloc(64, (cn + dn + 63) / 64 * 64);
	if (buf == NULL) {
		return 0;
	}
	int32_t *c128 = (int32_t *)buf;
	float *dxT = (float *)(buf + cn);
	for (int t0 = 0; t0 < n; t0 += 4) {
		int T = n - t0 < 4 ? n - t0 : 4;
		memset(dxT, 0, dn);
		for (int t = 0; t < T; t++) {
			const int8_t *qt = q + (size_t)(t0 + t) * k;
			for (int i = 0; i < k; i += 64) {
				__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), _mm512_loadu_si512(qt + i));
				_mm512_storeu_si512(c128 + (size_t)t * (k / 4) + i / 4, _mm512_sub_epi32(_mm512_setzero_si512(), s));
			}
			for (int b = 0; b < nb; b++) {
				dxT[4 * b + t] = xd[(size_t)(t0 + t) * nb + b];
			}
		}
		const int8_t *qt = q + (size_t)t0 * k;
		for (int o = lo; o < hi; o++) {
			const uint8_t *wr = w + (size_t)o * rowBytes;
			float *d = dst + (size_t)t0 * m + o;
			switch (T) {
			case 1: iq4xs_tile_tokens(1, qt, c128, k, dxT, nb, wr, d, m); break;
			case 2: iq4xs_tile_tokens(2, qt, c128, k, dxT, nb, wr, d, m); break;
			case 3: iq4xs_tile_tokens(3, qt, c128, k, dxT, nb, wr, d, m); break;
			default: iq4xs_tile_tokens(4, qt, c128, k, dxT, nb, wr, d, m); break;
			}
		}
	}
	free(buf);
	return 1;
}

// ---------------------------------------------------------------- AVX-512 VNNI: Q5_0, Q4_1, Q5_1, IQ4_NL decode
//
// The 256-bit tiles above spend most of a decode on unpacking and scaling
// each block on its own. These kernels take two blocks of four rows per
// step: a block's 16 bytes of nibbles are broadcast to its half of a
// 512-bit vector and unpacked as q4_unpack does, Q5's 32 high bits become a
// byte mask (bit e of qh is element e), and one vpdpbusd per row and block
// pair multiplies against the two blocks' activations as they lie, leaving
// each block's eight lanes in its half. Signed IQ4_NL levels are looked up
// biased by 128, Q5_0's stored q+16 is unsigned; either offset comes off per
// lane through the accumulator's start, computed once per pair for the four
// rows. The halves then take their fused multiply-adds in block order, or,
// for IQ4_NL (whose decode alternates two accumulators), at once: even
// blocks in the lower half of a 512-bit accumulator, odd in the upper.

// q32_type gives a 32-element type's layout: block bytes, offset of the
// nibbles, of Q5's high bits (0: none), whether it has a min.
INLINE void q32_type(int ty, int *bb, int *qo, int *ho, int *mn) {
	switch (ty) {
	case T_Q5_0: *bb = 22, *qo = 6, *ho = 2, *mn = 0; break;
	case T_Q4_0: *bb = 18, *qo = 2, *ho = 0, *mn = 0; break;
	case T_Q4_1: *bb = 20, *qo = 4, *ho = 0, *mn = 1; break;
	case T_Q5_1: *bb = 24, *qo = 8, *ho = 4, *mn = 1; break;
	default: *bb = 18, *qo = 2, *ho = 0, *mn = 0; break; // IQ4_NL
	}
}

// q32_decode_rows computes the dots of R rows (R ≤ 4) of type ty over nb
// blocks with activations q (scales xd, Q8_1 sums xs), in out[0…R-1].
INLINE A3 void q32_decode_rows(int ty, int R, const int8_t *q, const float *xd, const float *xs, int nb,
                               const uint8_t *w, size_t rowBytes, float *out) {
	int bb, qo, ho, mn;
	q32_type(ty, &bb, &qo, &ho, &mn);
	const int pairs = ty == T_IQ4_NL;
	const __m512i m4 = _mm512_set1_epi8(0x0F), sh = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
	const __m512i tab = _mm512_broadcast_i32x4(
	    _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141, (char)153, (char)166, (char)181,
	                  (char)197, (char)217, (char)241));
	const __m512i off = _mm512_set1_epi8(ty == T_Q5_0 ? 16 : ty == T_Q4_0 ? 8 : (char)0x80);
	__m256 acc[4];
	__m512 accz[4];
	float summs[4];
	for (int r = 0; r < 4; r++) {
		acc[r] = _mm256_setzero_ps();
		accz[r] = _mm512_setzero_ps();
		summs[r] = 0;
	}
	for (int b = 0; b + 1 < nb; b += 2) {
		__m512i x = _mm512_loadu_si512(q + 32 * b);
		__m512i c = _mm512_setzero_si512();
		if (ty == T_Q5_0 || ty == T_Q4_0 || ty == T_IQ4_NL) {
			c = _mm512_sub_epi32(c, _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, x));
		}
		float dx0 = xd[b], dx1 = xd[b + 1];
		for (int r = 0; r < R; r++) {
			const uint8_t *p = w + r * rowBytes + (size_t)b * bb;
			pf_pass(w, rowBytes, 4, b / 2, r, 2 * (size_t)bb);
			__m512i u = _mm512_inserti64x4(
			    _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + qo)))),
			    _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p + bb + qo))), 1);
			u = _mm512_and_si512(_mm512_srlv_epi64(u, sh), m4);
			if (ho) {
				uint32_t h0, h1;
				memcpy(&h0, p + ho, 4);
				memcpy(&h1, p + bb + ho, 4);
				u = _mm512_mask_add_epi8(u, _cvtu64_mask64((uint64_t)h1 << 32 | h0), u, _mm512_set1_epi8(0x10));
			}
			if (pairs) {
				u = _mm512_shuffle_epi8(tab, u);
			}
			__m512 f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c, u, x));
			float d0 = f16tab[le16(p)] * dx0, d1 = f16tab[le16(p + bb)] * dx1;
			if (pairs) {
				__m512 dv = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
				accz[r] = _mm512_fmadd_ps(dv, f, accz[r]);
			} else {
				acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d0), _mm512_castps512_ps256(f), acc[r]);
				acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d1), _mm512_extractf32x8_ps(f, 1), acc[r]);
			}
			if (mn) {
				summs[r] = fma1(f16tab[le16(p + 2)], xs[b], summs[r]);
				summs[r] = fma1(f16tab[le16(p + bb + 2)], xs[b + 1], summs[r]);
			}
		}
	}
	if (nb % 2 == 1) {
		// The last block: ggml's scalar tail for IQ4_NL, else as the tiles.
		int b = nb - 1;
		__m256i x = _mm256_loadu_si256((const __m256i *)(q + 32 * b));
		for (int r = 0; r < R; r++) {
			const uint8_t *p = w + r * rowBytes + (size_t)b * bb;
			float d = f16tab[le16(p)] * xd[b];
			__m256i dp;
			switch (ty) {
			case T_Q5_0: dp = bdot_q5_0_vnni(q32_corr_vnni(x), p, x); break;
			case T_Q4_0: dp = bdot_q40l_vnni(q40_corr_vnni(x), p, x); break;
			case T_Q4_1: dp = bdot_q4_1_vnni(x, p, x); break;
			case T_Q5_1: dp = bdot_q5_1_vnni(x, p, x); break;
			default: dp = bdot_iq4nl_vnni(x, p, x); break;
			}
			if (pairs) {
				summs[r] = fma1(d, (float)hsum8i(dp), summs[r]);
			} else {
				acc[r] = lane_fma(d, dp, acc[r]);
			}
			if (mn) {
				summs[r] = fma1(f16tab[le16(p + 2)], xs[b], summs[r]);
			}
		}
	}
	for (int r = 0; r < R; r++) {
		__m256 v = acc[r];
		if (pairs) {
			v = _mm256_add_ps(_mm512_castps512_ps256(accz[r]), _mm512_extractf32x8_ps(accz[r], 1));
		}
		out[r] = hsum8(v) + summs[r];
	}
}

// matvec_q32_vnni runs q32_decode_rows over the rows four at a time.
static A3 void matvec_q32_vnni(int ty, const int8_t *q, const float *xd, const float *xs, int k, const uint8_t *w,
                               size_t rowBytes, int lo, int hi, float *dst) {
	int nb = k / 32;
	for (int o = lo; o < hi; o += 4) {
		int R = hi - o < 4 ? hi - o : 4;
		const uint8_t *wr = w + (size_t)o * rowBytes;
		switch (R * 32 + ty) {
#define Q32V(R)                                                                                                     \
	case R * 32 + T_Q5_0: q32_decode_rows(T_Q5_0, R, q, xd, xs, nb, wr, rowBytes, dst + o); break;                 \
	case R * 32 + T_Q4_0: q32_decode_rows(T_Q4_0, R, q, xd, xs, nb, wr, rowBytes, dst + o); break;                 \
	case R * 32 + T_Q4_1: q32_decode_rows(T_Q4_1, R, q, xd, xs, nb, wr, rowBytes, dst + o); break;                 \
	case R * 32 + T_Q5_1: q32_decode_rows(T_Q5_1, R, q, xd, xs, nb, wr, rowBytes, dst + o); break;                 \
	case R * 32 + T_IQ4_NL: q32_decode_rows(T_IQ4_NL, R, q, xd, xs, nb, wr, rowBytes, dst + o); break;
			Q32V(1) Q32V(2) Q32V(3) Q32V(4)
#undef Q32V
		}
	}
}

static void matmat_q_chunk(int level, int type, const int8_t *q, const float *d, const int32_t *c, const float *s,
                           const int16_t *bs, int n, int k, const uint8_t *w, size_t rowBytes, int lo, int hi,
                           float *dst, int m) {
	switch (type) {
	case T_Q4_0:
		// ggml repacks Q4_0 matrices of a multiple of 8 rows, whose dots keep
		// one float per output; other matrices run in lanes, as Q5_0
		// (quant.go, dotQ).
		if (m % 8 != 0) {
			if (level >= 3 && n == 1) {
				matvec_q32_vnni(T_Q4_0, q, d, s, k, w, rowBytes, lo, hi, dst);
			} else if (level >= 3) {
				matmat_q40l_vnni(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
			} else {
				matmat_q40l_avx2(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
			}
		} else {
			// The backend interleaves such weights (glint_matmat_q4_0_x8);
			// this is a Q4_0 tensor it did not load.
			(level >= 3 ? matmat_q4_vnni : matmat_q4_avx2)(q, d, c, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q8_0:
		// A prompt takes the prefill tiles; a decode QMATMATX's, which read
		// each weight block once for up to four tokens.
		if (n > GLINT_DECODE_TOKENS) {
			(level >= 3 ? matmat_q8_vnni : matmat_q8_avx2)(q, d, n, k, w, rowBytes, lo, hi, dst, m);
		} else if (level >= 3) {
			matmat_q8_0_vnni(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		} else {
			matmat_q8_0_avx2(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q5_0:
		if (level >= 3 && n == 1) {
			matvec_q32_vnni(T_Q5_0, q, d, s, k, w, rowBytes, lo, hi, dst);
		} else if (level >= 3) {
			matmat_q5_0_vnni(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		} else {
			matmat_q5_0_avx2(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q4_1:
		if (level >= 3 && n == 1) {
			matvec_q32_vnni(T_Q4_1, q, d, s, k, w, rowBytes, lo, hi, dst);
		} else if (level >= 3) {
			matmat_q4_1_vnni(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		} else {
			matmat_q4_1_avx2(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q5_1:
		if (level >= 3 && n == 1) {
			matvec_q32_vnni(T_Q5_1, q, d, s, k, w, rowBytes, lo, hi, dst);
		} else if (level >= 3) {
			matmat_q5_1_vnni(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		} else {
			matmat_q5_1_avx2(0, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_IQ4_NL:
		// ggml's decode alternates two accumulators; its prefill (llamafile)
		// keeps one (quant_lanes.go).
		if (level >= 3 && n == 1) {
			matvec_q32_vnni(T_IQ4_NL, q, d, s, k, w, rowBytes, lo, hi, dst);
		} else {
			(level >= 3 ? matmat_iq4nl_vnni : matmat_iq4nl_avx2)(n == 1, q, d, s, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q4_K:
	case T_Q5_K:
		if (level >= 2 && n == 1 && k <= DECODE_KMAX) {
			matvec_q4k_512(type == T_Q5_K, q, d, bs, k, w, rowBytes, lo, hi, dst);
		} else if (!(level >= 2 && matmat_q4k_512(type == T_Q5_K, q, d, bs, n, k, w, rowBytes, lo, hi, dst, m))) {
			matmat_kq_avx2(type, q, d, bs, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q6_K:
		if (level >= 3 && n == 1) {
			matvec_q6k_vnni(q, d, k, w, rowBytes, lo, hi, dst);
		} else if (level >= 2 && n == 1) {
			matvec_q6k_512(q, d, k, w, rowBytes, lo, hi, dst);
		} else if (!((level >= 3 && matmat_q6k_vnni(q, d, n, k, w, rowBytes, lo, hi, dst, m)) ||
		             (level == 2 && matmat_q6k_512(q, d, n, k, w, rowBytes, lo, hi, dst, m)))) {
			matmat_kq_avx2(type, q, d, bs, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q2_K:
	case T_Q3_K:
		if (level >= 2 && n == 1 && k <= DECODE_KMAX) {
			matvec_q23k_512(type == T_Q3_K, q, d, bs, k, w, rowBytes, lo, hi, dst);
		} else if (!(level >= 2 && matmat_q23k_512(type == T_Q3_K, q, d, bs, n, k, w, rowBytes, lo, hi, dst, m))) {
			matmat_kq_avx2(type, q, d, bs, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_IQ4_XS:
		if (level >= 3 && n == 1) {
			matvec_iq4xs_vnni(q, d, k, w, rowBytes, lo, hi, dst);
		} else if (!(level >= 3 && matmat_iq4xs_vnni(q, d, n, k, w, rowBytes, lo, hi, dst, m))) {
			matmat_kq_avx2(type, q, d, bs, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	}
}

void glint_matmat_q(int level, int type, const int8_t *q, const float *d, const int32_t *c, const float *s,
                    const int16_t *bs, int n, int k, const uint8_t *w, size_t rowBytes, glint_rows rows, float *dst,
                    int m) {
	for (int lo, hi; glint_claim(&rows, &lo, &hi);) {
		matmat_q_chunk(level, type, q, d, c, s, bs, n, k, w, rowBytes, lo, hi, dst, m);
	}
}
