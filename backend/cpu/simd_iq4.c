// IQ4_XS at AVX-512 VNNI.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "simd_kernels.h"

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

// iq4xs_scales512 is block p's eight group scales ls_j − 32, as int32 in
// the lower half.
INLINE A3 __m512i iq4xs_scales512(const uint8_t *p) {
	const __m256i lsh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), hsh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
	uint32_t sl;
	memcpy(&sl, p + 4, 4);
	__m256i ls = _mm256_or_si256(
	    _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), lsh), _mm256_set1_epi32(0xF)),
	    _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(le16(p + 2)), hsh), _mm256_set1_epi32(3)), 4));
	return _mm512_castsi256_si512(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)));
}

// iq4xs_scale_pair spreads the scales of groups 2j (lower half) and 2j+1
// (upper) from lz (iq4xs_scales512).
INLINE A3 __m512i iq4xs_scale_pair(__m512i lz, int j) {
	return _mm512_permutexvar_epi32(_mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1), lz);
}

// iq4xs_unpack512 gives block p's groups 4h…4h+3 as two vectors of two
// groups, levels biased by 128.
INLINE A3 void iq4xs_unpack512(const uint8_t *p, int h, __m512i u[2]) {
	const __m512i m4 = _mm512_set1_epi8(0x0F), sh = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
	const __m512i dup0 = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), dup1 = _mm512_setr_epi64(4, 5, 4, 5, 6, 7, 6, 7);
	__m512i qv = _mm512_loadu_si512(p + 8 + 64 * h);
	u[0] = _mm512_shuffle_epi8(iq4_table512(), _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi64(dup0, qv), sh), m4));
	u[1] = _mm512_shuffle_epi8(iq4_table512(), _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi64(dup1, qv), sh), m4));
}

INLINE A3 void iq4xs_decode_rows(int R, const int8_t *q, const float *xd, int nb, const uint8_t *w, size_t rowBytes,
                                 float *out) {
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
			__m512i lz = iq4xs_scales512(p), a = _mm512_setzero_si512();
			for (int h = 0; h < 2; h++) {
				__m512i u[2];
				iq4xs_unpack512(p, h, u);
				for (int i = 0; i < 2; i++) {
					int j = 2 * h + i;
					__m512i d = _mm512_dpbusd_epi32(c[j], u[i], x[j]);
					a = _mm512_add_epi32(a, _mm512_mullo_epi32(d, iq4xs_scale_pair(lz, j)));
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
	__m256 acc[4];
	for (int t = 0; t < 4; t++) {
		acc[t] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const uint8_t *p = wr + (size_t)b * 136;
		__m512i lz = iq4xs_scales512(p), u[4], sv[4];
		iq4xs_unpack512(p, 0, u);
		iq4xs_unpack512(p, 1, u + 2);
		for (int j = 0; j < 4; j++) {
			sv[j] = iq4xs_scale_pair(lz, j);
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

// The table's kernels (simd.c); matmat_kq_avx2 takes what these decline.
QK(qk_iq4xs_vec_vnni, matvec_iq4xs_vnni, a->q, a->d, QK_VROWS)
QK_DECLINES(qk_iq4xs_vnni, matmat_iq4xs_vnni, a->q, a->d, QK_ROWS)
