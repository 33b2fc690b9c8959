// What the package's C kernels (simd.c, ops.c) share: the weight type
// ids, the target attributes of each level, and small helpers. Every
// function here is static inline, so each file gets its own copy.
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

// dtype.Type values (ggml's type ids).
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q2_K 10
#define T_Q3_K 11
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_IQ4_NL 20
#define T_IQ4_XS 23
#define T_BF16 30

// Target attributes: every kernel is compiled for its instruction set and
// chosen at run time, so the package builds with plain CFLAGS.
#define A2 __attribute__((target("avx2,fma,f16c")))
#define A5 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define A3 __attribute__((target("avx512vnni,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define AB __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))
// UNROLL unrolls the loop after it fully. Put before every loop that indexes
// an array of accumulators: GCC keeps such an array in registers only when
// every index is a constant by the time it scalarises it, and otherwise
// stores it to the stack on every iteration of the hot loop.
#define UNROLL _Pragma("GCC unroll 16")

INLINE uint16_t le16(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	return h;
}

INLINE A2 float f16at(const uint8_t *p) { return _cvtsh_ss(le16(p)); }

// hsum8 is the sum of v's lanes.
INLINE A2 float hsum8(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// hmax8 is the largest lane of v.
INLINE A2 float hmax8(__m256 v) {
	__m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_max_ps(s, _mm_movehl_ps(s, s));
	s = _mm_max_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// reduce8 is GGML_F32x8_REDUCE after its folds: the halves added, then two
// horizontal adds, (0+1)+(2+3) (reduce8Fold in attention.go).
INLINE A2 float reduce8(__m256 x) {
	__m128 t = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
	t = _mm_hadd_ps(t, t);
	return _mm_cvtss_f32(_mm_hadd_ps(t, t));
}

// rounded is x, a product rounded to float, kept from being contracted
// into the fused multiply-add it feeds.
INLINE float rounded(float x) {
	__asm__("" : "+x"(x));
	return x;
}
