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
