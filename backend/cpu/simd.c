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

// The table's kernels over the family files' (simd_kernels.h), one
// signature for all: K is the kernel, A its arguments from glint_qargs a.
#define QK(name, K, ...)                                 \
	static int name(const glint_qargs *a, int lo, int hi) { \
		K(__VA_ARGS__);                                  \
		return 1;                                        \
	}
#define QK_DECLINES(name, K, ...) \
	static int name(const glint_qargs *a, int lo, int hi) { return K(__VA_ARGS__); }
// The argument lists of the kernel shapes.
#define ROWS a->n, a->k, a->w, a->rowBytes, lo, hi, a->dst, a->m
#define VROWS a->k, a->w, a->rowBytes, lo, hi, a->dst
#define LANES(pairs) pairs, a->q, a->d, a->s, ROWS

// Q4_0 matrices of a multiple of 8 rows in ggml's repacked order (the
// backend interleaves such weights, glint_matmat_q4_0_x8: this is a Q4_0
// tensor it did not load); other Q4_0 matrices in lanes, as Q5_0
// (quant.go, dotQ).
QK(q4_0_avx2, matmat_q4_avx2, a->q, a->d, a->c, ROWS)
QK(q4_0_vnni, matmat_q4_vnni, a->q, a->d, a->c, ROWS)
QK(q4_0l_avx2, matmat_q40l_avx2, LANES(0))
QK(q4_0l_vnni, matmat_q40l_vnni, LANES(0))
// The 32-element types in lanes: one token at VNNI by matvec_q32_vnni,
// else the QMATMATX tiles, which read each weight block once for up to
// four tokens.
QK(q32_vec_vnni, matvec_q32_vnni, a->type, a->q, a->d, a->s, VROWS)
QK(q5_0_avx2, matmat_q5_0_avx2, LANES(0))
QK(q5_0_vnni, matmat_q5_0_vnni, LANES(0))
QK(q4_1_avx2, matmat_q4_1_avx2, LANES(0))
QK(q4_1_vnni, matmat_q4_1_vnni, LANES(0))
QK(q5_1_avx2, matmat_q5_1_avx2, LANES(0))
QK(q5_1_vnni, matmat_q5_1_vnni, LANES(0))
// IQ4_NL: ggml's decode alternates two accumulators (pairs); its prefill
// (llamafile) keeps one (quant_lanes.go).
QK(iq4nl_vec_avx2, matmat_iq4nl_avx2, LANES(1))
QK(iq4nl_avx2, matmat_iq4nl_avx2, LANES(0))
QK(iq4nl_vnni, matmat_iq4nl_vnni, LANES(0))
// Q8_0: a prompt takes the prefill tiles (Q8MATMAT), a decode QMATMATX's.
QK(q8_0_avx2, matmat_q8_0_avx2, LANES(0))
QK(q8_0_vnni, matmat_q8_0_vnni, LANES(0))
QK(q8_0_prefill_avx2, matmat_q8_avx2, a->q, a->d, ROWS)
QK(q8_0_prefill_vnni, matmat_q8_vnni, a->q, a->d, ROWS)
// K-quants and IQ4_XS: matmat_kq_avx2 takes every type at AVX2, and
// whatever the AVX-512 kernels decline.
QK(kq_avx2, matmat_kq_avx2, a->type, a->q, a->d, a->bs, ROWS)
static int q45k_vec_512(const glint_qargs *a, int lo, int hi) {
	if (a->k > DECODE_KMAX) {
		return 0;
	}
	matvec_q4k_512(a->type == T_Q5_K, a->q, a->d, a->bs, VROWS);
	return 1;
}
static int q23k_vec_512(const glint_qargs *a, int lo, int hi) {
	if (a->k > DECODE_KMAX) {
		return 0;
	}
	matvec_q23k_512(a->type == T_Q3_K, a->q, a->d, a->bs, VROWS);
	return 1;
}
QK_DECLINES(q45k_512, matmat_q4k_512, a->type == T_Q5_K, a->q, a->d, a->bs, ROWS)
QK_DECLINES(q23k_512, matmat_q23k_512, a->type == T_Q3_K, a->q, a->d, a->bs, ROWS)
QK(q6k_vec_512, matvec_q6k_512, a->q, a->d, VROWS)
QK(q6k_vec_vnni, matvec_q6k_vnni, a->q, a->d, VROWS)
QK_DECLINES(q6k_512, matmat_q6k_512, a->q, a->d, ROWS)
QK_DECLINES(q6k_vnni, matmat_q6k_vnni, a->q, a->d, ROWS)
QK(iq4xs_vec_vnni, matvec_iq4xs_vnni, a->q, a->d, VROWS)
QK_DECLINES(iq4xs_vnni, matmat_iq4xs_vnni, a->q, a->d, ROWS)

// A row of the table: the same kernels at every level from AVX2
// (ALL), from AVX-512 or VNNI on (the levels below as AVX2's).
#define AT(l, d, t, p) [l] = {d, t, p}
#define ALL(d, t, p) AT(GLINT_AVX2, d, t, p), AT(GLINT_AVX512, d, t, p), AT(GLINT_VNNI, d, t, p), AT(GLINT_VBMI, d, t, p)
#define FROM_AVX512(d, t, p) AT(GLINT_AVX512, d, t, p), AT(GLINT_VNNI, d, t, p), AT(GLINT_VBMI, d, t, p)
#define FROM_VNNI(d, t, p) AT(GLINT_VNNI, d, t, p), AT(GLINT_VBMI, d, t, p)
// A 32-element type in lanes, name its QMATMATX kernels.
#define LANES_ROW(name) {ALL(NULL, NULL, name##_avx2), FROM_VNNI(q32_vec_vnni, NULL, name##_vnni)}

static const glint_qkernels qtab[T_IQ4_XS + 1][GLINT_LEVELS] = {
    [T_Q4_0] = {ALL(NULL, NULL, q4_0_avx2), FROM_VNNI(NULL, NULL, q4_0_vnni)},
    [T_Q5_0] = LANES_ROW(q5_0),
    [T_Q4_1] = LANES_ROW(q4_1),
    [T_Q5_1] = LANES_ROW(q5_1),
    [T_IQ4_NL] = {ALL(iq4nl_vec_avx2, NULL, iq4nl_avx2), FROM_VNNI(q32_vec_vnni, NULL, iq4nl_vnni)},
    [T_Q8_0] = {ALL(NULL, q8_0_avx2, q8_0_prefill_avx2), FROM_VNNI(NULL, q8_0_vnni, q8_0_prefill_vnni)},
    [T_Q2_K] = {ALL(NULL, NULL, kq_avx2), FROM_AVX512(q23k_vec_512, NULL, q23k_512)},
    [T_Q3_K] = {ALL(NULL, NULL, kq_avx2), FROM_AVX512(q23k_vec_512, NULL, q23k_512)},
    [T_Q4_K] = {ALL(NULL, NULL, kq_avx2), FROM_AVX512(q45k_vec_512, NULL, q45k_512)},
    [T_Q5_K] = {ALL(NULL, NULL, kq_avx2), FROM_AVX512(q45k_vec_512, NULL, q45k_512)},
    [T_Q6_K] = {ALL(NULL, NULL, kq_avx2), AT(GLINT_AVX512, q6k_vec_512, NULL, q6k_512),
                FROM_VNNI(q6k_vec_vnni, NULL, q6k_vnni)},
    [T_IQ4_XS] = {ALL(NULL, NULL, kq_avx2), FROM_VNNI(iq4xs_vec_vnni, NULL, iq4xs_vnni)},
};

// Q4_0 in lanes (matrices whose rows are not a multiple of 8, see above).
static const glint_qkernels q4_0_lanes[GLINT_LEVELS] = {
    ALL(NULL, NULL, q4_0l_avx2), FROM_VNNI(q32_vec_vnni, NULL, q4_0l_vnni)};

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
