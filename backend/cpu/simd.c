// SIMD matmul kernels for the CPU backend (see simd.go). Every function is
// compiled for its instruction set with a target attribute and chosen at run
// time, so the package builds with plain CFLAGS and still runs on CPUs that
// lack AVX-512 or AVX2.
//
// Activations stay float32 and weights are widened exactly (d·q is one
// float32 product, as in the reference), so results differ from the
// reference only in summation order.

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q8_0 8
#define T_Q6_K 14
#define T_BF16 30

#define A2 __attribute__((target("avx2,fma,f16c")))
#define A5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

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
		return 2;
	}
	return 1;
}

// ---------------------------------------------------------------- helpers

INLINE uint16_t le16(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	return h;
}

INLINE A2 float f16at(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

INLINE A2 float bf16at(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

INLINE A2 float hsum8(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// i8x8 widens 8 signed bytes to floats.
INLINE A2 __m256 i8x8(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); }

// ---------------------------------------------------------------- AVX2 dots

static A2 float dot_f32_avx2(const float *x, const float *w, int k) {
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int i = 0;
	for (; i + 32 <= k; i += 32) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i), a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(w + i + 8), a1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(w + i + 16), a2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(w + i + 24), a3);
	}
	for (; i + 8 <= k; i += 8) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i), a0);
	}
	float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	for (; i < k; i++) {
		s += x[i] * w[i];
	}
	return s;
}

static A2 float dot_f16_avx2(const float *x, const uint8_t *w, int k) {
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int i = 0;
	for (; i + 32 <= k; i += 32) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))), a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i + 16))), a1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i + 32))), a2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i + 48))), a3);
	}
	for (; i + 8 <= k; i += 8) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i))), a0);
	}
	float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	for (; i < k; i++) {
		s += x[i] * f16at(w + 2 * i);
	}
	return s;
}

INLINE A2 __m256 bf16x8(const uint8_t *p) {
	__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static A2 float dot_bf16_avx2(const float *x, const uint8_t *w, int k) {
	__m256 a0 = _mm256_setzero_ps(), a1 = a0;
	int i = 0;
	for (; i + 16 <= k; i += 16) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), bf16x8(w + 2 * i), a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), bf16x8(w + 2 * i + 16), a1);
	}
	for (; i + 8 <= k; i += 8) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), bf16x8(w + 2 * i), a0);
	}
	float s = hsum8(_mm256_add_ps(a0, a1));
	for (; i < k; i++) {
		s += x[i] * bf16at(w + 2 * i);
	}
	return s;
}

// Quantised dots sum x·q per block and apply the block scale with one FMA;
// alternate blocks use separate accumulators to halve the FMA latency chain.
static A2 float dot_q8_0_avx2(const float *x, const uint8_t *w, int k) {
	__m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
	int nb = k / 32;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + (size_t)b * 34;
		const float *xb = x + b * 32;
		__m128i q0 = _mm_loadu_si128((const __m128i *)(blk + 2));
		__m128i q1 = _mm_loadu_si128((const __m128i *)(blk + 18));
		__m256 s = _mm256_mul_ps(_mm256_loadu_ps(xb), i8x8(q0));
		s = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 8), i8x8(_mm_srli_si128(q0, 8)), s);
		s = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 16), i8x8(q1), s);
		s = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 24), i8x8(_mm_srli_si128(q1, 8)), s);
		if (b & 1) {
			acc1 = _mm256_fmadd_ps(s, _mm256_broadcast_ss(&f16tab[le16(blk)]), acc1);
		} else {
			acc0 = _mm256_fmadd_ps(s, _mm256_broadcast_ss(&f16tab[le16(blk)]), acc0);
		}
	}
	return hsum8(_mm256_add_ps(acc0, acc1));
}

// Q4_0: byte j holds element j (low nibble) and element j+16 (high nibble).
static A2 float dot_q4_0_avx2(const float *x, const uint8_t *w, int k) {
	const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
	__m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
	int nb = k / 32;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + (size_t)b * 18;
		const float *xb = x + b * 32;
		__m128i v = _mm_loadu_si128((const __m128i *)(blk + 2));
		__m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), eight);
		__m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), eight);
		__m256 s = _mm256_mul_ps(_mm256_loadu_ps(xb), i8x8(lo));
		s = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 8), i8x8(_mm_srli_si128(lo, 8)), s);
		s = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 16), i8x8(hi), s);
		s = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 24), i8x8(_mm_srli_si128(hi, 8)), s);
		if (b & 1) {
			acc1 = _mm256_fmadd_ps(s, _mm256_broadcast_ss(&f16tab[le16(blk)]), acc1);
		} else {
			acc0 = _mm256_fmadd_ps(s, _mm256_broadcast_ss(&f16tab[le16(blk)]), acc0);
		}
	}
	return hsum8(_mm256_add_ps(acc0, acc1));
}

// q6k_unpack rebuilds 32 signed 6-bit values for each of the four 32-element
// groups of one 128-element half of a Q6_K super-block (ggml's layout: low
// nibbles in ql, two high bits each in qh).
INLINE A2 void q6k_unpack(const uint8_t *ql, const uint8_t *qh, __m256i q[4]) {
	const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), off = _mm256_set1_epi8(32);
	__m256i a = _mm256_loadu_si256((const __m256i *)ql);
	__m256i c = _mm256_loadu_si256((const __m256i *)(ql + 32));
	__m256i h = _mm256_loadu_si256((const __m256i *)qh);
	q[0] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)), off);
	q[1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)), off);
	q[2] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(h, m30)), off);
	q[3] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30)), off);
}

static A2 float dot_q6_k_avx2(const float *x, const uint8_t *w, int k) {
	__m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
	int nb = k / 256;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + (size_t)b * 210;
		float d = f16at(blk + 208);
		for (int half = 0; half < 2; half++) {
			const int8_t *sc = (const int8_t *)(blk + 192 + 8 * half);
			const float *y = x + b * 256 + 128 * half;
			__m256i q[4];
			q6k_unpack(blk + 64 * half, blk + 128 + 32 * half, q);
			for (int j = 0; j < 4; j++) {
				__m128i lo = _mm256_castsi256_si128(q[j]), hi = _mm256_extracti128_si256(q[j], 1);
				const float *yj = y + 32 * j;
				__m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(yj), i8x8(lo));
				s0 = _mm256_fmadd_ps(_mm256_loadu_ps(yj + 8), i8x8(_mm_srli_si128(lo, 8)), s0);
				__m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(yj + 16), i8x8(hi));
				s1 = _mm256_fmadd_ps(_mm256_loadu_ps(yj + 24), i8x8(_mm_srli_si128(hi, 8)), s1);
				acc0 = _mm256_fmadd_ps(s0, _mm256_set1_ps(d * (float)sc[2 * j]), acc0);
				acc1 = _mm256_fmadd_ps(s1, _mm256_set1_ps(d * (float)sc[2 * j + 1]), acc1);
			}
		}
	}
	return hsum8(_mm256_add_ps(acc0, acc1));
}

// ---------------------------------------------------------------- AVX-512 dots

static A5 float dot_f32_avx512(const float *x, const float *w, int k) {
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int i = 0;
	for (; i + 64 <= k; i += 64) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(w + i), a0);
		a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(w + i + 16), a1);
		a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(w + i + 32), a2);
		a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(w + i + 48), a3);
	}
	for (; i + 16 <= k; i += 16) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(w + i), a0);
	}
	if (i < k) {
		__mmask16 m = (__mmask16)((1u << (k - i)) - 1);
		a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, w + i), a1);
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

static A5 float dot_f16_avx512(const float *x, const uint8_t *w, int k) {
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int i = 0;
	for (; i + 64 <= k; i += 64) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 2 * i))), a0);
		a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 2 * i + 32))), a1);
		a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 2 * i + 64))), a2);
		a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 2 * i + 96))), a3);
	}
	for (; i + 16 <= k; i += 16) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 2 * i))), a0);
	}
	float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
	for (; i < k; i++) {
		s += x[i] * f16at(w + 2 * i);
	}
	return s;
}

INLINE A5 __m512 q8blk512(const float *xb, const uint8_t *blk) {
	__m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2))));
	__m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18))));
	return _mm512_fmadd_ps(_mm512_loadu_ps(xb + 16), q1, _mm512_mul_ps(_mm512_loadu_ps(xb), q0));
}

// Q4_0 on AVX-512: vpermps with a 16-entry table maps a nibble straight to
// its float value (q-8), using only the low four bits of each index, so the
// low nibbles need no mask and neither half needs a subtract or a convert.
INLINE A5 __m512 q4blk512(const float *xb, const uint8_t *blk, __m512 tbl) {
	__m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
	__m512 lo = _mm512_permutexvar_ps(v, tbl);
	__m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tbl);
	return _mm512_fmadd_ps(_mm512_loadu_ps(xb + 16), hi, _mm512_mul_ps(_mm512_loadu_ps(xb), lo));
}

// QDOT512 walks blocks in groups of 16, two blocks per
// step into two accumulators to halve the FMA latency chain.
#define QDOT512(name, bytes, blkfn, ...)                                                     \
	static A5 float name(const float *x, const uint8_t *w, int k) {                          \
		__VA_ARGS__;                                                                         \
		__m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;                                      \
		int nb = k / 32;                                                                     \
		for (int b0 = 0; b0 < nb; b0 += 16) {                                                \
			int g = nb - b0 < 16 ? nb - b0 : 16;                                             \
			const uint8_t *p = w + (size_t)b0 * bytes;                                       \
			const float *xg = x + b0 * 32;                                                   \
			int j = 0;                                                                       \
			for (; j + 2 <= g; j += 2) {                                                     \
				acc0 = _mm512_fmadd_ps(blkfn(xg + 32 * j, p + j * bytes), _mm512_set1_ps(f16tab[le16(p + j * bytes)]), acc0); \
				acc1 = _mm512_fmadd_ps(blkfn(xg + 32 * j + 32, p + (j + 1) * bytes), _mm512_set1_ps(f16tab[le16(p + (j + 1) * bytes)]), acc1); \
			}                                                                                \
			if (j < g) {                                                                     \
				acc0 = _mm512_fmadd_ps(blkfn(xg + 32 * j, p + j * bytes), _mm512_set1_ps(f16tab[le16(p + j * bytes)]), acc0); \
			}                                                                                \
		}                                                                                    \
		return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));                              \
	}

QDOT512(dot_q8_0_avx512, 34, q8blk512, )
#define Q4BLK(xb, blk) q4blk512(xb, blk, tbl)
QDOT512(dot_q4_0_avx512, 18, Q4BLK, const __m512 tbl = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7))
#undef Q4BLK

// The Q6_K kernels go through memory on purpose: the unpacked values are
// stored and re-read by vpmovsxbd (one shuffle uop instead of an extract
// plus a widen), and the sixteen scales d·sc of a super-block are converted
// once and broadcast from memory (a load, not a shuffle, per group of 16).
static A5 float dot_q6_k_avx512(const float *x, const uint8_t *w, int k) {
	__m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
	int nb = k / 256;
	int8_t qs[128] __attribute__((aligned(64)));
	float ss[16] __attribute__((aligned(64)));
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + (size_t)b * 210;
		__m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192))));
		_mm512_store_ps(ss, _mm512_mul_ps(_mm512_set1_ps(f16tab[le16(blk + 208)]), sc));
		for (int half = 0; half < 2; half++) {
			const float *y = x + b * 256 + 128 * half;
			__m256i q[4];
			q6k_unpack(blk + 64 * half, blk + 128 + 32 * half, q);
			for (int j = 0; j < 4; j++) {
				_mm256_store_si256((__m256i *)(qs + 32 * j), q[j]);
			}
			__asm__ volatile("" ::: "memory");
			for (int j = 0; j < 4; j++) {
				__m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(qs + 32 * j))));
				__m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(qs + 32 * j + 16))));
				__m512 s0 = _mm512_mul_ps(_mm512_loadu_ps(y + 32 * j), q0);
				__m512 s1 = _mm512_mul_ps(_mm512_loadu_ps(y + 32 * j + 16), q1);
				acc0 = _mm512_fmadd_ps(s0, _mm512_set1_ps(ss[8 * half + 2 * j]), acc0);
				acc1 = _mm512_fmadd_ps(s1, _mm512_set1_ps(ss[8 * half + 2 * j + 1]), acc1);
			}
		}
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// ---------------------------------------------------------------- decode

#define MATVEC(name, attr, f32fn, f16fn, bf16fn, q8fn, q4fn, q6fn)                              \
	static attr void name(int type, const float *x, const uint8_t *w, size_t rowBytes, int k, \
	                      int lo, int hi, float *dst) {                                        \
		for (int o = lo; o < hi; o++) {                                                        \
			const uint8_t *r = w + (size_t)o * rowBytes;                                       \
			float s = 0;                                                                       \
			switch (type) {                                                                    \
			case T_F32: s = f32fn(x, (const float *)r, k); break;                              \
			case T_F16: s = f16fn(x, r, k); break;                                             \
			case T_BF16: s = bf16fn(x, r, k); break;                                           \
			case T_Q8_0: s = q8fn(x, r, k); break;                                             \
			case T_Q4_0: s = q4fn(x, r, k); break;                                             \
			case T_Q6_K: s = q6fn(x, r, k); break;                                             \
			}                                                                                  \
			dst[o] = s;                                                                        \
		}                                                                                      \
	}

MATVEC(matvec_avx2, A2, dot_f32_avx2, dot_f16_avx2, dot_bf16_avx2, dot_q8_0_avx2, dot_q4_0_avx2, dot_q6_k_avx2)
MATVEC(matvec_avx512, A5, dot_f32_avx512, dot_f16_avx512, dot_bf16_avx2, dot_q8_0_avx512, dot_q4_0_avx512, dot_q6_k_avx512)

void glint_matvec(int level, int type, const float *x, const uint8_t *w, size_t rowBytes, int k,
                  int lo, int hi, float *dst) {
	if (level >= 2) {
		matvec_avx512(type, x, w, rowBytes, k, lo, hi, dst);
	} else {
		matvec_avx2(type, x, w, rowBytes, k, lo, hi, dst);
	}
}

// ---------------------------------------------------------------- prefill

// KC is the k-chunk of a weight panel: a whole Q6_K super-block and eight
// Q4_0/Q8_0 blocks, and small enough that a panel (KC × 32 rows, 32 KiB)
// stays in L1 while every token of the batch streams past it.
#define KC 256

// dequant_chunk widens len elements of one row, starting at element c (a
// multiple of KC), into y. Each value is rounded exactly as the reference
// dequantisation rounds it.
static A2 void dequant_chunk(int type, const uint8_t *row, int c, int len, float *y) {
	switch (type) {
	case T_F32:
		memcpy(y, row + 4 * (size_t)c, 4 * (size_t)len);
		break;
	case T_F16: {
		const uint8_t *p = row + 2 * (size_t)c;
		int i = 0;
		for (; i + 8 <= len; i += 8) {
			_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
		}
		for (; i < len; i++) {
			y[i] = f16at(p + 2 * i);
		}
		break;
	}
	case T_BF16: {
		const uint8_t *p = row + 2 * (size_t)c;
		int i = 0;
		for (; i + 8 <= len; i += 8) {
			_mm256_storeu_ps(y + i, bf16x8(p + 2 * i));
		}
		for (; i < len; i++) {
			y[i] = bf16at(p + 2 * i);
		}
		break;
	}
	case T_Q8_0: {
		const uint8_t *p = row + (size_t)(c / 32) * 34;
		for (int b = 0; b < len / 32; b++, p += 34) {
			__m256 d = _mm256_set1_ps(f16at(p));
			__m128i q0 = _mm_loadu_si128((const __m128i *)(p + 2)), q1 = _mm_loadu_si128((const __m128i *)(p + 18));
			_mm256_storeu_ps(y + 32 * b, _mm256_mul_ps(d, i8x8(q0)));
			_mm256_storeu_ps(y + 32 * b + 8, _mm256_mul_ps(d, i8x8(_mm_srli_si128(q0, 8))));
			_mm256_storeu_ps(y + 32 * b + 16, _mm256_mul_ps(d, i8x8(q1)));
			_mm256_storeu_ps(y + 32 * b + 24, _mm256_mul_ps(d, i8x8(_mm_srli_si128(q1, 8))));
		}
		break;
	}
	case T_Q4_0: {
		const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
		const uint8_t *p = row + (size_t)(c / 32) * 18;
		for (int b = 0; b < len / 32; b++, p += 18) {
			__m256 d = _mm256_set1_ps(f16at(p));
			__m128i v = _mm_loadu_si128((const __m128i *)(p + 2));
			__m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), eight);
			__m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), eight);
			_mm256_storeu_ps(y + 32 * b, _mm256_mul_ps(d, i8x8(lo)));
			_mm256_storeu_ps(y + 32 * b + 8, _mm256_mul_ps(d, i8x8(_mm_srli_si128(lo, 8))));
			_mm256_storeu_ps(y + 32 * b + 16, _mm256_mul_ps(d, i8x8(hi)));
			_mm256_storeu_ps(y + 32 * b + 24, _mm256_mul_ps(d, i8x8(_mm_srli_si128(hi, 8))));
		}
		break;
	}
	case T_Q6_K: {
		// len is KC = one super-block.
		const uint8_t *blk = row + (size_t)(c / 256) * 210;
		float d = f16at(blk + 208);
		for (int half = 0; half < 2; half++) {
			const int8_t *sc = (const int8_t *)(blk + 192 + 8 * half);
			float *yh = y + 128 * half;
			__m256i q[4];
			q6k_unpack(blk + 64 * half, blk + 128 + 32 * half, q);
			for (int j = 0; j < 4; j++) {
				// The reference computes (d·scale)·q.
				__m256 s0 = _mm256_set1_ps(d * (float)sc[2 * j]), s1 = _mm256_set1_ps(d * (float)sc[2 * j + 1]);
				__m128i lo = _mm256_castsi256_si128(q[j]), hi = _mm256_extracti128_si256(q[j], 1);
				_mm256_storeu_ps(yh + 32 * j, _mm256_mul_ps(s0, i8x8(lo)));
				_mm256_storeu_ps(yh + 32 * j + 8, _mm256_mul_ps(s0, i8x8(_mm_srli_si128(lo, 8))));
				_mm256_storeu_ps(yh + 32 * j + 16, _mm256_mul_ps(s1, i8x8(hi)));
				_mm256_storeu_ps(yh + 32 * j + 24, _mm256_mul_ps(s1, i8x8(_mm_srli_si128(hi, 8))));
			}
		}
		break;
	}
	}
}

// pack fills panel[kk*R + r] with element c+kk of row o0+r, zero for rows at
// or past hi: the transposed layout lets the micro-kernel load R consecutive
// rows' weights at one k as a vector and broadcast each token's x[k].
INLINE A2 void pack(int R, int type, const uint8_t *w, size_t rowBytes, int o0, int hi, int c, int len,
                    float *panel) {
	float y[KC];
	for (int r = 0; r < R; r++) {
		if (o0 + r >= hi) {
			for (int kk = 0; kk < len; kk++) {
				panel[kk * R + r] = 0;
			}
			continue;
		}
		dequant_chunk(type, w + (size_t)(o0 + r) * rowBytes, c, len, y);
		for (int kk = 0; kk < len; kk++) {
			panel[kk * R + r] = y[kk];
		}
	}
}

// Micro-kernels: T tokens × 2 vectors of rows, accumulating over the chunk
// in registers and then adding into dst (which the first chunk zeroes).
#define T5 12
INLINE A5 void kern_avx512(int T, const float *panel, int len, const float *x, int k, int c, float *dst,
                           int m, int o0, __mmask16 m0, __mmask16 m1, int first) {
	__m512 acc[T5][2];
	for (int t = 0; t < T; t++) {
		acc[t][0] = _mm512_setzero_ps();
		acc[t][1] = _mm512_setzero_ps();
	}
	const float *xc = x + c;
	for (int kk = 0; kk < len; kk++) {
		__m512 w0 = _mm512_loadu_ps(panel + kk * 32), w1 = _mm512_loadu_ps(panel + kk * 32 + 16);
		for (int t = 0; t < T; t++) {
			__m512 xv = _mm512_set1_ps(xc[(size_t)t * k + kk]);
			acc[t][0] = _mm512_fmadd_ps(w0, xv, acc[t][0]);
			acc[t][1] = _mm512_fmadd_ps(w1, xv, acc[t][1]);
		}
	}
	for (int t = 0; t < T; t++) {
		float *d = dst + (size_t)t * m + o0;
		if (!first) {
			acc[t][0] = _mm512_add_ps(acc[t][0], _mm512_maskz_loadu_ps(m0, d));
			acc[t][1] = _mm512_add_ps(acc[t][1], _mm512_maskz_loadu_ps(m1, d + 16));
		}
		_mm512_mask_storeu_ps(d, m0, acc[t][0]);
		_mm512_mask_storeu_ps(d + 16, m1, acc[t][1]);
	}
}

static A5 void matmat_avx512(int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes,
                             int lo, int hi, float *dst, int m) {
	float panel[KC * 32] __attribute__((aligned(64)));
	for (int o0 = lo; o0 < hi; o0 += 32) {
		int rows = hi - o0 < 32 ? hi - o0 : 32;
		__mmask16 m0 = rows >= 16 ? 0xFFFF : (__mmask16)((1u << rows) - 1);
		__mmask16 m1 = rows <= 16 ? 0 : rows >= 32 ? 0xFFFF : (__mmask16)((1u << (rows - 16)) - 1);
		for (int c = 0; c < k; c += KC) {
			int len = k - c < KC ? k - c : KC;
			pack(32, type, w, rowBytes, o0, hi, c, len, panel);
			int t = 0;
			for (; t + T5 <= n; t += T5) {
				kern_avx512(T5, panel, len, x + (size_t)t * k, k, c, dst + (size_t)t * m, m, o0, m0, m1, c == 0);
			}
			switch (n - t) {
#define CASE(T) \
	case T: kern_avx512(T, panel, len, x + (size_t)t * k, k, c, dst + (size_t)t * m, m, o0, m0, m1, c == 0); break;
				CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8) CASE(9) CASE(10) CASE(11)
#undef CASE
			}
		}
	}
}

// The AVX2 micro-kernel has 16 registers: 6 tokens × 2 vectors of 8 rows.
#define T2 6
INLINE A2 void kern_avx2(int T, const float *panel, int len, const float *x, int k, int c, float *dst, int m,
                         int o0, int rows, int first) {
	__m256 acc[T2][2];
	for (int t = 0; t < T; t++) {
		acc[t][0] = _mm256_setzero_ps();
		acc[t][1] = _mm256_setzero_ps();
	}
	const float *xc = x + c;
	for (int kk = 0; kk < len; kk++) {
		__m256 w0 = _mm256_loadu_ps(panel + kk * 16), w1 = _mm256_loadu_ps(panel + kk * 16 + 8);
		for (int t = 0; t < T; t++) {
			__m256 xv = _mm256_broadcast_ss(xc + (size_t)t * k + kk);
			acc[t][0] = _mm256_fmadd_ps(w0, xv, acc[t][0]);
			acc[t][1] = _mm256_fmadd_ps(w1, xv, acc[t][1]);
		}
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

static A2 void matmat_avx2(int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo,
                           int hi, float *dst, int m) {
	float panel[KC * 16] __attribute__((aligned(32)));
	for (int o0 = lo; o0 < hi; o0 += 16) {
		int rows = hi - o0 < 16 ? hi - o0 : 16;
		for (int c = 0; c < k; c += KC) {
			int len = k - c < KC ? k - c : KC;
			pack(16, type, w, rowBytes, o0, hi, c, len, panel);
			int t = 0;
			for (; t + T2 <= n; t += T2) {
				kern_avx2(T2, panel, len, x + (size_t)t * k, k, c, dst + (size_t)t * m, m, o0, rows, c == 0);
			}
			switch (n - t) {
#define CASE(T) \
	case T: kern_avx2(T, panel, len, x + (size_t)t * k, k, c, dst + (size_t)t * m, m, o0, rows, c == 0); break;
				CASE(1) CASE(2) CASE(3) CASE(4) CASE(5)
#undef CASE
			}
		}
	}
}

void glint_matmat(int level, int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo,
                  int hi, float *dst, int m) {
	if (level >= 2) {
		matmat_avx512(type, x, n, k, w, rowBytes, lo, hi, dst, m);
	} else {
		matmat_avx2(type, x, n, k, w, rowBytes, lo, hi, dst, m);
	}
}
