// Q4_0 in ggml's repacked order: matrices of a multiple of 8 rows, read as
// they lie or interleaved in groups of 8 rows (interleave.go).
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd_kernels.h"

// ---------------------------------------------------------------- quantised dots
//
// A block dot product is Σ (qw − o)·qx with an exact int32 result. The
// unsigned×signed byte instructions (vpdpbusd, vpmaddubsw) want the weights
// unsigned, so they compute Σ u·qx with u = qw + o ≥ 0 and take o·Σ qx off.
// Q4_0 in ggml's repacked order (below) finds the correction c = −o·Σ qx of
// the block (o = 8: nibbles are stored as q+8) stored by the activation
// quantiser, and starts the vpdpbusd accumulator with it, so it costs a load
// and no arithmetic; the types in lanes (further down) take it off per lane.

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

void glint_matmat_q4_0_x8(glint_level level, const int8_t *q, const float *xd, const int32_t *xc, int n, int k,
                          const uint8_t *w, size_t rowBytes, glint_rows rows, float *dst, int m) {
	for (int lo, hi; glint_claim(&rows, &lo, &hi);) {
		(level >= GLINT_VNNI ? matmat_q4x8_vnni : matmat_q4x8_avx2)(q, xd, xc, n, k, w, rowBytes, lo, hi, dst, m);
	}
}

// The table's kernels (simd.c): Q4_0 matrices of a multiple of 8 rows in
// ggml's repacked order (the backend interleaves such weights,
// glint_matmat_q4_0_x8: this is a Q4_0 tensor it did not load).
QK(qk_q4_0_avx2, matmat_q4_avx2, a->q, a->d, a->c, QK_ROWS)
QK(qk_q4_0_vnni, matmat_q4_vnni, a->q, a->d, a->c, QK_ROWS)
