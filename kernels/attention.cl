// attention: causal attention of query rows over the KV cache, decode (n=1)
// and prefill alike. Query row i sits at position pos0+i and attends to
// cache positions 0 … pos0+i; query head h reads KV head h/(heads/kvHeads).
//
// The K and V caches are each F32 or F16 (read with vload_half: no
// cl_khr_fp16); a kernel name carries both types, attention_K_V. The
// arithmetic is llama.cpp's (ggml's mul_mat, soft_max, mul_mat on the CPU,
// no flash attention), whose rounding points an f16 cache adds:
//   - K F16: the query is rounded to f16 (mul_mat's vec_dot_type), and
//     score_j = (Σ_d q_d·k_jd)·scale in float;
//   - softmax in float: M = max_j score_j, e_j = exp(score_j − M) with
//     ggml's exp (expf_ggml), p_j = e_j·(1/Σ_j e_j): normalised before V
//     is weighted (the sum is formed in the first pass with OpenCL's exp,
//     which rounds differently only in the last bits);
//   - V F16: p_j is rounded to f16 before out_d = Σ_j p_j·v_jd.
// With F32 caches nothing is rounded. Rounding p_j needs the final M and
// sum, so a work-group makes two passes over the positions: att_stats finds
// M and the sum (per work-item online, rescaling its sum when its maximum
// grows, then one reduction), and att_weigh accumulates p_j·v_j. The scores
// of the last chunk are kept from the first pass (all of them for contexts
// up to ATT_CHUNK); the others are computed again, identically.
//
// One work-group per (head, query row). att_weigh takes the positions in
// chunks of ATT_CHUNK, so any context length works with fixed local memory
// and no score buffer. Its accumulator acc[G][D] lives in local memory:
// work-item lid owns the entries e ≡ lid (mod L); entry e = g·D + d sums
// positions c ≡ g (mod G) of dimension d, so G = L/D groups of work-items
// share the positions when the head is narrower than the group. Entries are
// private to their owner, so updating them needs no barrier.
//
// Launch: global (L·heads, n), local (L, 1). Local arrays: lq D floats, ls
// ATT_CHUNK, lacc max(L, D) floats (G·D ≤ max(L, D)), red L.
//
// Long decode contexts use flash-decoding instead: a single query has only
// `heads` work-groups, too few to fill a GPU, so the positions are split
// into P partitions. attention_stats_K writes each partition's (m_p, l_p);
// attention_part_K_V combines them into the global M = max m_p and
// sum = Σ_p l_p·e^(m_p−M), which is all the rounding of p_j needs, and
// writes its partition's Σ_j p_j·v_j; attention_merge adds the partitions.
// The result is the single pass's up to the order of float sums.

#define ATT_CHUNK 256

// Per cache type: the element pointer type, the query rounding (QR) for a
// K cache and the probability rounding (PR) for a V cache.
#define KV_f32 float
#define KV_f16 half
#define KVR_f32(x) (x)
#define KVR_f16(x) f16_round(x)

inline float kdot_f32(local const float* lq, global const float* kr, int D) {
	int D4 = D & ~3;
	float4 s4 = 0.0f;
	for (int d = 0; d < D4; d += 4)
		s4 += vload4(0, lq + d) * vload4(0, kr + d);
	float s = (s4.x + s4.y) + (s4.z + s4.w);
	for (int d = D4; d < D; d++)
		s += lq[d] * kr[d];
	return s;
}

inline float kdot_f16(local const float* lq, global const half* kr, int D) {
	int D4 = D & ~3;
	float4 s4 = 0.0f;
	for (int d = 0; d < D4; d += 4)
		s4 += vload4(0, lq + d) * vload_half4(0, kr + d);
	float s = (s4.x + s4.y) + (s4.z + s4.w);
	for (int d = D4; d < D; d++)
		s += lq[d] * vload_half(d, kr);
	return s;
}

inline float vel_f32(global const float* v, ulong i) { return v[i]; }
inline float vel_f16(global const half* v, ulong i) { return vload_half(i, v); }

// att_sum adds the G partial accumulators of dimension d (every lacc entry
// is final after att_weigh's last barrier).
inline float att_sum(local const float* lacc, int G, int D, int d) {
	float s = 0.0f;
	for (int g = 0; g < G; g++)
		s += lacc[g * D + d];
	return s;
}

// att_last_chunk is where the last ATT_CHUNK-aligned chunk of the
// non-empty range [c0, c1) begins.
inline int att_last_chunk(int c0, int c1) { return c0 + (c1 - c0 - 1) / ATT_CHUNK * ATT_CHUNK; }

// att_online folds score s into a running maximum m and sum l of
// e^(score−m).
inline void att_online(float s, float* m, float* l) {
	if (s > *m) {
		*l = *l * exp(*m - s) + 1.0f;
		*m = s;
	} else {
		*l += exp(s - *m);
	}
}

// DEFINE_ATT_K defines what depends on the K type only: staging the query,
// the first pass, and the split's per-partition statistics.
#define DEFINE_ATT_K(KT)                                                       \
	/* att_setup_KT stages the query row (rounded for the K type) and */      \
	/* clears GD accumulator entries. */                                      \
	inline void att_setup_##KT(global const float* qr, int D, int GD,         \
			local float* lq, local float* lacc) {                              \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		for (int d = lid; d < D; d += L)                                       \
			lq[d] = KVR_##KT(qr[d]);                                           \
		for (int e = lid; e < GD; e += L)                                      \
			lacc[e] = 0.0f;                                                    \
		barrier(CLK_LOCAL_MEM_FENCE);                                          \
	}                                                                          \
	/* att_stats_KT returns, to every work-item, the maximum score *mp */     \
	/* over positions [c0, c1) and the sum *lp of e^(score−max). When ls */   \
	/* is not 0 it leaves there the scores of the last ATT_CHUNK-aligned */   \
	/* chunk, which att_weigh then need not compute again. */                 \
	inline void att_stats_##KT(global const KV_##KT* kb, ulong kvStride,      \
			int D, float scale, int c0, int c1, local const float* lq,         \
			local float* ls, local float* red, float* mp, float* lp) {         \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int cLast = att_last_chunk(c0, c1);                                    \
		float m = -INFINITY, l = 0.0f;                                         \
		for (int c = c0 + lid; c < c1; c += L) {                               \
			float s = kdot_##KT(lq, kb + (ulong)c * kvStride, D) * scale;      \
			if (ls && c >= cLast)                                              \
				ls[c - cLast] = s;                                             \
			att_online(s, &m, &l);                                             \
		}                                                                      \
		float M = wg_max(red, m);                                              \
		/* A work-item without positions has m = -inf, l = 0: adds 0. */     \
		*lp = wg_sum(red, l * exp(m - M));                                     \
		*mp = M;                                                               \
	}                                                                          \
	/* attention_stats_KT: partition p of head h's positions (see */          \
	/* attention_part) writes its (m, l) to part[(h·P + p)·(D+2) …]. */      \
	/* Launch: global (L·heads, P), local (L, 1); lq D floats, red L. */     \
	kernel void attention_stats_##KT(global float* part,                      \
			global const float* q, global const KV_##KT* k, int kvLen,         \
			int partLen, int heads, int kvHeads, int D, float scale,           \
			local float* lq, local float* red) {                               \
		int h = get_group_id(0), p = get_group_id(1), P = get_num_groups(1);   \
		int kvh = h / (heads / kvHeads);                                       \
		att_setup_##KT(q + (ulong)h * D, D, 0, lq, lq);                        \
		float m, l;                                                            \
		int c0 = p * partLen;                                                  \
		att_stats_##KT(k + (ulong)kvh * D, (ulong)kvHeads * D, D, scale, c0,   \
				min(kvLen, c0 + partLen), lq, 0, red, &m, &l);                 \
		if (get_local_id(0) == 0) {                                            \
			global float* pr = part + ((ulong)h * P + p) * (D + 2);            \
			pr[0] = m;                                                         \
			pr[1] = l;                                                         \
		}                                                                      \
	}

// DEFINE_ATT_KV defines the second pass and the kernels for a K and a V
// type.
#define DEFINE_ATT_KV(KT, VT)                                                  \
	/* att_weigh_KT_VT adds p_j·v_j for positions [cBegin, cEnd) to lacc, */ \
	/* p_j = e^(score_j−M)·inv rounded for the V type, the last chunk */      \
	/* first: with stored set, att_stats left its scores in ls. Every */      \
	/* work-item calls it with the same arguments. */                         \
	inline void att_weigh_##KT##_##VT(global const KV_##KT* kb,               \
			global const KV_##VT* vb, ulong kvStride, int D, float scale,      \
			int cBegin, int cEnd, int G, float M, float inv, bool stored,      \
			local const float* lq, local float* ls, local float* lacc) {       \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int GD = G * D;                                                        \
		int cLast = att_last_chunk(cBegin, cEnd);                              \
		for (int c0 = cLast; c0 >= cBegin; c0 -= ATT_CHUNK) {                  \
			int cn = min(ATT_CHUNK, cEnd - c0);                                \
			for (int c = lid; c < cn; c += L) {                                \
				float s = stored && c0 == cLast ? ls[c]                        \
						: kdot_##KT(lq, kb + (ulong)(c0 + c) * kvStride, D)    \
								* scale;                                       \
				ls[c] = KVR_##VT(expf_ggml(s - M) * inv);                      \
			}                                                                  \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
			for (int e = lid; e < GD; e += L) {                                \
				int g = e / D, d = e - g * D;                                  \
				float a = lacc[e];                                             \
				for (int c = g; c < cn; c += G)                                \
					a += ls[c] * vel_##VT(vb, (ulong)(c0 + c) * kvStride + d); \
				lacc[e] = a;                                                   \
			}                                                                  \
			/* ls is rewritten by the next chunk. */                          \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
		}                                                                      \
	}                                                                          \
	kernel void attention_##KT##_##VT(global float* out,                      \
			global const float* q, global const KV_##KT* k,                    \
			global const KV_##VT* v, int pos0, int heads, int kvHeads, int D,  \
			float scale, local float* lq, local float* ls, local float* lacc,  \
			local float* red) {                                                \
		int h = get_group_id(0), i = get_group_id(1);                          \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int kvh = h / (heads / kvHeads);                                       \
		ulong kvStride = (ulong)kvHeads * D;                                   \
		int G = L >= D ? L / D : 1;                                            \
		att_setup_##KT(q + ((ulong)i * heads + h) * D, D, G * D, lq, lacc);    \
		global const KV_##KT* kb = k + (ulong)kvh * D;                         \
		float m, l;                                                            \
		att_stats_##KT(kb, kvStride, D, scale, 0, pos0 + i + 1, lq, ls, red,   \
				&m, &l);                                                       \
		att_weigh_##KT##_##VT(kb, v + (ulong)kvh * D, kvStride, D, scale, 0,   \
				pos0 + i + 1, G, m, 1.0f / l, true, lq, ls, lacc);             \
		global float* orow = out + ((ulong)i * heads + h) * D;                 \
		for (int d = lid; d < D; d += L)                                       \
			orow[d] = att_sum(lacc, G, D, d);                                  \
	}                                                                          \
	/* attention_part_KT_VT is partition p of a single query's positions, */ \
	/* [p·partLen, min((p+1)·partLen, kvLen)), after attention_stats: it */   \
	/* writes Σ_j p_j·v_j to part[(h·P + p)·(D+2) + 2 …]. Launch and local */ \
	/* arrays as for attention_KT_VT, global (L·heads, P). */                 \
	kernel void attention_part_##KT##_##VT(global float* part,                \
			global const float* q, global const KV_##KT* k,                    \
			global const KV_##VT* v, int kvLen, int partLen, int heads,        \
			int kvHeads, int D, float scale, local float* lq, local float* ls, \
			local float* lacc, local float* red) {                             \
		int h = get_group_id(0), p = get_group_id(1), P = get_num_groups(1);   \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int kvh = h / (heads / kvHeads);                                       \
		ulong kvStride = (ulong)kvHeads * D;                                   \
		int G = L >= D ? L / D : 1;                                            \
		global float* ph = part + (ulong)h * P * (D + 2);                      \
		float M = -INFINITY, sum = 0.0f;                                       \
		for (int r = 0; r < P; r++)                                            \
			M = fmax(M, ph[(ulong)r * (D + 2)]);                               \
		for (int r = 0; r < P; r++) {                                          \
			global const float* pr = ph + (ulong)r * (D + 2);                  \
			sum += pr[1] * exp(pr[0] - M);                                     \
		}                                                                      \
		att_setup_##KT(q + (ulong)h * D, D, G * D, lq, lacc);                  \
		int c0 = p * partLen;                                                  \
		att_weigh_##KT##_##VT(k + (ulong)kvh * D, v + (ulong)kvh * D,          \
				kvStride, D, scale, c0, min(kvLen, c0 + partLen), G, M,        \
				1.0f / sum, false, lq, ls, lacc);                              \
		global float* pr = ph + (ulong)p * (D + 2);                            \
		for (int d = lid; d < D; d += L)                                       \
			pr[2 + d] = att_sum(lacc, G, D, d);                                \
	}

DEFINE_ATT_K(f32)
DEFINE_ATT_K(f16)
DEFINE_ATT_KV(f32, f32)
DEFINE_ATT_KV(f32, f16)
DEFINE_ATT_KV(f16, f32)
DEFINE_ATT_KV(f16, f16)

// attention_merge adds the P partitions' weighted sums of each head.
// Launch: global (roundUp(D, L), heads), one output element per work-item.
kernel void attention_merge(global float* out, global const float* part, int P, int D) {
	int d = get_global_id(0), h = get_global_id(1);
	if (d >= D)
		return;
	global const float* ph = part + (ulong)h * P * (D + 2);
	float s = 0.0f;
	for (int p = 0; p < P; p++)
		s += ph[(ulong)p * (D + 2) + 2 + d];
	out[(ulong)h * D + d] = s;
}
