// SIMD kernels for the CPU backend (see simd.go): the f16 table and the
// quantised matmuls' dispatch; the kernels themselves are in files by
// family (simd_kernels.h names them). Every function is compiled for its
// instruction set with a target attribute and chosen at run time, so the
// package builds with plain CFLAGS and still runs on CPUs that lack
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

#include "simd_kernels.h"

float glint_f16tab[65536];

A2 void glint_simd_init(void) {
	for (int i = 0; i < 65536; i++) {
		f16tab[i] = _cvtsh_ss((uint16_t)i);
	}
}

// ---------------------------------------------------------------- the quantised kernels by type
//
// qtab gives, per weight type and level, the kernels of a quantised matmul
// (as ggml's type_traits_cpu): glint_matmat_q starts at the slot the token
// count picks (decode: one token; tokens: up to GLINT_DECODE_TOKENS;
// prefill: more) and takes the first kernel from there on, in that order,
// that does the work: a slot may be empty, and a kernel may decline (the
// AVX-512 K-quant ones, when k is too long for their stack or their buffer
// cannot be allocated), then the AVX2 level's kernels take it the same way.
// Every kernel gives the same bits (TestMatMulLevelsBitExact), so the
// table chooses speed alone.

// A row of the table: the same kernels at every level from AVX2
// (ALL), from AVX-512 or VNNI on (the levels below as AVX2's); a row's later
// entries override its earlier ones.
#define AT(l, d, t, p) [l] = {d, t, p}
#define FROM_VNNI(d, t, p) AT(GLINT_VNNI, d, t, p), AT(GLINT_VBMI, d, t, p)
#define FROM_AVX512(d, t, p) AT(GLINT_AVX512, d, t, p), AT(GLINT_VNNI, d, t, p), AT(GLINT_VBMI, d, t, p)
#define ALL(d, t, p) AT(GLINT_AVX2, d, t, p), FROM_AVX512(d, t, p)
// A 32-element type in lanes, name its QMATMATX kernels.
#define LANES_ROW(name) {ALL(NULL, NULL, qk_##name##_avx2), FROM_VNNI(qk_q32_vec_vnni, NULL, qk_##name##_vnni)}

static const glint_qkernels qtab[T_IQ4_XS + 1][GLINT_LEVELS] = {
    [T_Q4_0] = {ALL(NULL, NULL, qk_q4_0_avx2), FROM_VNNI(NULL, NULL, qk_q4_0_vnni)},
    [T_Q5_0] = LANES_ROW(q5_0),
    [T_Q4_1] = LANES_ROW(q4_1),
    [T_Q5_1] = LANES_ROW(q5_1),
    [T_IQ4_NL] = {ALL(qk_iq4nl_vec_avx2, NULL, qk_iq4nl_avx2), FROM_VNNI(qk_q32_vec_vnni, NULL, qk_iq4nl_vnni)},
    [T_Q8_0] = {ALL(NULL, qk_q8_0_avx2, qk_q8_0_prefill_avx2), FROM_VNNI(NULL, qk_q8_0_vnni, qk_q8_0_prefill_vnni)},
    [T_Q2_K] = {ALL(NULL, NULL, qk_kq_avx2), FROM_AVX512(qk_q23k_vec_512, NULL, qk_q23k_512)},
    [T_Q3_K] = {ALL(NULL, NULL, qk_kq_avx2), FROM_AVX512(qk_q23k_vec_512, NULL, qk_q23k_512)},
    [T_Q4_K] = {ALL(NULL, NULL, qk_kq_avx2), FROM_AVX512(qk_q45k_vec_512, NULL, qk_q45k_512)},
    [T_Q5_K] = {ALL(NULL, NULL, qk_kq_avx2), FROM_AVX512(qk_q45k_vec_512, NULL, qk_q45k_512)},
    [T_Q6_K] = {ALL(NULL, NULL, qk_kq_avx2), AT(GLINT_AVX512, qk_q6k_vec_512, NULL, qk_q6k_512),
                FROM_VNNI(qk_q6k_vec_vnni, NULL, qk_q6k_vnni)},
    [T_IQ4_XS] = {ALL(NULL, NULL, qk_kq_avx2), FROM_VNNI(qk_iq4xs_vec_vnni, NULL, qk_iq4xs_vnni)},
};

// Q4_0 in lanes: matrices whose rows are not a multiple of 8 (quant.go,
// dotQ), which ggml does not repack.
static const glint_qkernels q4_0_lanes[GLINT_LEVELS] = {
    ALL(NULL, NULL, qk_q40l_avx2), FROM_VNNI(qk_q32_vec_vnni, NULL, qk_q40l_vnni)};

// run tries the kernels of ks from slot first on, reporting whether one
// did the work.
static int run(const glint_qkernels *ks, int first, const glint_qargs *a, int lo, int hi) {
	const glint_qkernel slots[3] = {ks->decode, ks->tokens, ks->prefill};
	for (int i = first; i < 3; i++) {
		if (slots[i] != NULL && slots[i](a, lo, hi)) {
			return 1;
		}
	}
	return 0;
}

void glint_matmat_q(glint_level level, int type, const int8_t *q, const float *d, const int32_t *c, const float *s,
                    const int16_t *bs, int n, int k, const uint8_t *w, size_t rowBytes, glint_rows rows, float *dst,
                    int m) {
	if (type < 0 || type > T_IQ4_XS || level < GLINT_AVX2 || level >= GLINT_LEVELS) {
		return;
	}
	const glint_qkernels *ks = type == T_Q4_0 && m % 8 != 0 ? q4_0_lanes : qtab[type];
	glint_qargs a = {type, q, d, c, s, bs, n, k, w, rowBytes, dst, m};
	int first = n == 1 ? 0 : n <= GLINT_DECODE_TOKENS ? 1 : 2;
	for (int lo, hi; glint_claim(&rows, &lo, &hi);) {
		if (!run(&ks[level], first, &a, lo, hi)) {
			run(&ks[GLINT_AVX2], first, &a, lo, hi);
		}
	}
}

// glint_flash_qdots is the quantised key dots of flash attention
// (flash.go): d[g·nv + i] = query row g · the key row of cells[i], for g <
// group and i < nv, in ggml_vec_dot's order — the decode kernels of a
// one-token matmul, Q4_0 in lanes (dot32Lanes, prefill off). Runs of
// consecutive cells go to the kernels as rows rowBytes apart, at most 64
// at a time, so that the group's heads find them in L1.
void glint_flash_qdots(glint_level level, int type, const int8_t *q, const float *qd, const float *qs, int k, int group,
                       const uint8_t *w, size_t rowBytes, const int32_t *cells, int nv, float *d) {
	if (type < 0 || type > T_IQ4_XS || level < GLINT_AVX2 || level >= GLINT_LEVELS) {
		return;
	}
	const glint_qkernels *ks = type == T_Q4_0 ? q4_0_lanes : qtab[type];
	int nb = k / 32;
	for (int i = 0; i < nv;) {
		int r = 1;
		while (i + r < nv && r < 64 && cells[i + r] == cells[i] + r) {
			r++;
		}
		for (int g = 0; g < group; g++) {
			glint_qargs a = {type,     q + (size_t)g * k, qd + (size_t)g * nb, NULL, qs ? qs + (size_t)g * nb : NULL,
			                 NULL,     1,                 k,                   w + (size_t)cells[i] * rowBytes,
			                 rowBytes, d + (size_t)g * nv + i, r};
			if (!run(&ks[level], 0, &a, 0, r)) {
				run(&ks[GLINT_AVX2], 0, &a, 0, r);
			}
		}
		i += r;
	}
}
