// SIMD kernels for the CPU backend (see simd.go). Every function is compiled
// for its instruction set with a target attribute and chosen at run time, so
// the package builds with plain CFLAGS and still runs on CPUs that lack
// AVX-512 or AVX2.
//
// Float weights (F32, F16, BF16) meet float32 activations (rounded to F16
// or BF16 for those weights) and are widened exactly; every output is summed
// in the Go reference's order (kernels.go): for prefill sequentially within
// each chunk of KC elements, chunk sums added in sequence, which is the
// order the GEMM below keeps in its registers; for decode in 16 lanes.
// Quantised weights meet activations quantised as dtype.RoundActivations
// defines (llama.cpp's arithmetic): each block's dot product is an exact
// integer, scaled by the two block scales in float32, and those block terms
// are summed in double (quant.go says why that makes the order irrelevant).
// So every level gives the portable path's bits.
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

static A2 void init_f16tab(void) {
	for (int i = 0; i < 65536; i++) {
		f16tab[i] = _cvtsh_ss((uint16_t)i);
	}
}

int glint_simd_level(void) {
	__builtin_cpu_init();
	int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
	if (!avx2) {
		return 0;
	}
	init_f16tab();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
		if (!__builtin_cpu_supports("avx512vnni")) {
			return 2;
		}
		// vpermb/vpermt2b (VBMI) are what the level-4 kernels add; some
		// CPUs with VNNI lack them (Cascade Lake).
		return __builtin_cpu_supports("avx512vbmi") ? 4 : 3;
	}
	return 1;
}

// ---------------------------------------------------------------- helpers

// mul_rounded5 and mul_rounded2 are a product rounded to float32 that the
// compiler may not contract with the add that follows into an FMA (GCC does
// by default): the F32 kernels add rounded products, as the Go reference
// does. The empty asm makes the product opaque and costs no instruction.
INLINE A5 __m512 mul_rounded5(__m512 a, __m512 b) {
	__m512 p = _mm512_mul_ps(a, b);
	__asm__("" : "+v"(p));
	return p;
}

INLINE A2 __m256 mul_rounded2(__m256 a, __m256 b) {
	__m256 p = _mm256_mul_ps(a, b);
	__asm__("" : "+x"(p));
	return p;
}


// bf16x8 widens 8 BF16 values to floats (exactly).
INLINE A2 __m256 bf16x8(const uint8_t *p) {
	__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// ---------------------------------------------------------------- prefill
//
// Prefill with float weights is blocked as in Goto's GEMM. A panel of R
// weight rows (32 for AVX-512, 16 for AVX2) × KC elements of k is widened to
// float32 and transposed once (panel[kk*R + r]), then stays in L1 while the
// tokens stream past it: a micro-kernel keeps T tokens × R rows of sums in
// registers, loading R/16 (R/8) vectors of the panel and broadcasting T
// activations per k. Within a block of MC rows the k-chunks go outermost, so
// that every panel of the block reuses the same chunk of the activations
// (NT tokens × KC floats) and the block's partial sums (NT × MC floats)
// from L2, instead of each panel sweeping all of x again from L3 (4 MiB at
// k = 8192, more than L2). The chunk of activations is copied to a buffer
// whose rows are XLD floats apart: rows of x are k floats apart, a multiple
// of 4 KiB for every model, which maps a token tile's rows to the same
// cache sets, so that they evict each other and the panel.

// KC is the k-chunk of a panel: 32 rows × KC floats = 32 KiB, within L1
// (48 KiB) with room for the activations streaming past.
#define KC 256
// MC rows share one pass over the activations; NT tokens at most are in
// that pass, so that the chunk of activations (NT × XLD floats) and of
// partial sums (NT × MC floats) stay within L2 for any batch.
#define MC 256
#define NT 256
#define XLD (KC + 16)

// pack_fn fills a panel (see pack5); tiles_fn runs the micro-kernels for
// one panel over n tokens whose chunk of activations starts at xc, row t
// at xc + t*ldx, adding into dst (or writing, for the first chunk).
typedef void (*pack_fn)(const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel);
typedef void (*tiles_fn)(const float *panel, int len, const float *xc, size_t ldx, int n, float *dst, int m,
                         int o0, int rows, int first);

// TG tokens run between two slices of the prefetches (see prefetcher): a
// multiple of both micro-kernels' widths (12 and 6).
#define TG 24

// A prefetcher asks, a slice at a time, for the panel at (o0, c) to be
// brought into L2 while the current panel is in use. Weights come from
// memory, and a panel is R short runs of rows, which the hardware
// prefetchers pick up late; asking for all of it at once would stall on
// the few line-fill buffers that software prefetches occupy.
typedef struct {
	const char *base;
	size_t rowBytes;
	int lines; // per row
	int next, total;
} prefetcher;

static void pf_init(prefetcher *p, int R, int type, const uint8_t *w, size_t rowBytes, int o0, int hi, int c,
                    int k) {
	size_t es = type == T_F32 ? 4 : 2;
	int rows = hi - o0 < R ? hi - o0 : R;
	p->base = (const char *)(w + (size_t)o0 * rowBytes + es * (size_t)c);
	p->rowBytes = rowBytes;
	p->lines = (int)((es * (size_t)(k - c < KC ? k - c : KC) + 63) / 64);
	p->next = 0;
	p->total = rows * p->lines;
}

static void pf_step(prefetcher *p, int count) {
	for (; count > 0 && p->next < p->total; count--, p->next++) {
		int r = p->next / p->lines, l = p->next % p->lines;
		_mm_prefetch(p->base + (size_t)r * p->rowBytes + 64 * (size_t)l, _MM_HINT_T1);
	}
}

// matmat_float is the loop nest above, for panels of R rows; panel has room
// for R × KC floats.
static void matmat_float(int R, int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes,
                         int lo, int hi, float *dst, int m, pack_fn pack, tiles_fn tiles, float *panel) {
	if (k <= 0) {
		// No chunk would write dst: the sums are empty.
		for (int t = 0; t < n; t++) {
			memset(dst + (size_t)t * m + lo, 0, sizeof(float) * (size_t)(hi - lo));
		}
		return;
	}
	int nt = n < NT ? n : NT;
	// Without the buffer the kernels read x in place, only slower.
	float *xs = aligned_alloc(64, sizeof(float) * XLD * (size_t)nt);
	for (int ob = lo; ob < hi; ob += MC) {
		int obe = ob + MC < hi ? ob + MC : hi;
		for (int t0 = 0; t0 < n; t0 += NT) {
			int tn = n - t0 < NT ? n - t0 : NT;
			for (int c = 0; c < k; c += KC) {
				int len = k - c < KC ? k - c : KC;
				const float *xc = x + (size_t)t0 * k + c;
				size_t ldx = (size_t)k;
				if (xs != NULL) {
					for (int t = 0; t < tn; t++) {
						memcpy(xs + (size_t)t * XLD, xc + (size_t)t * k, sizeof(float) * (size_t)len);
					}
					xc = xs;
					ldx = XLD;
				}
				for (int o0 = ob; o0 < obe; o0 += R) {
					pack(w, rowBytes, o0, hi, c, len, panel);
					// The panel packed next, in this loop order.
					prefetcher pf = {0};
					if (o0 + R < obe) {
						pf_init(&pf, R, type, w, rowBytes, o0 + R, hi, c, k);
					} else if (c + KC < k) {
						pf_init(&pf, R, type, w, rowBytes, ob, hi, c + KC, k);
					} else if (t0 + NT < n) {
						pf_init(&pf, R, type, w, rowBytes, ob, hi, 0, k);
					} else if (obe < hi) {
						pf_init(&pf, R, type, w, rowBytes, obe, hi, 0, k);
					}
					int groups = (tn + TG - 1) / TG, slice = (pf.total + groups - 1) / groups;
					for (int t = 0; t < tn; t += TG) {
						pf_step(&pf, slice);
						tiles(panel, len, xc + (size_t)t * ldx, ldx, tn - t < TG ? tn - t : TG,
						      dst + (size_t)(t0 + t) * m, m, o0, hi - o0 < R ? hi - o0 : R, c == 0);
					}
				}
			}
		}
	}
	free(xs);
}

// tr16 transposes the 16 × 16 matrix whose rows are v[0…15].
INLINE A5 void tr16(__m512 v[16]) {
	__m512 t[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
	}
	// u[4i+j] holds, in 128-bit lane L, rows 4i…4i+3 of column 4L+j.
	__m512 u[16];
	for (int i = 0; i < 16; i += 4) {
		__m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
		__m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
		u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
		u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
		u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
		u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
	}
	for (int j = 0; j < 4; j++) {
		__m512 a = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
		__m512 b = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
		__m512 c = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
		__m512 d = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
		v[j] = _mm512_shuffle_f32x4(a, c, _MM_SHUFFLE(2, 0, 2, 0));
		v[4 + j] = _mm512_shuffle_f32x4(b, d, _MM_SHUFFLE(2, 0, 2, 0));
		v[8 + j] = _mm512_shuffle_f32x4(a, c, _MM_SHUFFLE(3, 1, 3, 1));
		v[12 + j] = _mm512_shuffle_f32x4(b, d, _MM_SHUFFLE(3, 1, 3, 1));
	}
}

// wide16 loads the elements at p that mk selects (zero elsewhere) as
// floats, rounded exactly as the reference dequantisation rounds them.
INLINE A5 __m512 wide16(int type, const uint8_t *p, __mmask16 mk) {
	switch (type) {
	case T_F32:
		return _mm512_maskz_loadu_ps(mk, p);
	case T_F16:
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, p));
	default:
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, p)), 16));
	}
}

// wide16u is wide16 of 16 whole elements: no mask, which some CPUs load
// more slowly.
INLINE A5 __m512 wide16u(int type, const uint8_t *p) {
	switch (type) {
	case T_F32:
		return _mm512_loadu_ps(p);
	case T_F16:
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
	default:
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
	}
}

// pack5 fills panel[kk*32 + r] with element c+kk of row o0+r for kk < len,
// zero for rows at or past hi, 16 rows × 16 elements at a time: the register
// transpose costs four shuffles per vector, where a store per element made
// packing a fifth of the time at 128 tokens.
INLINE A5 void pack5(int type, const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	size_t es = type == T_F32 ? 4 : 2;
	for (int g = 0; g < 32; g += 16) {
		int nr = hi - o0 - g < 0 ? 0 : hi - o0 - g > 16 ? 16 : hi - o0 - g;
		const uint8_t *base = w + (size_t)(o0 + g) * rowBytes + es * (size_t)c;
		for (int kk = 0; kk < len; kk += 16) {
			int cnt = len - kk < 16 ? len - kk : 16;
			__mmask16 mk = (__mmask16)((1u << cnt) - 1);
			__m512 v[16];
			for (int r = 0; r < 16; r++) {
				v[r] = r < nr ? wide16(type, base + r * rowBytes + es * kk, mk) : _mm512_setzero_ps();
			}
			tr16(v);
			for (int j = 0; j < cnt; j++) {
				_mm512_store_ps(panel + (size_t)(kk + j) * 32 + g, v[j]);
			}
		}
	}
}

static A5 void pack5_f32(const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	pack5(T_F32, w, rowBytes, o0, hi, c, len, panel);
}
static A5 void pack5_f16(const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	pack5(T_F16, w, rowBytes, o0, hi, c, len, panel);
}
static A5 void pack5_bf16(const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	pack5(T_BF16, w, rowBytes, o0, hi, c, len, panel);
}

// The AVX-512 micro-kernel: T tokens × 2 vectors of rows, accumulating over
// the chunk in registers and then adding into dst (which the first chunk
// writes).
#define T5 12
INLINE A5 void kern_avx512(int T, int fused, const float *panel, int len, const float *xc, size_t ldx, float *dst,
                           int m, int o0, __mmask16 m0, __mmask16 m1, int first) {
	__m512 acc[T5][2];
	for (int t = 0; t < T; t++) {
		acc[t][0] = _mm512_setzero_ps();
		acc[t][1] = _mm512_setzero_ps();
	}
	for (int kk = 0; kk < len; kk++) {
		__m512 w0 = _mm512_load_ps(panel + kk * 32), w1 = _mm512_load_ps(panel + kk * 32 + 16);
		for (int t = 0; t < T; t++) {
			__m512 xv = _mm512_set1_ps(xc[(size_t)t * ldx + kk]);
			if (fused) {
				acc[t][0] = _mm512_fmadd_ps(w0, xv, acc[t][0]);
				acc[t][1] = _mm512_fmadd_ps(w1, xv, acc[t][1]);
			} else {
				acc[t][0] = _mm512_add_ps(acc[t][0], mul_rounded5(w0, xv));
				acc[t][1] = _mm512_add_ps(acc[t][1], mul_rounded5(w1, xv));
			}
		}
	}
	// Every load before any store: rows of dst are m floats apart, often a
	// multiple of 4 KiB, and a load after a store to such an address waits
	// for the store (4K aliasing).
	if (!first) {
		for (int t = 0; t < T; t++) {
			const float *d = dst + (size_t)t * m + o0;
			acc[t][0] = _mm512_add_ps(acc[t][0], _mm512_maskz_loadu_ps(m0, d));
			acc[t][1] = _mm512_add_ps(acc[t][1], _mm512_maskz_loadu_ps(m1, d + 16));
		}
	}
	for (int t = 0; t < T; t++) {
		float *d = dst + (size_t)t * m + o0;
		_mm512_mask_storeu_ps(d, m0, acc[t][0]);
		_mm512_mask_storeu_ps(d + 16, m1, acc[t][1]);
	}
}

// TILES5 defines the panel sweep with the fused (F16, BF16: their products
// of rounded activations are exact, so an FMA rounds as the reference's
// separate multiply and add) or the unfused kernel (F32).
#define TILES5(name, fused)                                                                                    \
	static A5 void name(const float *panel, int len, const float *xc, size_t ldx, int n, float *dst, int m,    \
	                    int o0, int rows, int first) {                                                        \
		__mmask16 m0 = rows >= 16 ? 0xFFFF : (__mmask16)((1u << rows) - 1);                                   \
		__mmask16 m1 = rows <= 16 ? 0 : rows >= 32 ? 0xFFFF : (__mmask16)((1u << (rows - 16)) - 1);           \
		int t = 0;                                                                                            \
		for (; t + T5 <= n; t += T5) {                                                                        \
			kern_avx512(T5, fused, panel, len, xc + (size_t)t * ldx, ldx, dst + (size_t)t * m, m, o0, m0, m1,  \
			            first);                                                                               \
		}                                                                                                     \
		switch (n - t) {                                                                                      \
			CASE5(1, fused) CASE5(2, fused) CASE5(3, fused) CASE5(4, fused) CASE5(5, fused) CASE5(6, fused)    \
			CASE5(7, fused) CASE5(8, fused) CASE5(9, fused) CASE5(10, fused) CASE5(11, fused)                  \
		}                                                                                                     \
	}
#define CASE5(T, fused)                                                                                        \
	case T:                                                                                                   \
		kern_avx512(T, fused, panel, len, xc + (size_t)t * ldx, ldx, dst + (size_t)t * m, m, o0, m0, m1, first); \
		break;
TILES5(tiles5, 1)
TILES5(tiles5_f32, 0)
#undef CASE5
#undef TILES5

static A5 void matmat_avx512(int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes,
                             int lo, int hi, float *dst, int m) {
	float panel[KC * 32] __attribute__((aligned(64)));
	pack_fn pack = type == T_F32 ? pack5_f32 : type == T_F16 ? pack5_f16 : pack5_bf16;
	matmat_float(32, type, x, n, k, w, rowBytes, lo, hi, dst, m, pack, type == T_F32 ? tiles5_f32 : tiles5, panel);
}

// Decode with float weights has an order of its own, the reference's
// (kernels.go, dot): 16 lanes, lane j summing the products of elements
// j, j+16, j+32, … in sequence, then lanes j and j+8 added, and so on down
// to one (hsum8's tree after one 16 → 8 step). Each row is read as one
// stream, 16 elements at a time, four rows at once for four independent
// dependency chains; the sequential order of prefill would need a transpose
// per element, which measured three times slower than memory delivers.

// PF_DIST is how far ahead of each row the decode kernels prefetch: the
// hardware prefetchers stop at each 4 KiB page.
#define PF_DIST 4096

// lanes16 reduces 16 lane sums (lo: lanes 0-7, hi: 8-15) in the
// reference's order.
INLINE A2 float lanes16(__m256 lo, __m256 hi) { return hsum8(_mm256_add_ps(lo, hi)); }

INLINE A5 void mv5_rows(int R, int type, int fused, const float *x, int k, const uint8_t *w, size_t rowBytes,
                        float *dst) {
	size_t es = type == T_F32 ? 4 : 2;
	__m512 a[4];
	for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps();
	int i = 0;
	// 64 elements of a row per step: each row is read in whole cache lines
	// (two for F16 and BF16, four for F32), which keeps the memory streams
	// long. The four vectors of a row go into its one accumulator in turn.
	for (; i + 64 <= k; i += 64) {
		__m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
		__m512 x2 = _mm512_loadu_ps(x + i + 32), x3 = _mm512_loadu_ps(x + i + 48);
		for (int r = 0; r < R; r++) {
			const uint8_t *p = w + r * rowBytes + es * (size_t)i;
			for (size_t l = 0; l < 64 * es; l += 64) {
				_mm_prefetch((const char *)(p + PF_DIST + l), _MM_HINT_T0);
			}
			__m512 w0 = wide16u(type, p), w1 = wide16u(type, p + 16 * es);
			__m512 w2 = wide16u(type, p + 32 * es), w3 = wide16u(type, p + 48 * es);
			if (fused) {
				a[r] = _mm512_fmadd_ps(w0, x0, a[r]);
				a[r] = _mm512_fmadd_ps(w1, x1, a[r]);
				a[r] = _mm512_fmadd_ps(w2, x2, a[r]);
				a[r] = _mm512_fmadd_ps(w3, x3, a[r]);
			} else {
				a[r] = _mm512_add_ps(a[r], mul_rounded5(w0, x0));
				a[r] = _mm512_add_ps(a[r], mul_rounded5(w1, x1));
				a[r] = _mm512_add_ps(a[r], mul_rounded5(w2, x2));
				a[r] = _mm512_add_ps(a[r], mul_rounded5(w3, x3));
			}
		}
	}
	for (; i < k; i += 16) {
		// The missing lanes of a short last vector add +0, which changes no
		// sum.
		__mmask16 mk = k - i >= 16 ? 0xFFFF : (__mmask16)((1u << (k - i)) - 1);
		__m512 xv = _mm512_maskz_loadu_ps(mk, x + i);
		for (int r = 0; r < R; r++) {
			__m512 wv = wide16(type, w + r * rowBytes + es * (size_t)i, mk);
			a[r] = fused ? _mm512_fmadd_ps(wv, xv, a[r]) : _mm512_add_ps(a[r], mul_rounded5(wv, xv));
		}
	}
	for (int r = 0; r < R; r++) {
		dst[r] = lanes16(_mm512_castps512_ps256(a[r]), _mm512_extractf32x8_ps(a[r], 1));
	}
}

INLINE A5 void matvec5(int type, int fused, const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi,
                       float *dst) {
	for (int o = lo; o < hi; o += 4) {
		const uint8_t *wr = w + (size_t)o * rowBytes;
		switch (hi - o < 4 ? hi - o : 4) {
		case 1: mv5_rows(1, type, fused, x, k, wr, rowBytes, dst + o); break;
		case 2: mv5_rows(2, type, fused, x, k, wr, rowBytes, dst + o); break;
		case 3: mv5_rows(3, type, fused, x, k, wr, rowBytes, dst + o); break;
		default: mv5_rows(4, type, fused, x, k, wr, rowBytes, dst + o); break;
		}
	}
}

static A5 void matvec5_f32(const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst) {
	matvec5(T_F32, 0, x, k, w, rowBytes, lo, hi, dst);
}
static A5 void matvec5_f16(const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst) {
	matvec5(T_F16, 1, x, k, w, rowBytes, lo, hi, dst);
}
static A5 void matvec5_bf16(const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst) {
	matvec5(T_BF16, 1, x, k, w, rowBytes, lo, hi, dst);
}

// tr8 transposes the 8 × 8 matrix whose rows are v[0…7].
INLINE A2 void tr8(__m256 v[8]) {
	__m256 t[8], s[8];
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
	}
	// s[4h+j] holds, in 128-bit lane L, rows 4h…4h+3 of column 4L+j.
	for (int h = 0; h < 8; h += 4) {
		s[h] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
		s[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
		s[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
		s[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
	}
	for (int j = 0; j < 4; j++) {
		v[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
		v[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
	}
}

// wide8 loads cnt (≤ 8) elements at p as floats, zero past them.
INLINE A2 __m256 wide8(int type, const uint8_t *p, int cnt) {
	uint8_t tail[32];
	if (cnt < 8) {
		size_t es = type == T_F32 ? 4 : 2;
		memset(tail, 0, sizeof tail);
		memcpy(tail, p, es * (size_t)cnt);
		p = tail;
	}
	switch (type) {
	case T_F32:
		return _mm256_loadu_ps((const float *)p);
	case T_F16:
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
	default:
		return bf16x8(p);
	}
}

// pack2 is pack5 for the AVX2 kernels: panel[kk*16 + r], 8 × 8 at a time.
INLINE A2 void pack2(int type, const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	size_t es = type == T_F32 ? 4 : 2;
	for (int g = 0; g < 16; g += 8) {
		int nr = hi - o0 - g < 0 ? 0 : hi - o0 - g > 8 ? 8 : hi - o0 - g;
		const uint8_t *base = w + (size_t)(o0 + g) * rowBytes + es * (size_t)c;
		for (int kk = 0; kk < len; kk += 8) {
			int cnt = len - kk < 8 ? len - kk : 8;
			__m256 v[8];
			for (int r = 0; r < 8; r++) {
				v[r] = r < nr ? wide8(type, base + r * rowBytes + es * kk, cnt) : _mm256_setzero_ps();
			}
			tr8(v);
			for (int j = 0; j < cnt; j++) {
				_mm256_store_ps(panel + (size_t)(kk + j) * 16 + g, v[j]);
			}
		}
	}
}

static A2 void pack2_f32(const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	pack2(T_F32, w, rowBytes, o0, hi, c, len, panel);
}
static A2 void pack2_f16(const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	pack2(T_F16, w, rowBytes, o0, hi, c, len, panel);
}
static A2 void pack2_bf16(const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len, float *panel) {
	pack2(T_BF16, w, rowBytes, o0, hi, c, len, panel);
}

// The AVX2 micro-kernel has 16 registers: 6 tokens × 2 vectors of 8 rows.
#define T2 6
INLINE A2 void kern_avx2(int T, int fused, const float *panel, int len, const float *xc, size_t ldx, float *dst,
                         int m, int o0, int rows, int first) {
	__m256 acc[T2][2];
	for (int t = 0; t < T; t++) {
		acc[t][0] = _mm256_setzero_ps();
		acc[t][1] = _mm256_setzero_ps();
	}
	for (int kk = 0; kk < len; kk++) {
		__m256 w0 = _mm256_load_ps(panel + kk * 16), w1 = _mm256_load_ps(panel + kk * 16 + 8);
		for (int t = 0; t < T; t++) {
			__m256 xv = _mm256_broadcast_ss(xc + (size_t)t * ldx + kk);
			if (fused) {
				acc[t][0] = _mm256_fmadd_ps(w0, xv, acc[t][0]);
				acc[t][1] = _mm256_fmadd_ps(w1, xv, acc[t][1]);
			} else {
				acc[t][0] = _mm256_add_ps(acc[t][0], mul_rounded2(w0, xv));
				acc[t][1] = _mm256_add_ps(acc[t][1], mul_rounded2(w1, xv));
			}
		}
	}
	if (rows == 16) {
		// As in kern_avx512: every load before any store.
		if (!first) {
			for (int t = 0; t < T; t++) {
				const float *d = dst + (size_t)t * m + o0;
				acc[t][0] = _mm256_add_ps(acc[t][0], _mm256_loadu_ps(d));
				acc[t][1] = _mm256_add_ps(acc[t][1], _mm256_loadu_ps(d + 8));
			}
		}
		for (int t = 0; t < T; t++) {
			float *d = dst + (size_t)t * m + o0;
			_mm256_storeu_ps(d, acc[t][0]);
			_mm256_storeu_ps(d + 8, acc[t][1]);
		}
		return;
	}
	for (int t = 0; t < T; t++) {
		float *d = dst + (size_t)t * m + o0;
		float out[16];
		_mm256_storeu_ps(out, acc[t][0]);
		_mm256_storeu_ps(out + 8, acc[t][1]);
		for (int r = 0; r < rows; r++) {
			d[r] = first ? out[r] : d[r] + out[r];
		}
	}
}

// TILES2 is TILES5 for the AVX2 kernel.
#define TILES2(name, fused)                                                                                    \
	static A2 void name(const float *panel, int len, const float *xc, size_t ldx, int n, float *dst, int m,    \
	                    int o0, int rows, int first) {                                                        \
		int t = 0;                                                                                            \
		for (; t + T2 <= n; t += T2) {                                                                        \
			kern_avx2(T2, fused, panel, len, xc + (size_t)t * ldx, ldx, dst + (size_t)t * m, m, o0, rows, first); \
		}                                                                                                     \
		switch (n - t) {                                                                                      \
			CASE2(1, fused) CASE2(2, fused) CASE2(3, fused) CASE2(4, fused) CASE2(5, fused)                    \
		}                                                                                                     \
	}
#define CASE2(T, fused)                                                                                        \
	case T: kern_avx2(T, fused, panel, len, xc + (size_t)t * ldx, ldx, dst + (size_t)t * m, m, o0, rows, first); break;
TILES2(tiles2, 1)
TILES2(tiles2_f32, 0)
#undef CASE2
#undef TILES2

// matvec2 is matvec5 for AVX2: the 16 lanes in two vectors.
INLINE A2 void mv2_rows(int R, int type, int fused, const float *x, int k, const uint8_t *w, size_t rowBytes,
                        float *dst) {
	size_t es = type == T_F32 ? 4 : 2;
	__m256 lo[4], hi[4];
	for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_ps();
	for (int i = 0; i < k; i += 16) {
		int cnt = k - i < 16 ? k - i : 16;
		__m256 x0, x1;
		if (cnt == 16) {
			x0 = _mm256_loadu_ps(x + i);
			x1 = _mm256_loadu_ps(x + i + 8);
		} else {
			// The missing lanes add +0, which changes no sum.
			float t[16] = {0};
			memcpy(t, x + i, sizeof(float) * (size_t)cnt);
			x0 = _mm256_loadu_ps(t);
			x1 = _mm256_loadu_ps(t + 8);
		}
		for (int r = 0; r < R; r++) {
			const uint8_t *p = w + r * rowBytes + es * (size_t)i;
			if ((es * (size_t)i) % 64 == 0) {
				_mm_prefetch((const char *)(p + PF_DIST), _MM_HINT_T0);
			}
			__m256 w0 = wide8(type, p, cnt < 8 ? cnt : 8);
			__m256 w1 = cnt > 8 ? wide8(type, p + 8 * es, cnt - 8) : _mm256_setzero_ps();
			if (fused) {
				lo[r] = _mm256_fmadd_ps(w0, x0, lo[r]);
				hi[r] = _mm256_fmadd_ps(w1, x1, hi[r]);
			} else {
				lo[r] = _mm256_add_ps(lo[r], mul_rounded2(w0, x0));
				hi[r] = _mm256_add_ps(hi[r], mul_rounded2(w1, x1));
			}
		}
	}
	for (int r = 0; r < R; r++) {
		dst[r] = lanes16(lo[r], hi[r]);
	}
}

INLINE A2 void matvec2(int type, int fused, const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi,
                       float *dst) {
	for (int o = lo; o < hi; o += 4) {
		const uint8_t *wr = w + (size_t)o * rowBytes;
		switch (hi - o < 4 ? hi - o : 4) {
		case 1: mv2_rows(1, type, fused, x, k, wr, rowBytes, dst + o); break;
		case 2: mv2_rows(2, type, fused, x, k, wr, rowBytes, dst + o); break;
		case 3: mv2_rows(3, type, fused, x, k, wr, rowBytes, dst + o); break;
		default: mv2_rows(4, type, fused, x, k, wr, rowBytes, dst + o); break;
		}
	}
}

static A2 void matvec2_f32(const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst) {
	matvec2(T_F32, 0, x, k, w, rowBytes, lo, hi, dst);
}
static A2 void matvec2_f16(const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst) {
	matvec2(T_F16, 1, x, k, w, rowBytes, lo, hi, dst);
}
static A2 void matvec2_bf16(const float *x, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst) {
	matvec2(T_BF16, 1, x, k, w, rowBytes, lo, hi, dst);
}

static A2 void matmat_avx2(int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo,
                           int hi, float *dst, int m) {
	float panel[KC * 16] __attribute__((aligned(32)));
	pack_fn pack = type == T_F32 ? pack2_f32 : type == T_F16 ? pack2_f16 : pack2_bf16;
	matmat_float(16, type, x, n, k, w, rowBytes, lo, hi, dst, m, pack, type == T_F32 ? tiles2_f32 : tiles2, panel);
}

void glint_matmat(int level, int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo,
                  int hi, float *dst, int m) {
	if (level >= 2 && n == 1) {
		switch (type) {
		case T_F32: matvec5_f32(x, k, w, rowBytes, lo, hi, dst); break;
		case T_F16: matvec5_f16(x, k, w, rowBytes, lo, hi, dst); break;
		default: matvec5_bf16(x, k, w, rowBytes, lo, hi, dst); break;
		}
	} else if (level >= 2) {
		matmat_avx512(type, x, n, k, w, rowBytes, lo, hi, dst, m);
	} else if (n == 1) {
		switch (type) {
		case T_F32: matvec2_f32(x, k, w, rowBytes, lo, hi, dst); break;
		case T_F16: matvec2_f16(x, k, w, rowBytes, lo, hi, dst); break;
		default: matvec2_bf16(x, k, w, rowBytes, lo, hi, dst); break;
		}
	} else {
		matmat_avx2(type, x, n, k, w, rowBytes, lo, hi, dst, m);
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
// a quiet NaN).
static A2 void round_f16(const float *x, float *dst, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
	}
	for (; i < n; i++) {
		dst[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
	}
}

static A2 void round_bf16(const float *x, float *dst, size_t n) {
	const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
	const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), hi = _mm256_set1_epi32((int)0xFFFF0000u);
	const __m256i quiet = _mm256_set1_epi32(0x400000);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
		__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
		r = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
		_mm256_storeu_si256((__m256i *)(dst + i), _mm256_and_si256(r, hi));
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
	}
}

void glint_round_act(int type, const float *x, float *dst, size_t n) {
	if (type == T_F16) {
		round_f16(x, dst, n);
	} else {
		round_bf16(x, dst, n);
	}
}

void glint_quantize_q8_0(const float *x, int k, int off, int8_t *q, float *d, int32_t *c) {
	quantize_q8_0_avx2(x, k, off, q, d, c);
}

void glint_quantize_q8_k(const float *x, int k, int8_t *q, float *d, int16_t *bs) {
	quantize_q8_k_avx2(x, k, q, d, bs);
}

// ---------------------------------------------------------------- quantised dots
//
// A block dot product is Σ (qw − o)·qx with an exact int32 result. The
// unsigned×signed byte instructions (vpdpbusd, vpmaddubsw) want the weights
// unsigned, so they compute Σ u·qx with u = qw + o ≥ 0 and the activation
// quantiser has already stored the correction c = −o·Σ qx for the block
// (o = 8 for Q4_0, whose nibbles are stored as q+8; o = 128 for Q8_0, whose
// bytes become unsigned by flipping the sign bit). The correction starts
// the vpdpbusd accumulator, so it costs a load and no arithmetic.

// q4_unpack returns the 32 nibbles of a Q4_0 block in element order as
// unsigned bytes: byte j holds element j (low nibble) and j+16 (high), so the
// 16 bytes go to both 128-bit lanes and the upper lane shifts by 4.
INLINE A2 __m256i q4_unpack(const uint8_t *qs) {
	__m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
	v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
	return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// Block dots for Q4_0 (bytes at p, 16 bytes of nibbles) and Q8_0 (32 bytes):
// VNNI adds to the correction init; AVX2 multiplies in int16 (exact: at most
// 2·15·127 for Q4_0, and for Q8_0 ggml's |qw|·sign(qx, qw) form, at most
// 2·128·127, which needs no correction) and sums pairs with vpmaddwd.
INLINE A3 __m256i bdot_q4_vnni(__m256i init, const uint8_t *qs, __m256i x) {
	return _mm256_dpbusd_epi32(init, q4_unpack(qs), x);
}

INLINE A3 __m256i bdot_q8_vnni(__m256i init, const uint8_t *qs, __m256i x) {
	__m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
	return _mm256_dpbusd_epi32(init, u, x);
}

INLINE A2 __m256i bdot_q4_avx2(__m256i init, const uint8_t *qs, __m256i x) {
	__m256i p = _mm256_maddubs_epi16(q4_unpack(qs), x);
	return _mm256_add_epi32(init, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

INLINE A2 __m256i bdot_q8_avx2(__m256i init, const uint8_t *qs, __m256i x) {
	(void)init;
	__m256i w = _mm256_loadu_si256((const __m256i *)qs);
	__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
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

// add_terms adds the block terms c (float32, already rounded) to two
// vectors of double sums, lanes 0-3 and 4-7.
INLINE A2 void add_terms(__m256 c, __m256d *lo, __m256d *hi) {
	*lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(c)));
	*hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)));
}

// QTILE defines a micro-kernel for R weight rows × T tokens of Q4_0 or Q8_0
// (block size bb bytes): each unpacked weight block and each activation
// block is loaded once and used T (R) times. Per block, the dot products'
// lanes are summed to exact integers (sum8x8), each is scaled by dw·dx in
// float32 as the reference does, and added in double. Pair (r, t) keeps its
// sum in lane 4r + t of acc (pairs past T are zero), so that the scales
// of a vector of 8 pairs are two rows' dw times the same four dx.
#define QTILE(name, attr, bdot, bb)                                                                          \
	INLINE attr void name(int R, int T, const int8_t *q, const float *xd, const int32_t *xc, int k,            \
	                      const uint8_t *w, size_t rowBytes, float *dst, int m) {                            \
		__m256d acc[4];                                                                                       \
		for (int i = 0; i < 4; i++) acc[i] = _mm256_setzero_pd();                                             \
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
				for (int r = 0; r < R; r++) dp[4 * r + t] = bdot(init, w + r * rowBytes + (size_t)b * bb + 2, xv); \
			}                                                                                                 \
			for (int r = 0; r < R; r += 2) {                                                                  \
				__m128 d0 = _mm_set1_ps(f16tab[le16(w + r * rowBytes + (size_t)b * bb)]);                     \
				__m128 d1 = r + 1 < R ? _mm_set1_ps(f16tab[le16(w + (r + 1) * rowBytes + (size_t)b * bb)])    \
				                      : _mm_setzero_ps();                                                     \
				__m256 sc = _mm256_mul_ps(_mm256_set_m128(d1, d0), dx8);                                      \
				__m256 c = _mm256_mul_ps(_mm256_cvtepi32_ps(sum8x8(dp + 4 * r)), sc);                         \
				add_terms(c, &acc[r], &acc[r + 1]);                                                           \
			}                                                                                                 \
		}                                                                                                     \
		double out[16];                                                                                       \
		for (int i = 0; i < 4; i++) _mm256_storeu_pd(out + 4 * i, acc[i]);                                    \
		for (int r = 0; r < R; r++)                                                                           \
			for (int t = 0; t < T; t++) dst[(size_t)t * m + r] = (float)out[4 * r + t];                       \
	}

QTILE(tile_q4_vnni, A3, bdot_q4_vnni, 18)
QTILE(tile_q8_vnni, A3, bdot_q8_vnni, 34)
QTILE(tile_q4_avx2, A2, bdot_q4_avx2, 18)
QTILE(tile_q8_avx2, A2, bdot_q8_avx2, 34)

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

// dot_q6_k is ggml's Q6_K×Q8_K: per super-block d·dx·Σ_j sc[j]·Σ (q−32)·qx
// over its sixteen 16-element groups. vpmaddubsw gives int16 pair sums
// (at most 2·63·127), vpmaddwd multiplies them by the group's scale, and the
// −32 is applied once per super-block from the activation group sums.
// VNNI would save nothing here: the scale multiply needs vpmaddwd anyway.
static A2 float dot_q6_k(const int8_t *q, const float *xd, const int16_t *bs, const uint8_t *w, int k, size_t pf) {
	double acc = 0;
	for (int b = 0; b < k / 256; b++) {
		const uint8_t *blk = w + (size_t)b * 210;
		// Rows are read in order; fetching pf bytes ahead hides the miss at
		// each 4 KiB page, where the hardware prefetchers stop.
		for (int i = 0; i < 210; i += 64) {
			_mm_prefetch((const char *)(blk + pf + i), _MM_HINT_T0);
		}
		const int8_t *sc = (const int8_t *)(blk + 192);
		__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
		__m256i corr = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)(bs + 16 * b)));
		__m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
		for (int half = 0; half < 2; half++) {
			__m256i qv[4];
			q6k_unpack(blk + 64 * half, blk + 128 + 32 * half, qv);
			__m256i s8 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(sc + 8 * half))));
			const int8_t *xh = q + 256 * b + 128 * half;
			for (int j = 0; j < 4; j++) {
				// Lower lane: scale 2j of this half for all 8 int16; upper: 2j+1.
				const __m256i sh = _mm256_setr_epi8(4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1,
				                                     4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1, 4 * j, 4 * j + 1,
				                                     4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3,
				                                     4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3, 4 * j + 2, 4 * j + 3);
				__m256i p = _mm256_maddubs_epi16(qv[j], _mm256_loadu_si256((const __m256i *)(xh + 32 * j)));
				isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(s8, sh)));
			}
		}
		// The super-block's term, rounded as the reference rounds it, added
		// in double (quant.go says why).
		float c = f16at(blk + 208) * xd[b] * (float)hsum8i(isum);
		acc += c;
	}
	return (float)acc;
}

// CASES4 expands to the four token counts of an R-row tile, each a call
// with constant shape.
#define CASE1(tile, R, T) \
	case R * 8 + T: tile(R, T, qt, dt, ct, k, wr, rowBytes, d, m); break;
#define CASES4(tile, R) CASE1(tile, R, 1) CASE1(tile, R, 2) CASE1(tile, R, 3) CASE1(tile, R, 4)

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
QMATMAT(matmat_q8_vnni, A3, tile_q8_vnni, 4)
QMATMAT(matmat_q4_avx2, A2, tile_q4_avx2, 2)
QMATMAT(matmat_q8_avx2, A2, tile_q8_avx2, 2)

// ---------------------------------------------------------------- VBMI: Q4_0, Q8_0 in 512-bit groups
//
// One token against Q4_0 or Q8_0 weights is bound by how fast the weights
// can be unpacked, not by memory, unless each block costs few instructions.
// These kernels (level 4: VNNI plus VBMI) work on 512-bit vectors: one
// vpermt2b gathers the quants of four Q4_0 blocks (two Q8_0 blocks) from
// their 18- (34-) byte records, and one vpermw spreads the blocks' f16
// scales over the lanes that hold each block's partial sums. Four rows'
// partial sums are then summed per block in one shuffle tree (sum4x4), so
// that a group costs one convert, two multiplies and the double adds for
// 16 block terms instead of per block and row. The activations
// are laid out once per call to match: for Q4_0 low nibbles (elements 0-15
// of a block) and high nibbles (16-31) of four blocks each fill one vector,
// and dx and the correction c are spread to the same lanes (c in the first
// lane of its block, where vpdpbusd's accumulator starts).
//
// Prefill uses the same Q4_0 groups in tiles of 4 rows × 4 tokens. Q8_0
// prefill keeps the 256-bit tiles: with no nibbles to unpack, both were
// bound by vpdpbusd and the int→float convert, which share one port at
// 512 bits, and measured the same (before the double sums).

// DECODE_KMAX bounds k for the per-call activation layout, which lives on
// the (C) stack: about 2k bytes.
#define DECODE_KMAX 16384

// Q4_0 block j (0…3) of a group: quants at bytes 18j+2 … 18j+17, scale at
// 18j; the group is 72 bytes, so the last 8 bytes come from a second load.
INLINE AV __m512i q4_group_idx(void) {
	uint8_t idx[64];
	for (int j = 0; j < 4; j++)
		for (int i = 0; i < 16; i++) idx[16 * j + i] = (uint8_t)(18 * j + 2 + i);
	return _mm512_loadu_si512(idx);
}

INLINE AV __m512i scale_idx(int per, int stride) {
	uint16_t idx[32];
	for (int i = 0; i < 32; i++) idx[i] = (uint16_t)(stride * (i / per % (16 / per)));
	return _mm512_loadu_si512(idx);
}

// sum4x4 returns, in each 128-bit lane L, the sums of lane L's four int32
// of s0, s1, s2 and s3, in that order: the exact dot products of one block
// (Q4_0) or half-block (Q8_0) for four rows.
INLINE AV __m512i sum4x4(__m512i s0, __m512i s1, __m512i s2, __m512i s3) {
	__m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(s0, s1), _mm512_unpackhi_epi32(s0, s1));
	__m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(s2, s3), _mm512_unpackhi_epi32(s2, s3));
	return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

// tr4 gathers, in each 128-bit lane, one value of each of a0…a3, whose four
// values in that lane are equal (the block scales): the layout of sum4x4.
INLINE AV __m512 tr4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
	__m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(a0, a1)), t1 = _mm512_castps_pd(_mm512_unpacklo_ps(a2, a3));
	return _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t1));
}

// add_terms16 adds the float32 block terms c to two vectors of double sums,
// lanes 0-7 and 8-15.
INLINE AV void add_terms16(__m512 c, __m512d *lo, __m512d *hi) {
	*lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(c)));
	*hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(c, 1)));
}

// row_sum4 is row r's total of double sums laid out as by sum4x4 over four
// blocks (acc[0]: blocks 0 and 1, acc[1]: blocks 2 and 3).
INLINE AV double row_sum4(const __m512d acc[2], int r) {
	double a[16];
	_mm512_storeu_pd(a, acc[0]);
	_mm512_storeu_pd(a + 8, acc[1]);
	return a[r] + a[4 + r] + a[8 + r] + a[12 + r];
}

// term_q4 and term_q8 are one block's term as the reference rounds it:
// (dw·dx)·Σ qw·qx in float32.
INLINE AV float term_q4(const uint8_t *blk, const int8_t *q, float dx, int32_t c) {
	__m256i dp = bdot_q4_vnni(_mm256_zextsi128_si256(_mm_cvtsi32_si128(c)), blk + 2, _mm256_loadu_si256((const __m256i *)q));
	return f16tab[le16(blk)] * dx * (float)hsum8i(dp);
}

INLINE AV float term_q8(const uint8_t *blk, const int8_t *q, float dx, int32_t c) {
	__m256i dp = bdot_q8_vnni(_mm256_zextsi128_si256(_mm_cvtsi32_si128(c)), blk + 2, _mm256_loadu_si256((const __m256i *)q));
	return f16tab[le16(blk)] * dx * (float)hsum8i(dp);
}

// q4_decode_rows accumulates R rows (R ≤ 4) of whole 4-block groups into
// acc, laid out as row_sum4 reads it.
INLINE AV void q4_decode_rows(int R, const int8_t *xr, const float *dxv, const int32_t *ci, int ng,
                              const uint8_t *w, size_t rowBytes, __m512d acc[2]) {
	const __m512i gidx = q4_group_idx(), sidx = scale_idx(4, 9), m4 = _mm512_set1_epi8(0x0F);
	acc[0] = acc[1] = _mm512_setzero_pd();
	for (int g = 0; g < ng; g++) {
		__m512i xl = _mm512_loadu_si512(xr + 128 * g), xh = _mm512_loadu_si512(xr + 128 * g + 64);
		__m512 dx = _mm512_loadu_ps(dxv + 16 * g);
		__m512i c = _mm512_loadu_si512(ci + 16 * g);
		__m512i s[4];
		__m512 sw[4];
		for (int r = 0; r < 4; r++) {
			if (r >= R) {
				s[r] = _mm512_setzero_si512();
				sw[r] = _mm512_setzero_ps();
				continue;
			}
			const uint8_t *p = w + r * rowBytes + 72 * (size_t)g;
			// The next pass reads 4 rows further on; fetching it now hides the
			// miss at each 4 KiB page, where the hardware prefetchers stop.
			_mm_prefetch((const char *)(p + 4 * rowBytes), _MM_HINT_T0);
			_mm_prefetch((const char *)(p + 4 * rowBytes + 64), _MM_HINT_T0);
			__m512i a = _mm512_loadu_si512(p);
			__m512i b = _mm512_zextsi128_si512(_mm_loadl_epi64((const __m128i *)(p + 64)));
			__m512i qs = _mm512_permutex2var_epi8(a, gidx, b);
			s[r] = _mm512_dpbusd_epi32(c, _mm512_and_si512(qs, m4), xl);
			s[r] = _mm512_dpbusd_epi32(s[r], _mm512_and_si512(_mm512_srli_epi16(qs, 4), m4), xh);
			sw[r] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, a)));
		}
		__m512 sc = _mm512_mul_ps(tr4(sw[0], sw[1], sw[2], sw[3]), dx);
		__m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(sum4x4(s[0], s[1], s[2], s[3])), sc);
		add_terms16(t, &acc[0], &acc[1]);
	}
}

static AV void matvec_q4_vnni(const int8_t *q, const float *xd, const int32_t *xc, int k, const uint8_t *w,
                              size_t rowBytes, int lo, int hi, float *dst) {
	int nb = k / 32, ng = nb / 4;
	int8_t xr[ng * 128 + 1] __attribute__((aligned(64)));
	float dxv[ng * 16 + 1] __attribute__((aligned(64)));
	int32_t ci[ng * 16 + 1] __attribute__((aligned(64)));
	for (int g = 0; g < ng; g++) {
		for (int j = 0; j < 4; j++) {
			int b = 4 * g + j;
			memcpy(xr + 128 * g + 16 * j, q + 32 * b, 16);
			memcpy(xr + 128 * g + 64 + 16 * j, q + 32 * b + 16, 16);
			for (int l = 0; l < 4; l++) {
				dxv[16 * g + 4 * j + l] = xd[b];
				ci[16 * g + 4 * j + l] = l == 0 ? xc[b] : 0;
			}
		}
	}
	for (int o = lo; o < hi; o += 4) {
		int R = hi - o < 4 ? hi - o : 4;
		const uint8_t *wr = w + (size_t)o * rowBytes;
		__m512d acc[2];
		switch (R) {
		case 1: q4_decode_rows(1, xr, dxv, ci, ng, wr, rowBytes, acc); break;
		case 2: q4_decode_rows(2, xr, dxv, ci, ng, wr, rowBytes, acc); break;
		case 3: q4_decode_rows(3, xr, dxv, ci, ng, wr, rowBytes, acc); break;
		default: q4_decode_rows(4, xr, dxv, ci, ng, wr, rowBytes, acc); break;
		}
		for (int r = 0; r < R; r++) {
			double sum = row_sum4(acc, r);
			// Blocks past the last whole group, one at a time.
			for (int b = 4 * ng; b < nb; b++) {
				sum += term_q4(wr + r * rowBytes + (size_t)b * 18, q + 32 * b, xd[b], xc[b]);
			}
			dst[o + r] = (float)sum;
		}
	}
}

// Q8_0 block j (0, 1) of a pair: quants at bytes 34j+2 … 34j+33, scale at
// 34j; the pair is 68 bytes, so the last 4 bytes come from a second load.
INLINE AV __m512i q8_pair_idx(void) {
	uint8_t idx[64];
	for (int j = 0; j < 2; j++)
		for (int i = 0; i < 32; i++) idx[32 * j + i] = (uint8_t)(34 * j + 2 + i);
	return _mm512_loadu_si512(idx);
}

// q8_decode_rows accumulates R rows (R ≤ 4) of whole block pairs into acc:
// lanes 0-3 hold rows 0-3 of the first block of each pair, lanes 4-7 of the
// second.
INLINE AV void q8_decode_rows(int R, const int8_t *q, const float *dxv, const int32_t *ci, int np,
                              const uint8_t *w, size_t rowBytes, __m512d *acc) {
	const __m512i pidx = q8_pair_idx(), sidx = scale_idx(8, 17), flip = _mm512_set1_epi8((char)0x80);
	*acc = _mm512_setzero_pd();
	for (int g = 0; g < np; g++) {
		__m512i x = _mm512_loadu_si512(q + 64 * g);
		__m512 dx = _mm512_loadu_ps(dxv + 16 * g);
		__m512i c = _mm512_loadu_si512(ci + 16 * g);
		__m512i s[4];
		__m512 sw[4];
		for (int r = 0; r < 4; r++) {
			if (r >= R) {
				s[r] = _mm512_setzero_si512();
				sw[r] = _mm512_setzero_ps();
				continue;
			}
			const uint8_t *p = w + r * rowBytes + 68 * (size_t)g;
			_mm_prefetch((const char *)(p + 4 * rowBytes), _MM_HINT_T0);
			_mm_prefetch((const char *)(p + 4 * rowBytes + 64), _MM_HINT_T0);
			int32_t tail;
			memcpy(&tail, p + 64, 4);
			__m512i a = _mm512_loadu_si512(p);
			__m512i qs = _mm512_permutex2var_epi8(a, pidx, _mm512_zextsi128_si512(_mm_cvtsi32_si128(tail)));
			s[r] = _mm512_dpbusd_epi32(c, _mm512_xor_si512(qs, flip), x);
			sw[r] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, a)));
		}
		// Half-block sums per 128-bit lane; adding the neighbouring lane
		// completes each block in lanes 0 (first block) and 2 (second).
		__m512i h = sum4x4(s[0], s[1], s[2], s[3]);
		h = _mm512_add_epi32(h, _mm512_shuffle_i32x4(h, h, _MM_SHUFFLE(2, 3, 0, 1)));
		__m512 sc = _mm512_mul_ps(tr4(sw[0], sw[1], sw[2], sw[3]), dx);
		__m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(h), sc);
		t = _mm512_shuffle_f32x4(t, t, _MM_SHUFFLE(2, 0, 2, 0));
		*acc = _mm512_add_pd(*acc, _mm512_cvtps_pd(_mm512_castps512_ps256(t)));
	}
}

static AV void matvec_q8_vnni(const int8_t *q, const float *xd, const int32_t *xc, int k, const uint8_t *w,
                              size_t rowBytes, int lo, int hi, float *dst) {
	int nb = k / 32, np = nb / 2;
	float dxv[np * 16 + 1] __attribute__((aligned(64)));
	int32_t ci[np * 16 + 1] __attribute__((aligned(64)));
	for (int g = 0; g < np; g++) {
		for (int l = 0; l < 16; l++) {
			dxv[16 * g + l] = xd[2 * g + l / 8];
			ci[16 * g + l] = l % 8 == 0 ? xc[2 * g + l / 8] : 0;
		}
	}
	for (int o = lo; o < hi; o += 4) {
		int R = hi - o < 4 ? hi - o : 4;
		const uint8_t *wr = w + (size_t)o * rowBytes;
		__m512d acc;
		switch (R) {
		case 1: q8_decode_rows(1, q, dxv, ci, np, wr, rowBytes, &acc); break;
		case 2: q8_decode_rows(2, q, dxv, ci, np, wr, rowBytes, &acc); break;
		case 3: q8_decode_rows(3, q, dxv, ci, np, wr, rowBytes, &acc); break;
		default: q8_decode_rows(4, q, dxv, ci, np, wr, rowBytes, &acc); break;
		}
		double a[8];
		_mm512_storeu_pd(a, acc);
		for (int r = 0; r < R; r++) {
			double sum = a[r] + a[4 + r];
			for (int b = 2 * np; b < nb; b++) {
				sum += term_q8(wr + r * rowBytes + (size_t)b * 34, q + 32 * b, xd[b], xc[b]);
			}
			dst[o + r] = (float)sum;
		}
	}
}

// q4_prep lays out one token's activations for the Q4_0 kernels below (see
// the section comment).
INLINE void q4_prep(const int8_t *q, const float *xd, const int32_t *xc, int ng, int8_t *xr, float *dxv,
                    int32_t *ci) {
	for (int g = 0; g < ng; g++) {
		for (int j = 0; j < 4; j++) {
			int b = 4 * g + j;
			memcpy(xr + 128 * g + 16 * j, q + 32 * b, 16);
			memcpy(xr + 128 * g + 64 + 16 * j, q + 32 * b + 16, 16);
			for (int l = 0; l < 4; l++) {
				dxv[16 * g + 4 * j + l] = xd[b];
				ci[16 * g + 4 * j + l] = l == 0 ? xc[b] : 0;
			}
		}
	}
}

// q4_tile is the prefill counterpart of q4_decode_rows: R rows × T tokens
// (each ≤ 4), each weight group unpacked once and used T times. Token t's
// layout is at xr + t*ng*128, dxv + t*ng*16 and ci + t*ng*16; the blocks
// past the last whole group come straight from q, xd and xc.
INLINE AV void q4_tile(int R, int T, const int8_t *xr, const float *dxv, const int32_t *ci, int ng,
                       const int8_t *q, const float *xd, const int32_t *xc, int k, const uint8_t *w,
                       size_t rowBytes, float *dst, int m) {
	const __m512i gidx = q4_group_idx(), sidx = scale_idx(4, 9), m4 = _mm512_set1_epi8(0x0F);
	__m512d acc[4][2];
	for (int t = 0; t < T; t++) acc[t][0] = acc[t][1] = _mm512_setzero_pd();
	for (int g = 0; g < ng; g++) {
		__m512i wl[4], wh[4];
		__m512 sw[4];
		for (int r = 0; r < 4; r++) {
			if (r >= R) {
				wl[r] = wh[r] = _mm512_setzero_si512();
				sw[r] = _mm512_setzero_ps();
				continue;
			}
			const uint8_t *p = w + r * rowBytes + 72 * (size_t)g;
			__m512i a = _mm512_loadu_si512(p);
			__m512i b = _mm512_zextsi128_si512(_mm_loadl_epi64((const __m128i *)(p + 64)));
			__m512i qs = _mm512_permutex2var_epi8(a, gidx, b);
			wl[r] = _mm512_and_si512(qs, m4);
			wh[r] = _mm512_and_si512(_mm512_srli_epi16(qs, 4), m4);
			sw[r] = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, a)));
		}
		__m512 swt = tr4(sw[0], sw[1], sw[2], sw[3]);
		for (int t = 0; t < T; t++) {
			size_t xo = (size_t)t * ng * 128 + 128 * (size_t)g, so = (size_t)t * ng * 16 + 16 * (size_t)g;
			__m512i xl = _mm512_loadu_si512(xr + xo), xh = _mm512_loadu_si512(xr + xo + 64);
			__m512 dx = _mm512_loadu_ps(dxv + so);
			__m512i c = _mm512_loadu_si512(ci + so);
			__m512i s[4];
			for (int r = 0; r < 4; r++) {
				s[r] = r < R ? _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, wl[r], xl), wh[r], xh) : _mm512_setzero_si512();
			}
			__m512 tt = _mm512_mul_ps(_mm512_cvtepi32_ps(sum4x4(s[0], s[1], s[2], s[3])), _mm512_mul_ps(swt, dx));
			add_terms16(tt, &acc[t][0], &acc[t][1]);
		}
	}
	int nb = k / 32;
	for (int t = 0; t < T; t++) {
		for (int r = 0; r < R; r++) {
			double sum = row_sum4(acc[t], r);
			for (int b = 4 * ng; b < nb; b++) {
				sum += term_q4(w + r * rowBytes + (size_t)b * 18, q + (size_t)t * k + 32 * b, xd[(size_t)t * nb + b],
				               xc[(size_t)t * nb + b]);
			}
			dst[(size_t)t * m + r] = (float)sum;
		}
	}
}

// matmat_q4_vbmi runs q4_tile over tiles of 4 tokens × 4 rows, laying out
// each token tile's activations once; the rows lo…hi-1 it then sweeps stay
// in L2 across token tiles. It returns 0 (having done nothing) when the
// layout buffer cannot be allocated.
static AV int matmat_q4_vbmi(const int8_t *q, const float *xd, const int32_t *xc, int n, int k,
                             const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {
	int nb = k / 32, ng = nb / 4;
	size_t xrn = (size_t)4 * ng * 128, sn = (size_t)4 * ng * 16;
	uint8_t *buf = aligned_alloc(64, xrn + 8 * sn);
	if (buf == NULL) {
		return 0;
	}
	int8_t *xr = (int8_t *)buf;
	float *dxv = (float *)(buf + xrn);
	int32_t *ci = (int32_t *)(buf + xrn + 4 * sn);
	for (int t0 = 0; t0 < n; t0 += 4) {
		int T = n - t0 < 4 ? n - t0 : 4;
		for (int t = 0; t < T; t++) {
			q4_prep(q + (size_t)(t0 + t) * k, xd + (size_t)(t0 + t) * nb, xc + (size_t)(t0 + t) * nb, ng,
			        xr + (size_t)t * ng * 128, dxv + (size_t)t * ng * 16, ci + (size_t)t * ng * 16);
		}
		const int8_t *qt = q + (size_t)t0 * k;
		const float *dt = xd + (size_t)t0 * nb;
		const int32_t *ct = xc + (size_t)t0 * nb;
		for (int o = lo; o < hi; o += 4) {
			int R = hi - o < 4 ? hi - o : 4;
			const uint8_t *wr = w + (size_t)o * rowBytes;
			float *d = dst + (size_t)t0 * m + o;
			switch (R * 8 + T) {
#define C4(R, T) \
	case R * 8 + T: q4_tile(R, T, xr, dxv, ci, ng, qt, dt, ct, k, wr, rowBytes, d, m); break;
#define C4S(R) C4(R, 1) C4(R, 2) C4(R, 3) C4(R, 4)
				C4S(1) C4S(2) C4S(3) C4S(4)
#undef C4S
#undef C4
			}
		}
	}
	free(buf);
	return 1;
}

void glint_matmat_q(int level, int type, const int8_t *q, const float *d, const int32_t *c, const int16_t *bs,
                    int n, int k, const uint8_t *w, size_t rowBytes, int lo, int hi, float *dst, int m) {
	switch (type) {
	case T_Q4_0:
		if (level >= 4 && n == 1 && k >= 128 && k <= DECODE_KMAX) {
			matvec_q4_vnni(q, d, c, k, w, rowBytes, lo, hi, dst);
		} else if (level >= 3) {
			if (!(level >= 4 && k >= 128 && matmat_q4_vbmi(q, d, c, n, k, w, rowBytes, lo, hi, dst, m))) {
				matmat_q4_vnni(q, d, c, n, k, w, rowBytes, lo, hi, dst, m);
			}
		} else {
			matmat_q4_avx2(q, d, c, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q8_0:
		if (level >= 4 && n == 1 && k >= 64 && k <= DECODE_KMAX) {
			matvec_q8_vnni(q, d, c, k, w, rowBytes, lo, hi, dst);
		} else if (level >= 3) {
			matmat_q8_vnni(q, d, c, n, k, w, rowBytes, lo, hi, dst, m);
		} else {
			matmat_q8_avx2(q, d, c, n, k, w, rowBytes, lo, hi, dst, m);
		}
		break;
	case T_Q6_K:
		for (int t = 0; t < n; t++) {
			for (int o = lo; o < hi; o++) {
				dst[(size_t)t * m + o] = dot_q6_k(q + (size_t)t * k, d + (size_t)t * (k / 256),
				                                  bs + (size_t)t * (k / 16), w + (size_t)o * rowBytes, k,
				                                  2 * rowBytes);
			}
		}
		break;
	}
}
