// Declarations of the elementwise and attention kernels in ops.c, called
// from ops_cgo.go. level is a simdLevel (see simd.go); every level ≥ 1 runs
// the same AVX2/FMA/F16C code, which reproduces the portable Go path.
#include <stddef.h>
#include <stdint.h>

// glint_silu_mul computes d[i] = silu(g[i])·u[i] for i < n.
void glint_silu_mul(int level, const float *g, const float *u, float *d, size_t n);

// glint_attention_max_head_dim is the largest head size glint_attention
// handles (its query scratch is sized at compile time).
#define GLINT_ATTENTION_MAX_HEAD_DIM 256

// glint_attention computes the (row, head) items lo…hi-1 of attention, item
// = row·heads + head: row r's query (q + r·stride) sees L = kvLen cache
// positions, or pos0+r+1 when kvLen is 0 (causal prefill), of the K and V
// caches (rows of kvHeads·headDim elements, F16 where kf16/vf16 is set,
// else F32); head h reads kv head h/(heads/kvHeads). scores is scratch for
// 4·L floats.
void glint_attention(int level, const float *q, const void *k, const void *v, int kf16, int vf16, float *out,
                     float *scores, int heads, int kvHeads, int headDim, int stride, int pos0, int kvLen, float scale,
                     int lo, int hi);

// The kernels of ggml's AVX-512 arithmetic (flavor.go), for hosts with
// AVX-512 at every kernel level: glint_silu_mul512 is glint_silu_mul with
// ggml's AVX-512 exp, elementwise; glint_attention512 is glint_attention over
// K and V caches both f16 (half) or both f32, n the rows of the batch (more
// than one is a prefill).

void glint_silu_mul512(const float *g, const float *u, float *d, size_t n);
void glint_attention512(const float *q, const void *k, const void *v, int half, float *out, float *scores, int heads,
                        int kvHeads, int hd, int stride, int pos0, int kvLen, int n, float scale, int lo, int hi);
