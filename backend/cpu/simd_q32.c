// The 32-element block types in ggml's x86 lane order: Q4_0 (rows not a
// multiple of 8), Q4_1, Q5_0, Q5_1, Q8_0 and IQ4_NL.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd_kernels.h"

// ---------------------------------------------------------------- more block types
//
// Q8_0, the types below and the K-quants after them follow ggml's x86
// order (quant_lanes.go), not the one accumulator per output above: a
// block's dot product stays in eight exact int32 lanes, lane l holding
// elements 4l…4l+3 (what vpmaddwd or vpdpbusd leaves from a 32-byte block),
// each added by one fused multiply-add by d = dw·dx into eight float lanes,
// reduced by hsum8 at the end. Offsets of unsigned encodings are therefore
// taken off per lane, not per block.

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

// QTILEX defines a micro-kernel for R weight rows × T tokens of a
// 32-element type: each unpacked weight block and each activation block is
// loaded once and used T (R) times. usec says whether bdot takes the offset
// term corr, mn whether the weights have a min (Q4_1, Q5_1: f16 m after d),
// whose m·s (s the Q8_1 block sum) goes by fmaf into a scalar added after
// the reduction. With pairs (IQ4_NL decode: T = 1), even blocks go to one
// set of lanes and odd ones to another, and an odd last block is added to
// the reduction by one scalar fmaf of its total, as ggml_vec_dot_iq4_nl_q8_0
// does (sumf += d·s, fused). pf: on
// the first tile of tokens over these rows, the rows a pass reads
// (QMATMATX's R0), whose next pass it prefetches (pf_pass); else 0.
#define QTILEX(name, attr, bdot, corr, bb, usec, mn)                                                          \
	INLINE attr void name(int R, int T, int pairs, int pf, const int8_t *q, const float *xd, const float *xs, \
	                      int k, const uint8_t *w, size_t rowBytes, float *dst, int m) {                     \
		__m256 acc[16], acc2[4];                                                                              \
		float summs[16], td[4] = {0}, ts[4] = {0};                                                            \
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
				td[r] = f16tab[le16(p)] * xd[b], ts[r] = (float)hsum8i(bdot(c, p, xv));                        \
			}                                                                                                 \
		}                                                                                                     \
		for (int r = 0; r < R; r++) {                                                                         \
			if (pairs) acc[4 * r] = _mm256_add_ps(acc[4 * r], acc2[r]);                                       \
			for (int t = 0; t < T; t++) {                                                                     \
				float h = hsum8(acc[4 * r + t]);                                                              \
				if (pairs) h = fma1(td[r], ts[r], h);                                                         \
				dst[(size_t)t * m + r] = h + summs[4 * r + t];                                                \
			}                                                                                                 \
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
	const __m512i tab = iq4_table512();
	const __m512i off = _mm512_set1_epi8(ty == T_Q5_0 ? 16 : ty == T_Q4_0 ? 8 : (char)0x80);
	__m256 acc[4];
	__m512 accz[4];
	float summs[4], td[4] = {0}, ts[4] = {0};
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
				td[r] = d, ts[r] = (float)hsum8i(dp);
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
		float h = hsum8(v);
		if (pairs) h = fma1(td[r], ts[r], h);
		out[r] = h + summs[r];
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

// The table's kernels (simd.c). Q4_0 matrices whose rows are not a
// multiple of 8 run in lanes, as Q5_0 (quant.go, dotQ). One token at VNNI
// takes matvec_q32_vnni, else the QMATMATX tiles, which read each weight
// block once for up to four tokens.
QK(qk_q32_vec_vnni, matvec_q32_vnni, a->type, a->q, a->d, a->s, QK_VROWS)
#define QK_TILES(t) \
	QK(qk_##t##_avx2, matmat_##t##_avx2, QK_LANES(0)) QK(qk_##t##_vnni, matmat_##t##_vnni, QK_LANES(0))
QK_TILES(q40l)
QK_TILES(q5_0)
QK_TILES(q4_1)
QK_TILES(q5_1)
// IQ4_NL: ggml's decode alternates two accumulators (pairs); its prefill
// (llamafile) keeps one (quant_lanes.go).
QK(qk_iq4nl_vec_avx2, matmat_iq4nl_avx2, QK_LANES(1))
QK(qk_iq4nl_avx2, matmat_iq4nl_avx2, QK_LANES(0))
QK(qk_iq4nl_vnni, matmat_iq4nl_vnni, QK_LANES(0))
// Q8_0: a prompt takes the prefill tiles (Q8MATMAT), a decode QMATMATX's.
QK(qk_q8_0_avx2, matmat_q8_0_avx2, QK_LANES(0))
QK(qk_q8_0_vnni, matmat_q8_0_vnni, QK_LANES(0))
QK(qk_q8_0_prefill_avx2, matmat_q8_avx2, a->q, a->d, QK_ROWS)
QK(qk_q8_0_prefill_vnni, matmat_q8_vnni, a->q, a->d, QK_ROWS)
