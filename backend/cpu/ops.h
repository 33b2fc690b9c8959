// Declarations of the elementwise and attention kernels in ops.c, called
// from ops_cgo.go. level is a simdLevel (see simd.go); every level ≥ 1 runs
// the same AVX2/FMA/F16C code, which reproduces the portable Go path.
#include <stddef.h>
#include <stdint.h>

// glint_silu_mul computes d[i] = silu(g[i])·u[i] for i < n.
void glint_silu_mul(int level, const float *g, const float *u, float *d, size_t n);

// glint_add computes d[i] = x[i] + y[i] for i < n (one rounding each, as Go's).
void glint_add(const float *x, const float *y, float *d, size_t n);

// glint_attention_max_head_dim is the largest head size glint_attention
// handles (its query scratch is sized at compile time).
#define GLINT_ATTENTION_MAX_HEAD_DIM 256

// GLINT_ATTENTION_ACC_FLOATS is the scratch glint_attention512 takes for
// the p·V lane sums of a group of heads (acc): 4 heads × 64 lanes × the
// largest head.
#define GLINT_ATTENTION_ACC_FLOATS (4 * 64 * GLINT_ATTENTION_MAX_HEAD_DIM)

// glint_attention computes query heads h0…h1-1 of one row of attention
// (q and out point at the row) over the cells of runs: nruns pairs [a, b)
// of cell indices, increasing, that the row sees; base is the start of the
// row's range, from which a cell's lane in the float sums counts. The K and
// V caches have rows of kvHeads·headDim elements, F16 where kf16/vf16 is
// set, else F32; head h reads kv head h/(heads/kvHeads). prefill is set in
// a batch of more than one row. The arithmetic is ggml's AVX2 build's
// (attentionHeads in attention.go); a score is the dot product rounded to
// float, soft-capped when softcap > 0, then scaled. scores is scratch for
// 4·roundup8(last b − base) floats, acc for GLINT_ATTENTION_ACC_FLOATS.
void glint_attention(int level, const float *q, const void *k, const void *v, int kf16, int vf16, float *out,
                     float *scores, float *acc, int heads, int kvHeads, int headDim, const int32_t *runs, int nruns,
                     int base, int prefill, float scale, float softcap, int h0, int h1);

// The kernels of ggml's AVX-512 arithmetic (flavor.go), for hosts with
// AVX-512 at every kernel level: glint_silu_mul512 is glint_silu_mul with
// ggml's AVX-512 exp, elementwise; glint_attention512 is glint_attention over
// K and V caches both f16 (half) or both f32, with the row's view nkv cells
// long (vec_dot's steps) and prefill set in a batch of more than one row;
// scores holds 4·roundup16(last b − base) floats, acc
// GLINT_ATTENTION_ACC_FLOATS.

void glint_silu_mul512(const float *g, const float *u, float *d, size_t n);
void glint_attention512(const float *q, const void *k, const void *v, int half, float *out, float *scores, float *acc,
                        int heads, int kvHeads, int hd, const int32_t *runs, int nruns, int base, int nkv, int prefill,
                        float scale, float softcap, int h0, int h1);

// glint_rope rotates the first dims elements of each of the heads heads
// (headDim apart) of n rows of x (cols apart), row t by position pos[t], as
// the Backend's RoPE does (ops.go): pair i's angle is pos·thetaScaleⁱ (by
// repeated multiplication), divided by freqs[i] when freqs is not NULL,
// times freqScale; its cosf and sinf times mscale; the rotation two fused
// multiply-adds of a rounded product. NeoX pairs element i with i+dims/2,
// else 2i with 2i+1. cs is scratch for dims floats.
void glint_rope(float *x, int n, int cols, int heads, int headDim, const int32_t *pos, int dims, float thetaScale,
                const float *freqs, float freqScale, float mscale, int neox, float *cs);
