// MatMulTransposed for the plain weight types (F32, F16, BF16; the block
// formats use the integer kernels of quant.cl) and Embedding for every type:
// dst[i, o] = Σ_k x[i, k]·w[o, k], w [M, K] in its stored type.
//
// mv_T (one token) is bound by reading w once. A work-group of R·S
// work-items owns R consecutive rows, S "lanes" per row; lane s reads units
// s, s+S, … of its row, so on a GPU the lanes of a row read adjacent bytes
// (coalesced) and their partial sums meet in a local-memory tree. On a CPU
// device S = 1: each work-item streams a whole row and there is nothing to
// reduce, which suits caches and prefetchers, and sums in the CPU backend's
// order (mode: weights.cl's fs_t), to its bits. The host picks R and S from
// the device (S a power of two).
// Launch: global (ceil(M/R)·R·S), local (R·S); red holds R·S floats.
//
// Several tokens on a GPU take the tiled GEMM (mmt_T, gemm.cl). On a CPU
// device they take mmc_T: MM_BN tokens per work-item, which dequantises its
// row's 16-element groups once into registers and uses each for all MM_BN
// tokens, reading x straight from global memory (the token tile stays in
// the core's caches), with no barrier: PoCL runs a work-group as a loop
// over its items and must spill every value live across a barrier to
// memory, so a local-memory tile's accumulators would round-trip through
// memory at every chunk; registers are about 2.5× faster there. Each token
// keeps tinyBLAS's lanes (mode FS_TINY8 or FS_TINY16, weights.cl), so that
// the sums are the CPU backend's and llama.cpp's; K is a multiple of 16,
// and the host gives other orders to mmt_T.
// Launch: global (roundUp(M, L), ceil(n/MM_BN)), local (L, 1).

#define MM_BN 16

// mmc_mad adds a 16-element group's products into a token's lanes: 8 of
// them (FS_TINY8, the low half, the group's halves in turn) or 16.
inline float16 mmc_mad(int mode, int kind, float16 w, float16 x, float16 a) {
	if (mode == FS_TINY8) {
		a.lo = fs_mad8(kind, w.lo, x.lo, a.lo);
		a.lo = fs_mad8(kind, w.hi, x.hi, a.lo);
		return a;
	}
	return fs_mad(kind, w, x, a);
}

#define DEFINE_MATMUL_KERNELS(T)                                               \
	kernel void mv_##T(global const uchar* w, ulong rowBytes,                  \
			global const float* x, global float* dst, int K, int M, int S,     \
			local float* red, int mode) {                                      \
		int lid = get_local_id(0);                                             \
		/* Dimension 1 is the token: MatMulDecode runs each row as a lone one. */ \
		int tok = get_group_id(1);                                             \
		x += (ulong)tok * K;                                                   \
		dst += (ulong)tok * M;                                                 \
		int r = lid / S, lane = lid - r * S;                                   \
		int o = get_group_id(0) * (get_local_size(0) / S) + r;                 \
		global const uchar* row = w + (ulong)min(o, M - 1) * rowBytes;         \
		const bool bf = FS_KIND_##T == 2;                                      \
		int groups = fs_groups(mode, bf, K);                                   \
		fs_t f;                                                                \
		fs_zero(&f);                                                           \
		for (int g = lane; g < groups; g += S)                                 \
			fs_add(&f, mode, FS_KIND_##T, g, deq16_##T(row, g), MVR16_##T(vload16(g, x))); \
		/* Lane 0 adds the remainder: with S = 1 (a CPU device) the sum */    \
		/* is the CPU backend's to the bit. */                                 \
		float s = fs_finish_##T(&f, mode, row, x, lane == 0 ? 16 * groups : K, K); \
		s = seg_sum(red, lid, lane, S, s);                                     \
		if (lane == 0 && o < M)                                                \
			dst[o] = s;                                                        \
	}                                                                          \
	kernel void mmc_##T(global const uchar* w, ulong rowBytes,                 \
			global const float* x, global float* dst, int K, int M, int n,     \
			int mode) {                                                        \
		_Pragma("OPENCL FP_CONTRACT OFF");                                     \
		const int kind = FS_KIND_##T;                                          \
		int o = get_global_id(0);                                              \
		if (o >= M)                                                            \
			return;                                                            \
		int i0 = get_group_id(1) * MM_BN;                                      \
		int nt = min(MM_BN, n - i0);                                           \
		global const uchar* row = w + (ulong)o * rowBytes;                     \
		global const float* xb = x + (ulong)i0 * K;                            \
		float16 acc[MM_BN];                                                    \
		for (int t = 0; t < MM_BN; t++)                                        \
			acc[t] = 0.0f;                                                     \
		int groups = K >> 4;                                                   \
		if (nt == MM_BN) {                                                     \
			for (int g = 0; g < groups; g++) {                                 \
				float16 wv = deq16_##T(row, g);                                \
				_Pragma("unroll") for (int t = 0; t < MM_BN; t++)              \
					acc[t] = mmc_mad(mode, kind, wv, vload16(g, xb + (ulong)t * K), acc[t]); \
			}                                                                  \
		} else {                                                               \
			for (int g = 0; g < groups; g++) {                                 \
				float16 wv = deq16_##T(row, g);                                \
				for (int t = 0; t < nt; t++)                                   \
					acc[t] = mmc_mad(mode, kind, wv, vload16(g, xb + (ulong)t * K), acc[t]); \
			}                                                                  \
		}                                                                      \
		for (int t = 0; t < nt; t++)                                           \
			dst[(ulong)(i0 + t) * M + o] =                                     \
					mode == FS_TINY8 ? fs_hsum8(acc[t].lo) : fs_reduce16(acc[t]); \
	}

#define DEFINE_EMBEDDING_KERNEL(T)                                             \
	kernel void embedding_##T(global float* dst, global const uchar* table,    \
			ulong rowBytes, global const int* ids, int K, int vocab,           \
			volatile global int* status) {                                     \
		int g = get_global_id(0), i = get_global_id(1);                        \
		if (g * 16 >= K)                                                       \
			return;                                                            \
		int id = ids[i];                                                       \
		global float* d = dst + (ulong)i * K;                                  \
		if (id < 0 || id >= vocab) {                                           \
			if (g == 0)                                                        \
				report(status, STATUS_BAD_ID, id);                             \
			for (int k = g * 16; k < min(K, g * 16 + 16); k++)                 \
				d[k] = 0.0f;                                                   \
			return;                                                            \
		}                                                                      \
		global const uchar* row = table + (ulong)id * rowBytes;                \
		if (g * 16 + 16 <= K) {                                                \
			vstore16(deq16_##T(row, g), g, d);                                 \
			return;                                                            \
		}                                                                      \
		for (int k = g * 16; k < K; k++)                                       \
			d[k] = elem_##T(row, k);                                           \
	}

// Embedding: dst[i, :] = table[ids[i], :] dequantised, one 16-element group
// per work-item. Launch: global (ceil(K/16), n). An id outside [0, vocab)
// writes zeros and reports STATUS_BAD_ID with the id.

// Plain weight types multiply float activations (for F16 and BF16 rounded to
// that type: by round_act_T, or on a GPU by mv_T as it reads them, see
// weights.cl); the block formats' matmuls are the integer kernels of
// quant.cl.
DEFINE_MATMUL_KERNELS(f32)
DEFINE_MATMUL_KERNELS(f16)
DEFINE_MATMUL_KERNELS(bf16)

DEFINE_EMBEDDING_KERNEL(f32)
DEFINE_EMBEDDING_KERNEL(f16)
DEFINE_EMBEDDING_KERNEL(bf16)
DEFINE_EMBEDDING_KERNEL(q8_0)
DEFINE_EMBEDDING_KERNEL(q4_0)
DEFINE_EMBEDDING_KERNEL(q6_k)
DEFINE_EMBEDDING_KERNEL(q4_1)
DEFINE_EMBEDDING_KERNEL(q5_0)
DEFINE_EMBEDDING_KERNEL(q5_1)
DEFINE_EMBEDDING_KERNEL(q2_k)
DEFINE_EMBEDDING_KERNEL(q3_k)
DEFINE_EMBEDDING_KERNEL(q4_k)
DEFINE_EMBEDDING_KERNEL(q5_k)
DEFINE_EMBEDDING_KERNEL(iq4_nl)
DEFINE_EMBEDDING_KERNEL(iq4_xs)

// round_act_T writes x rounded to the activation type of T weights (XR_T)
// to dst, count elements, so that mmc_T and mmt_T, which read each
// activation once per output row, read it rounded once. Launch: global count
// rounded up to the local size.
#define DEFINE_ROUND_ACT_KERNEL(T)                                             \
	kernel void round_act_##T(global const float* x, global float* dst,        \
			int count) {                                                       \
		int k = get_global_id(0);                                              \
		if (k < count)                                                         \
			dst[k] = XR_##T(x[k]);                                             \
	}

DEFINE_ROUND_ACT_KERNEL(f16)
DEFINE_ROUND_ACT_KERNEL(bf16)
