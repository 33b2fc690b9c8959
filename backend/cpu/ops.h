// Declarations of the elementwise and attention kernels in ops.c, called
// from ops_cgo.go. level is a simdLevel (see simd.go): 1 uses AVX2/FMA, 2
// and above AVX-512 F/BW/VL/DQ; nothing beyond that is used.
#include <stddef.h>

// glint_silu_mul computes d[i] = silu(g[i])·u[i] for i < n.
void glint_silu_mul(int level, const float *g, const float *u, float *d, size_t n);

// glint_attention_max_head_dim is the largest head size glint_attention
// handles (its accumulators are sized at compile time).
#define GLINT_ATTENTION_MAX_HEAD_DIM 128

// glint_attention computes the (row, head) items lo…hi-1 of attention, item
// = row·heads + head: row r's query (q + r·stride) sees L = kvLen cache
// positions, or pos0+r+1 when kvLen is 0 (causal prefill), of the K and V
// caches (rows of kvHeads·headDim); head h reads kv head h/(heads/kvHeads).
// scores is scratch for 4·L floats.
void glint_attention(int level, const float *q, const float *k, const float *v, float *out, float *scores,
                     int heads, int kvHeads, int headDim, int stride, int pos0, int kvLen, float scale, int lo,
                     int hi);
