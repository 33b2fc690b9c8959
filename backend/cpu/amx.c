// AMX kernels for prefill with Q4_0 and Q8_0 weights.
//
// A tile multiply (tdpbusd) does 16×16×32 byte products in a few cycles, so
// the integer part of a block dot product costs almost nothing here; what
// remains is the float part llama.cpp's arithmetic needs per 32-element
// block: convert each block's int32 sums and add them scaled by the
// weight's and the activation's block scales. That is done with AVX-512 on
// the tiles' results.
//
// Roles: A (unsigned bytes) is 16 weight rows × one block, B (signed) is
// one block × 16 tokens, C = 16 rows × 16 tokens. The weights are stored
// unsigned as in simd.c (Q4_0 nibbles are q+8, Q8_0 bytes get their sign
// bit flipped: q+128), and C starts from the activations' correction
// c = −off·Σ qx of the block, so C is exactly Σ qw·qx. Each thread unpacks
// a panel of 32 weight rows once (all blocks, in A layout) and runs every
// token tile of 32 against it: 2×2 C tiles per block.
//
// Numerics: each block's term, (dw·dx)·Σ qw·qx rounded to float32, is added
// to its (row, token) sum in double and the sum rounded to float32 at the
// end, in any order. The references of Q4_0 and Q8_0 now follow ggml's x86
// order instead (quant.go: one float accumulator per output fed by a fused
// multiply-add per block, or eight lanes per block), so amxMatMat declines
// both (amxOrder) and this code is not reached; converting it would change
// post (the accumulators) and, for the lanes, the tiles' shape (a lane is
// four elements of each block, not a whole block).

#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amx.h"
#include "simd_common.h"

#define AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int glint_amx_init(void) {
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) { // OSXSAVE
		return 0;
	}
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		return 0;
	}
	// AMX-TILE, AMX-INT8; AVX-512 F, DQ, BW, VL.
	if (!(d & (1u << 24)) || !(d & (1u << 25)) || (b & 0xC0030000u) != 0xC0030000u) {
		return 0;
	}
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 0x600E6u) != 0x600E6u) { // SSE, AVX, AVX-512 and both tile states
		return 0;
	}
	return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

typedef struct {
	uint8_t palette, start;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} tilecfg;

// The panel: PR weight rows, token tiles of PT.
#define PR 32
#define PT 32

// unpack_panel writes rows o0…o0+R-1 of w as A tiles: for block b, 32 rows
// of 32 unsigned bytes at wa + b*PR*32, and the rows' scales at sw + b*PR.
// Rows R…PR-1 are zero (their results are never stored).
static AMX void unpack_panel(int type, const uint8_t *w, size_t rowBytes, int o0, int R, int nb, uint8_t *wa,
                             float *sw) {
	const __m128i m4 = _mm_set1_epi8(0x0F);
	const __m256i flip = _mm256_set1_epi8((char)0x80);
	for (int r = 0; r < PR; r++) {
		const uint8_t *row = w + (size_t)(o0 + r) * rowBytes;
		for (int b = 0; b < nb; b++) {
			uint8_t *dst = wa + ((size_t)b * PR + r) * 32;
			if (r >= R) {
				memset(dst, 0, 32);
				sw[(size_t)b * PR + r] = 0;
				continue;
			}
			if (type == T_Q4_0) {
				const uint8_t *blk = row + (size_t)b * 18;
				__m128i v = _mm_loadu_si128((const __m128i *)(blk + 2));
				_mm_storeu_si128((__m128i *)dst, _mm_and_si128(v, m4));
				_mm_storeu_si128((__m128i *)(dst + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
				sw[(size_t)b * PR + r] = f16at(blk);
			} else {
				const uint8_t *blk = row + (size_t)b * 34;
				__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 2));
				_mm256_storeu_si256((__m256i *)dst, _mm256_xor_si256(v, flip));
				sw[(size_t)b * PR + r] = f16at(blk);
			}
		}
	}
}

// post adds one C tile (16 rows × 16 tokens of int32 block sums) to the
// double accumulators: acc[row][token] += float32(C·float32(sw[row]·dx[token])).
static inline AMX __attribute__((always_inline)) void post(const int32_t *cb, double (*acc)[PT], int roff, int toff,
                                                           const float *dxv, const float *sw) {
	__m512 dx = _mm512_loadu_ps(dxv);
	for (int r = 0; r < 16; r++) {
		__m512 f = _mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * r));
		__m512 t = _mm512_mul_ps(f, _mm512_mul_ps(_mm512_set1_ps(sw[roff + r]), dx));
		double *a = &acc[roff + r][toff];
		_mm512_store_pd(a, _mm512_add_pd(_mm512_load_pd(a), _mm512_cvtps_pd(_mm512_castps512_ps256(t))));
		_mm512_store_pd(a + 8, _mm512_add_pd(_mm512_load_pd(a + 8), _mm512_cvtps_pd(_mm512_extractf32x8_ps(t, 1))));
	}
}

AMX int glint_matmat_amx(int type, const int8_t *q, const float *d, const int32_t *c, int n, int k, const uint8_t *w,
                     size_t rowBytes, int lo, int hi, float *dst, int m) {
	int nb = k / 32, nh = (n + 15) / 16;
	// Activations in B layout, per 16-token half tile h and block b: the
	// block's 32 bytes of each token as 8 int32 words, word kk of token tok
	// at row kk, column tok; plus the blocks' corrections and scales.
	size_t xn = (size_t)nh * nb * 512, sn = (size_t)nh * nb * 16;
	size_t wn = (size_t)nb * PR * 32, swn = (size_t)nb * PR;
	uint8_t *buf = aligned_alloc(64, xn + 8 * sn + wn + 4 * swn + 64);
	if (buf == NULL) {
		return 0;
	}
	uint8_t *xb = buf;
	int32_t *ci = (int32_t *)(buf + xn);
	float *dx = (float *)(buf + xn + 4 * sn);
	uint8_t *wa = buf + xn + 8 * sn;
	float *sw = (float *)(wa + wn);
	memset(buf, 0, xn + 8 * sn);
	for (int t = 0; t < n; t++) {
		int h = t / 16, tok = t % 16;
		for (int b = 0; b < nb; b++) {
			size_t hb = (size_t)h * nb + b;
			const int8_t *src = q + (size_t)t * k + 32 * b;
			int32_t *xw = (int32_t *)(xb + hb * 512);
			for (int kk = 0; kk < 8; kk++) {
				memcpy(xw + kk * 16 + tok, src + 4 * kk, 4);
			}
			ci[hb * 16 + tok] = c[(size_t)t * nb + b];
			dx[hb * 16 + tok] = d[(size_t)t * nb + b];
		}
	}

	tilecfg cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.palette = 1;
	for (int i = 0; i < 4; i++) { // C
		cfg.rows[i] = 16;
		cfg.colsb[i] = 64;
	}
	for (int i = 4; i < 6; i++) { // A: 16 rows × 32 bytes
		cfg.rows[i] = 16;
		cfg.colsb[i] = 32;
	}
	for (int i = 6; i < 8; i++) { // B: 8 rows of 4 bytes × 16 tokens
		cfg.rows[i] = 8;
		cfg.colsb[i] = 64;
	}
	_tile_loadconfig(&cfg);

	double acc[PR][PT] __attribute__((aligned(64)));
	// Two sets of C results: the tiles of block b are stored while block b-1
	// is post-processed, so that neither waits for the other.
	int32_t cb[2][4][256] __attribute__((aligned(64)));
	for (int o0 = lo; o0 < hi; o0 += PR) {
		int R = hi - o0 < PR ? hi - o0 : PR;
		unpack_panel(type, w, rowBytes, o0, R, nb, wa, sw);
		int rows2 = R > 16;
		for (int t0 = 0; t0 < n; t0 += PT) {
			int h0 = t0 / 16, two = n - t0 > 16;
			memset(acc, 0, sizeof acc);
			for (int b = 0; b <= nb; b++) {
				if (b < nb) {
				const uint8_t *a = wa + (size_t)b * PR * 32;
				size_t x0 = (size_t)h0 * nb + b, x1 = x0 + nb;
				int32_t (*c4)[256] = cb[b & 1];
				// C starts from the corrections: the same 16 tokens' values in
				// every row, hence the zero stride.
				_tile_loadd(4, a, 32);
				_tile_loadd(6, xb + x0 * 512, 64);
				_tile_loadd(0, ci + x0 * 16, 0);
				_tile_dpbusd(0, 4, 6);
				_tile_stored(0, c4[0], 64);
				if (rows2) {
					_tile_loadd(5, a + 16 * 32, 32);
					_tile_loadd(1, ci + x0 * 16, 0);
					_tile_dpbusd(1, 5, 6);
					_tile_stored(1, c4[1], 64);
				}
				if (two) {
					_tile_loadd(7, xb + x1 * 512, 64);
					_tile_loadd(2, ci + x1 * 16, 0);
					_tile_dpbusd(2, 4, 7);
					_tile_stored(2, c4[2], 64);
					if (rows2) {
						_tile_loadd(3, ci + x1 * 16, 0);
						_tile_dpbusd(3, 5, 7);
						_tile_stored(3, c4[3], 64);
					}
				}
				}
				if (b > 0) {
					int p = b - 1;
					const float *swb = sw + (size_t)p * PR;
					size_t x0 = (size_t)h0 * nb + p, x1 = x0 + nb;
					int32_t (*c4)[256] = cb[p & 1];
					post(c4[0], acc, 0, 0, dx + x0 * 16, swb);
					if (rows2) {
						post(c4[1], acc, 16, 0, dx + x0 * 16, swb);
					}
					if (two) {
						post(c4[2], acc, 0, 16, dx + x1 * 16, swb);
						if (rows2) {
							post(c4[3], acc, 16, 16, dx + x1 * 16, swb);
						}
					}
				}
			}
			int T = n - t0 < PT ? n - t0 : PT;
			for (int t = 0; t < T; t++) {
				float *out = dst + (size_t)(t0 + t) * m + o0;
				for (int r = 0; r < R; r++) {
					out[r] = (float)acc[r][t];
				}
			}
		}
	}
	_tile_release();
	free(buf);
	return 1;
}
