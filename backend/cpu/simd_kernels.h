// What simd.c and the kernel files by family (simd_float.c, simd_acts.c,
// simd_q4x8.c, simd_q32.c, simd_kquant.c, simd_iq4.c) share: the f16
// table, the helpers more than one family uses (static inline, so each file
// gets its own copy), and the kernels simd.c's table dispatches to.
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"
#include "simd_common.h"

// f16tab maps every half-precision bit pattern to float (filled by
// glint_simd_init), so that a block scale costs one load that vbroadcastss
// takes straight from memory: a scalar vcvtph2ps plus a register broadcast
// would spend two uops of the shuffle port, which unpacking the weights
// already saturates.
extern float glint_f16tab[65536];
#define f16tab glint_f16tab

// DECODE_KMAX bounds k for the per-call activation layouts of the K-quant
// decode kernels (simd_kquant.c), which live on the (C) stack: about 2k
// bytes.
#define DECODE_KMAX 16384

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


INLINE A2 int hsum8i(__m256i v) {
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
	return _mm_cvtsi128_si32(s);
}

// q4_unpack returns the 32 nibbles of a Q4_0 block in element order as
// unsigned bytes: byte j holds element j (low nibble) and j+16 (high), so the
// 16 bytes go to both 128-bit lanes and the upper lane shifts by 4.
INLINE A2 __m256i q4_unpack(const uint8_t *qs) {
	__m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
	v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
	return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// fma1 is fmaf(a, b, c), one rounding, as the reference's fmaf.
INLINE A2 float fma1(float a, float b, float c) {
	return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// lane_fma is acc + d·(float)is per lane, one rounding each.
INLINE A2 __m256 lane_fma(float d, __m256i is, __m256 acc) {
	return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(is), acc);
}

// fold8 adds the two 256-bit halves of v: the lanes of two chunks.
INLINE A5 __m256i fold8(__m512i v) {
	return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// kvalues_iq4nl, the 16 levels of IQ4_NL and IQ4_XS, as a pshufb table.
INLINE A2 __m256i iq4_table(void) {
	return _mm256_broadcastsi128_si256(
	    _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}

// glint_qargs holds a quantised matmul's operands (glint_matmat_q's
// arguments, rows apart).
typedef struct {
	int type;
	const int8_t *q;
	const float *d;
	const int32_t *c;
	const float *s;
	const int16_t *bs;
	int n, k;
	const uint8_t *w;
	size_t rowBytes;
	float *dst;
	int m;
} glint_qargs;

// A glint_qkernel computes rows lo…hi-1 of every token of a and reports 1,
// or declines, having done nothing, and reports 0.
typedef int (*glint_qkernel)(const glint_qargs *a, int lo, int hi);

// glint_qkernels are a weight type's kernels at one level, by the number
// of tokens (see qtab in simd.c); NULL where the next slot serves.
typedef struct {
	glint_qkernel decode;  // one token
	glint_qkernel tokens;  // up to GLINT_DECODE_TOKENS
	glint_qkernel prefill; // any number
} glint_qkernels;

// iq4_table512 is iq4_table's levels biased by 128 (1…241, unsigned, for
// vpdpbusd) in every 128-bit lane.
INLINE A5 __m512i iq4_table512(void) {
	return _mm512_broadcast_i32x4(_mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141, (char)153,
	                                            (char)166, (char)181, (char)197, (char)217, (char)241));
}

// QK defines name, a glint_qkernel that runs K(...) and reports 1 (the
// arguments from a, lo and hi); QK_DECLINES one that reports what K does.
// The family files define their table kernels so, calling their own
// static kernels with literal arguments, which GCC then specialises.
#define QK(name, K, ...)                                 \
	int name(const glint_qargs *a, int lo, int hi) { \
		K(__VA_ARGS__);                                  \
		return 1;                                        \
	}
#define QK_DECLINES(name, K, ...) \
	int name(const glint_qargs *a, int lo, int hi) { return K(__VA_ARGS__); }
// The argument lists of the kernels' shapes: rows of every token (QK_ROWS),
// of one token (QK_VROWS), of the 32-element tiles in lanes (QK_LANES).
#define QK_ROWS a->n, a->k, a->w, a->rowBytes, lo, hi, a->dst, a->m
#define QK_VROWS a->k, a->w, a->rowBytes, lo, hi, a->dst
#define QK_LANES(pairs) pairs, a->q, a->d, a->s, QK_ROWS

// The table's kernels, by family file.
#define QK_DECL(name) int name(const glint_qargs *a, int lo, int hi);
// simd_q4x8.c: Q4_0 matrices of a multiple of 8 rows, as they lie.
QK_DECL(qk_q4_0_avx2)
QK_DECL(qk_q4_0_vnni)
// simd_q32.c: the 32-element types in lanes.
QK_DECL(qk_q32_vec_vnni)
QK_DECL(qk_q40l_avx2)
QK_DECL(qk_q40l_vnni)
QK_DECL(qk_q5_0_avx2)
QK_DECL(qk_q5_0_vnni)
QK_DECL(qk_q4_1_avx2)
QK_DECL(qk_q4_1_vnni)
QK_DECL(qk_q5_1_avx2)
QK_DECL(qk_q5_1_vnni)
QK_DECL(qk_iq4nl_vec_avx2)
QK_DECL(qk_iq4nl_avx2)
QK_DECL(qk_iq4nl_vnni)
QK_DECL(qk_q8_0_avx2)
QK_DECL(qk_q8_0_vnni)
QK_DECL(qk_q8_0_prefill_avx2)
QK_DECL(qk_q8_0_prefill_vnni)
// simd_kquant.c: the K-quants, and IQ4_XS at AVX2.
QK_DECL(qk_kq_avx2)
QK_DECL(qk_q45k_vec_512)
QK_DECL(qk_q45k_512)
QK_DECL(qk_q23k_vec_512)
QK_DECL(qk_q23k_512)
QK_DECL(qk_q6k_vec_512)
QK_DECL(qk_q6k_vec_vnni)
QK_DECL(qk_q6k_512)
QK_DECL(qk_q6k_vnni)
// simd_iq4.c: IQ4_XS at VNNI.
QK_DECL(qk_iq4xs_vec_vnni)
QK_DECL(qk_iq4xs_vnni)
