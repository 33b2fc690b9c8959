// The K-quants (Q2_K…Q6_K) and IQ4_XS at AVX2, and the K-quants at AVX-512.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd_kernels.h"

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

// The table's kernels (simd.c): matmat_kq_avx2 takes every type at AVX2,
// and whatever the AVX-512 kernels decline (a decode's k past DECODE_KMAX,
// a prefill's buffer that cannot be allocated).
QK(qk_kq_avx2, matmat_kq_avx2, a->type, a->q, a->d, a->bs, QK_ROWS)
int qk_q45k_vec_512(const glint_qargs *a, int lo, int hi) {
	if (a->k > DECODE_KMAX) {
		return 0;
	}
	matvec_q4k_512(a->type == T_Q5_K, a->q, a->d, a->bs, QK_VROWS);
	return 1;
}
int qk_q23k_vec_512(const glint_qargs *a, int lo, int hi) {
	if (a->k > DECODE_KMAX) {
		return 0;
	}
	matvec_q23k_512(a->type == T_Q3_K, a->q, a->d, a->bs, QK_VROWS);
	return 1;
}
QK_DECLINES(qk_q45k_512, matmat_q4k_512, a->type == T_Q5_K, a->q, a->d, a->bs, QK_ROWS)
QK_DECLINES(qk_q23k_512, matmat_q23k_512, a->type == T_Q3_K, a->q, a->d, a->bs, QK_ROWS)
QK(qk_q6k_vec_512, matvec_q6k_512, a->q, a->d, QK_VROWS)
QK(qk_q6k_vec_vnni, matvec_q6k_vnni, a->q, a->d, QK_VROWS)
QK_DECLINES(qk_q6k_512, matmat_q6k_512, a->q, a->d, QK_ROWS)
QK_DECLINES(qk_q6k_vnni, matmat_q6k_vnni, a->q, a->d, QK_ROWS)
