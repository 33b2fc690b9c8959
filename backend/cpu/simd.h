// Declarations of the C kernels in simd.c, called from simd_cgo.go.
#include <stddef.h>
#include <stdint.h>

// glint_simd_init fills the kernels' tables; it is called once, on a host
// with AVX2 (numerics.HostCPU).
void glint_simd_init(void);

// GLINT_DECODE_TOKENS is the most tokens a matmul runs as a decode (Go's
// decodeTokens, matmul.go, which simd_cgo.go checks against it): one
// sequence's step, or a few sequences decoding together. Q8_0 weights take
// longer ones through the prefill tiles (Q8MATMAT in simd.c).
#define GLINT_DECODE_TOKENS 8

// glint_level is a kernel level: numerics.Level's values, which simd_cgo.go
// holds to these. Each level adds instructions to the one before; the C
// kernels run from GLINT_AVX2 on.
typedef enum {
	GLINT_GO,     // the portable Go kernels: no C kernel runs
	GLINT_AVX2,   // AVX2, FMA, F16C
	GLINT_AVX512, // AVX-512 F/BW/VL/DQ
	GLINT_VNNI,   // AVX-512 VNNI (int8 dot products)
	GLINT_VBMI,   // AVX-512 VBMI
	GLINT_LEVELS
} glint_level;

// glint_rows names the weight rows a matmul call computes: chunks of grain
// rows, chunk c being rows lo + c·grain… (clipped to hi), each claimed from
// the counter *next, which the threads of a run share, as the Go pool's
// threads claim theirs (pool.go). A call claims at most max_claims chunks
// (a prompt's caller asks for all of them): the claim loop runs in C, because Go's
// sysmon takes the P of a cgo call it sees running across two of its ticks
// (20 µs apart while anything runs), and with every P busy each such retake
// starts a spinning thread that takes a CPU from the kernels and moves
// goroutines between threads. So a long chunk (a prompt's) is best claimed
// in the same call as the next, which spares a retake per chunk, and a
// decode's short ones (~10 µs, decodeTokens in matmul.go) one call each,
// which sysmon rarely sees twice (one call a decode matmul wakes sysmon
// thousands of times a second, most of a tenth of a CPU that the kernels
// need).
typedef struct {
	int64_t *next;
	int grain, lo, hi, max_claims;
} glint_rows;

// glint_claim claims the next chunk of rows into lo…hi-1, or reports 0 when
// none is left or the call has claimed its max_claims.
static inline int glint_claim(glint_rows *r, int *lo, int *hi) {
	if (r->max_claims <= 0) {
		return 0;
	}
	r->max_claims--;
	int64_t c = __atomic_fetch_add(r->next, 1, __ATOMIC_SEQ_CST);
	int64_t l = r->lo + c * r->grain;
	if (l >= r->hi) {
		return 0;
	}
	*lo = (int)l;
	*hi = l + r->grain < r->hi ? (int)(l + r->grain) : r->hi;
	return 1;
}

// glint_matmat computes dst[t*m + o] = x[t] · row o of w for t < n and
// every row o that rows names, for float weights (F32, F16, BF16), summed in the order
// order (floatSum in kernels.go: llama.cpp's vec_dot or tinyBLAS, of its
// AVX2 or AVX-512 build). It needs AVX2, FMA and F16C; at level ≥ 2 the
// AVX-512 build's orders run in 512-bit vectors (the same bits). xh, when
// not NULL, holds x's F16 bits (x rounded to F16), which some tiles read
// instead.
void glint_matmat(glint_level level, int order, int type, const float *x, const uint16_t *xh, int n, int k, const uint8_t *w,
                  size_t rowBytes, glint_rows rows, float *dst, int m);

// Quantised activations (one row of k elements): q holds k int8 values; for
// Q8_0, d[b] is block b's scale (f16-rounded) and c[b] = -off·Σ q over the
// block (the offset the unsigned weight encoding adds, see simd.c); for
// Q8_K, d[b] is the 256-block's scale and bs[j] the sum of 16-element group j.
void glint_quantize_q8_0(const float *x, int k, int off, int8_t *q, float *d, int32_t *c);
void glint_quantize_q8_k(const float *x, int k, int8_t *q, float *d, int16_t *bs);

// glint_quantize_q8_1 is glint_quantize_q8_0's q and d plus, per block, s =
// f16((amax/127)·Σq) (dtype.Q8_1Sum), the sum the weights' min multiplies.
void glint_quantize_q8_1(const float *x, int k, int8_t *q, float *d, float *s);

// glint_round_act rounds n floats to F16 or BF16 (type) and back into dst,
// as dtype.RoundActivations does, and (bits not NULL) stores their F16 or
// BF16 bits in bits.
void glint_round_act(int type, const float *x, float *dst, uint16_t *bits, size_t n);

// glint_to_f16 stores the F16 bits of n floats, rounded to nearest even as
// dtype.F32ToF16 and ggml's F16C copy round them (an f16 KV cache's rows).
void glint_to_f16(const float *x, uint16_t *h, size_t n);

// glint_matmat_q computes dst[t*m + o] = x[t] · row o of the quantised
// weight w (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K…Q6_K or IQ4_XS) for
// t < n and every row o that rows names, from n rows of quantised activations (row t at
// q + t*k, d + t*k/bs, c + t*k/32, s + t*k/32 (Q8_1) or bs + t*k/16); c, s
// and bs may be NULL where the activation type has none. m is the weight's
// full row count (dst's row stride), which also picks Q4_0's summation order
// (a multiple of 8 rows or not: quant.go, dotQ).
void glint_matmat_q(glint_level level, int type, const int8_t *q, const float *d, const int32_t *c, const float *s,
                    const int16_t *bs, int n, int k, const uint8_t *w, size_t rowBytes, glint_rows rows, float *dst,
                    int m);

// glint_matmat_q4_0_x8 is glint_matmat_q for a Q4_0 weight interleaved in
// groups of 8 rows (interleave.go); its chunks start and end at multiples of 8. It needs
// AVX2, FMA and F16C; level ≥ 3 (VNNI) adds the products by vpdpbusd.
void glint_matmat_q4_0_x8(glint_level level, const int8_t *q, const float *d, const int32_t *c, int n, int k,
                          const uint8_t *w, size_t rowBytes, glint_rows rows, float *dst, int m);

// glint_flash_qdots computes d[g·nv + i] = query row g (of group rows of
// quantised activations q, qd, qs, k long each) · row cells[i] of w, as a
// one-token glint_matmat_q would, Q4_0 in lanes whatever the row count
// (flash attention's keys).
void glint_flash_qdots(glint_level level, int type, const int8_t *q, const float *qd, const float *qs, int k, int group,
                       const uint8_t *w, size_t rowBytes, const int32_t *cells, int nv, float *d);
