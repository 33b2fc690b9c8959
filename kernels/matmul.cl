// MatMulTransposed and Embedding for each weight type.
//
// mv_T (one token) and mm_T (MM_TILE tokens per work-group) compute
// dst[i, o] = Σ_k x[i, k]·w[o, k]. A work-group owns one output row o; its
// work-items stride over the row's units, so reads of w are contiguous
// across the group, and the partial sums meet in local memory. mm_T
// dequantises each unit once for all tokens of its tile: weights are read
// from memory once per tile instead of once per token.
//
// Launch: global (L·M, ceil(n/TILE)), local (L, 1); red holds TILE·L floats.

#define MM_TILE 8

#define MATMUL_BODY(T, TILE)                                                   \
	int o = get_group_id(0);                                                   \
	int lid = get_local_id(0), ls = get_local_size(0);                         \
	int i0 = get_group_id(1) * TILE;                                           \
	int nt = min(TILE, n - i0);                                                \
	global const uchar* row = w + (ulong)o * rowBytes;                         \
	float acc[TILE];                                                           \
	for (int t = 0; t < TILE; t++)                                             \
		acc[t] = 0.0f;                                                         \
	int units = K / UE_##T;                                                    \
	for (int u = lid; u < units; u += ls) {                                    \
		float v[UE_##T];                                                       \
		int k0 = unit_##T(row, u, v);                                          \
		for (int t = 0; t < nt; t++) {                                         \
			global const float* xr = x + (ulong)(i0 + t) * K + k0;             \
			float s = 0.0f;                                                    \
			for (int e = 0; e < UE_##T; e++)                                   \
				s += v[e] * xr[e];                                             \
			acc[t] += s;                                                       \
		}                                                                      \
	}                                                                          \
	for (int t = 0; t < TILE; t++)                                             \
		red[t * ls + lid] = acc[t];                                            \
	barrier(CLK_LOCAL_MEM_FENCE);                                              \
	for (int s = ls / 2; s > 0; s >>= 1) {                                     \
		if (lid < s)                                                           \
			for (int t = 0; t < TILE; t++)                                     \
				red[t * ls + lid] += red[t * ls + lid + s];                    \
		barrier(CLK_LOCAL_MEM_FENCE);                                          \
	}                                                                          \
	if (lid < nt)                                                              \
		dst[(ulong)(i0 + lid) * M + o] = red[lid * ls];

// Embedding: dst[i, :] = table[ids[i], :] dequantised. Launch: global
// (units per row, n). An id outside [0, vocab) writes zeros and reports
// STATUS_BAD_ID with the id.
#define DEFINE_WEIGHT_KERNELS(T)                                               \
	kernel void mv_##T(global const uchar* w, ulong rowBytes,                  \
			global const float* x, global float* dst, int K, int M, int n,     \
			local float* red) {                                                \
		MATMUL_BODY(T, 1)                                                      \
	}                                                                          \
	kernel void mm_##T(global const uchar* w, ulong rowBytes,                  \
			global const float* x, global float* dst, int K, int M, int n,     \
			local float* red) {                                                \
		MATMUL_BODY(T, MM_TILE)                                                \
	}                                                                          \
	kernel void embedding_##T(global float* dst, global const uchar* table,    \
			ulong rowBytes, global const int* ids, int K, int vocab,           \
			volatile global int* status) {                                     \
		int u = get_global_id(0), i = get_global_id(1);                        \
		if (u >= K / UE_##T)                                                   \
			return;                                                            \
		int id = ids[i];                                                       \
		float v[UE_##T];                                                       \
		int k0;                                                                \
		if (id < 0 || id >= vocab) {                                           \
			if (u == 0)                                                        \
				report(status, STATUS_BAD_ID, id);                             \
			k0 = u * UE_##T;                                                   \
			for (int e = 0; e < UE_##T; e++)                                   \
				v[e] = 0.0f;                                                   \
		} else {                                                               \
			k0 = unit_##T(table + (ulong)id * rowBytes, u, v);                 \
		}                                                                      \
		global float* d = dst + (ulong)i * K + k0;                             \
		for (int e = 0; e < UE_##T; e++)                                       \
			d[e] = v[e];                                                       \
	}

DEFINE_WEIGHT_KERNELS(f32)
DEFINE_WEIGHT_KERNELS(f16)
DEFINE_WEIGHT_KERNELS(bf16)
DEFINE_WEIGHT_KERNELS(q8_0)
DEFINE_WEIGHT_KERNELS(q4_0)
DEFINE_WEIGHT_KERNELS(q6_k)
