// attention: attention of query rows over the cells of the KV cache that
// each sees, decode (n=1) and prefill alike (backend.KVView). Row i reads
// its position, sequence id and cell range [lo, hi) from rows[4i…]; it sees
// cell c of its range iff the cell's sequence set (cells[3c+1] low word,
// cells[3c+2] high word) holds the row's sequence, the cell's position
// cells[3c] is ≤ the row's, and, with a window, the row's position less the
// cell's is < window. Query head h reads KV head h/(heads/kvHeads). A cell
// the row does not see is llama.cpp's −∞ mask entry: it is skipped where
// scores are taken and weighs V by 0; a row that sees nothing gets zeros.
//
// The K and V caches are each F32 or F16 (read with vload_half: no
// cl_khr_fp16); a kernel name carries both types, attention_K_V. The
// arithmetic is llama.cpp's (ggml's mul_mat, soft_max, mul_mat on the CPU,
// no flash attention), whose rounding points an f16 cache adds:
//   - K F16: the query is rounded to f16 (mul_mat's vec_dot_type), and
//     score_j = (Σ_d q_d·k_jd), soft-capped when cap > 0 (× 1/cap, tanh,
//     × cap, as llama.cpp's graph), × scale in float;
//   - softmax in float: M = max_j score_j, e_j = exp(score_j − M) with
//     ggml's exp (expf_ggml), p_j = e_j·(1/Σ_j e_j): normalised before V
//     is weighted (the sum is formed in the first pass with OpenCL's exp,
//     which rounds differently only in the last bits);
//   - V F16: p_j is rounded to f16 before out_d = Σ_j p_j·v_jd.
// With F32 caches nothing is rounded. Rounding p_j needs the final M and
// sum, so a work-group makes two passes over the cells: att_stats finds
// M and the sum (per work-item online, rescaling its sum when its maximum
// grows, then one reduction), and att_weigh accumulates p_j·v_j. The scores
// of the last chunk are kept from the first pass (all of them for ranges
// up to ATT_CHUNK); the others are computed again, identically.
//
// One work-group per (head, query row). att_weigh takes the cells in
// chunks of ATT_CHUNK, so any range works with fixed local memory and no
// score buffer. Its accumulator acc[G][D] lives in local memory: work-item
// lid owns the entries e ≡ lid (mod L); entry e = g·D + d sums cells
// c ≡ g (mod G) of dimension d, so G = L/D groups of work-items share the
// cells when the head is narrower than the group. Entries are private to
// their owner, so updating them needs no barrier.
//
// Launch: global (L·heads, n), local (L, 1). Local arrays: lq D floats, ls
// ATT_CHUNK, lacc max(L, D) floats (G·D ≤ max(L, D)), red L.
//
// Long decode ranges use flash-decoding instead: a single query has only
// `heads` work-groups, too few to fill a GPU, so the view [Lo, Hi) is split
// into P partitions. attention_stats_K writes each partition's (m_p, l_p);
// attention_part_K_V combines them into the global M = max m_p and
// sum = Σ_p l_p·e^(m_p−M), which is all the rounding of p_j needs, and
// writes its partition's Σ_j p_j·v_j; attention_merge adds the partitions.
// The result is the single pass's up to the order of float sums.
//
// A row whose sequence id or range is bad is reported in the status word
// (common.cl) and gets zeros.

#define ATT_CHUNK 256

// Per cache type: the element pointer type, the query rounding (QR) for a
// K cache and the probability rounding (PR) for a V cache.
#define KV_f32 float
#define KV_f16 half
#define KVR_f32(x) (x)
#define KVR_f16(x) f16_round(x)

// att_view is what a query row sees: the cell table, the row's position,
// its sequence's bit (mlo, mhi) and the window (0: none).
typedef struct {
	global const int* cells;
	int pos, window;
	uint mlo, mhi;
} att_view;

// att_sees reports whether the row of w sees cell c.
inline bool att_sees(att_view w, int c) {
	global const int* ce = w.cells + 3 * (ulong)c;
	int p = ce[0];
	return (((uint)ce[1] & w.mlo) | ((uint)ce[2] & w.mhi)) != 0 && p <= w.pos
			&& (w.window == 0 || (long)w.pos - p < w.window);
}

// att_row reads row i of rows into *w and its range into *lo, *hi; a row
// whose sequence id is outside 0…63 or whose range is reversed or leaves
// [Lo, Hi) is reported (by work-item 0) and false returned.
inline bool att_row(global const int* rows, int i, global const int* cells,
		int window, int Lo, int Hi, volatile global int* status, att_view* w,
		int* lo, int* hi) {
	global const int* r = rows + 4 * (ulong)i;
	int seq = r[1];
	*lo = r[2];
	*hi = r[3];
	w->cells = cells;
	w->pos = r[0];
	w->window = window;
	w->mlo = seq >= 0 && seq < 32 ? 1u << seq : 0u;
	w->mhi = seq >= 32 && seq < 64 ? 1u << (seq - 32) : 0u;
	int bad = seq < 0 || seq > 63 ? STATUS_BAD_SEQ
			: *lo < Lo || *lo > *hi || *hi > Hi ? STATUS_BAD_RANGE : 0;
	if (bad && get_local_id(0) == 0)
		report(status, bad, i);
	return !bad;
}

// att_scoring turns a dot product into a score: soft-capped when cap > 0
// (× capInv = 1/cap, tanh, × cap), then × scale.
typedef struct {
	float scale, cap, capInv;
} att_scoring;

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
// range [c0, c1) begins (c0 when it is empty).
inline int att_last_chunk(int c0, int c1) { return c0 + max(c1 - c0 - 1, 0) / ATT_CHUNK * ATT_CHUNK; }

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

// att_part reads the single query row of a split (att_row) and returns in
// [*c0, *c1) partition p's share of its range: the cells of
// [Lo + p·partLen, Lo + (p+1)·partLen) in it, none for a bad row.
inline void att_part(global const int* rows, global const int* cells,
		int window, int Lo, int Hi, volatile global int* status, int p,
		int partLen, att_view* w, int* c0, int* c1) {
	int lo, hi;
	bool ok = att_row(rows, 0, cells, window, Lo, Hi, status, w, &lo, &hi);
	*c0 = max(lo, Lo + p * partLen);
	*c1 = ok ? max(*c0, min(hi, Lo + (p + 1) * partLen)) : *c0;
}

// DEFINE_ATT_K defines what depends on the K type only: staging the query,
// scoring, the first pass, and the split's per-partition statistics.
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
	/* att_score_KT is the score of key kr (see att_scoring). */              \
	inline float att_score_##KT(local const float* lq,                        \
			global const KV_##KT* kr, int D, att_scoring sc) {                 \
		float s = kdot_##KT(lq, kr, D);                                        \
		if (sc.cap > 0.0f)                                                     \
			s = sc.cap * tanh(s * sc.capInv);                                  \
		return s * sc.scale;                                                   \
	}                                                                          \
	/* att_stats_KT returns, to every work-item, the maximum score *mp */     \
	/* over the cells of [c0, c1) that w sees and the sum *lp of */           \
	/* e^(score−max) (−∞ and 0 when it sees none). When ls is not 0 it */     \
	/* leaves there the scores of the last ATT_CHUNK-aligned chunk, which */  \
	/* att_weigh then need not compute again. */                             \
	inline void att_stats_##KT(global const KV_##KT* kb, ulong kvStride,      \
			int D, att_scoring sc, att_view w, int c0, int c1,                 \
			local const float* lq, local float* ls, local float* red,          \
			float* mp, float* lp) {                                            \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int cLast = att_last_chunk(c0, c1);                                    \
		float m = -INFINITY, l = 0.0f;                                         \
		for (int c = c0 + lid; c < c1; c += L) {                               \
			if (!att_sees(w, c))                                               \
				continue;                                                      \
			float s = att_score_##KT(lq, kb + (ulong)c * kvStride, D, sc);     \
			if (ls && c >= cLast)                                              \
				ls[c - cLast] = s;                                             \
			att_online(s, &m, &l);                                             \
		}                                                                      \
		float M = wg_max(red, m);                                              \
		/* A work-item without cells has m = -inf, l = 0: adds 0. */         \
		*lp = wg_sum(red, m == -INFINITY ? 0.0f : l * exp(m - M));             \
		*mp = M;                                                               \
	}                                                                          \
	/* attention_stats_KT: partition p of head h's view (see */               \
	/* attention_part) writes its (m, l) to part[(h·P + p)·(D+2) …]. */      \
	/* Launch: global (L·heads, P), local (L, 1); lq D floats, red L. */     \
	kernel void attention_stats_##KT(global float* part,                      \
			global const float* q, global const KV_##KT* k,                    \
			global const int* rows, global const int* cells, int Lo, int Hi,   \
			int window, int partLen, int heads, int kvHeads, int D,            \
			float scale, float cap, float capInv, volatile global int* status, \
			local float* lq, local float* red) {                               \
		int h = get_group_id(0), p = get_group_id(1), P = get_num_groups(1);   \
		int kvh = h / (heads / kvHeads);                                       \
		att_view w;                                                            \
		int c0, c1;                                                            \
		att_part(rows, cells, window, Lo, Hi, status, p, partLen, &w, &c0,     \
				&c1);                                                          \
		att_scoring sc = {scale, cap, capInv};                                 \
		att_setup_##KT(q + (ulong)h * D, D, 0, lq, lq);                        \
		float m, l;                                                            \
		att_stats_##KT(k + (ulong)kvh * D, (ulong)kvHeads * D, D, sc, w, c0,   \
				c1, lq, 0, red, &m, &l);                                       \
		if (get_local_id(0) == 0) {                                            \
			global float* pr = part + ((ulong)h * P + p) * (D + 2);            \
			pr[0] = m;                                                         \
			pr[1] = l;                                                         \
		}                                                                      \
	}

// DEFINE_ATT_KV defines the second pass and the kernels for a K and a V
// type.
#define DEFINE_ATT_KV(KT, VT)                                                  \
	/* att_weigh_KT_VT adds p_j·v_j for the cells of [cBegin, cEnd) to */    \
	/* lacc, p_j = e^(score_j−M)·inv rounded for the V type where w sees */  \
	/* cell j, else 0; the last chunk first: with stored set, att_stats */    \
	/* left its scores in ls. Every work-item calls it with the same */       \
	/* arguments. */                                                          \
	inline void att_weigh_##KT##_##VT(global const KV_##KT* kb,               \
			global const KV_##VT* vb, ulong kvStride, int D, att_scoring sc,   \
			att_view w, int cBegin, int cEnd, int G, float M, float inv,       \
			bool stored, local const float* lq, local float* ls,               \
			local float* lacc) {                                               \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int GD = G * D;                                                        \
		int cLast = att_last_chunk(cBegin, cEnd);                              \
		for (int c0 = cLast; c0 >= cBegin; c0 -= ATT_CHUNK) {                  \
			int cn = min(ATT_CHUNK, cEnd - c0);                                \
			for (int c = lid; c < cn; c += L) {                                \
				float p = 0.0f;                                                \
				if (att_sees(w, c0 + c)) {                                     \
					float s = stored && c0 == cLast ? ls[c]                    \
							: att_score_##KT(lq,                               \
									kb + (ulong)(c0 + c) * kvStride, D, sc);   \
					p = KVR_##VT(expf_ggml(s - M) * inv);                      \
				}                                                              \
				ls[c] = p;                                                     \
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
			global const KV_##VT* v, global const int* rows,                   \
			global const int* cells, int Lo, int Hi, int window, int heads,    \
			int kvHeads, int D, float scale, float cap, float capInv,          \
			volatile global int* status, local float* lq, local float* ls,     \
			local float* lacc, local float* red) {                             \
		int h = get_group_id(0), i = get_group_id(1);                          \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int kvh = h / (heads / kvHeads);                                       \
		ulong kvStride = (ulong)kvHeads * D;                                   \
		int G = L >= D ? L / D : 1;                                            \
		att_view w;                                                            \
		int lo, hi;                                                            \
		if (!att_row(rows, i, cells, window, Lo, Hi, status, &w, &lo, &hi))    \
			hi = lo; /* sees nothing: zeros */                                 \
		att_scoring sc = {scale, cap, capInv};                                 \
		att_setup_##KT(q + ((ulong)i * heads + h) * D, D, G * D, lq, lacc);    \
		global const KV_##KT* kb = k + (ulong)kvh * D;                         \
		float m, l;                                                            \
		att_stats_##KT(kb, kvStride, D, sc, w, lo, hi, lq, ls, red, &m, &l);   \
		att_weigh_##KT##_##VT(kb, v + (ulong)kvh * D, kvStride, D, sc, w, lo,  \
				hi, G, m, 1.0f / l, true, lq, ls, lacc);                       \
		global float* orow = out + ((ulong)i * heads + h) * D;                 \
		for (int d = lid; d < D; d += L)                                       \
			orow[d] = att_sum(lacc, G, D, d);                                  \
	}                                                                          \
	/* attention_part_KT_VT is partition p of a single query's view, */      \
	/* [Lo + p·partLen, Lo + (p+1)·partLen) ∩ [lo, hi), after */              \
	/* attention_stats: it writes Σ_j p_j·v_j to */                           \
	/* part[(h·P + p)·(D+2) + 2 …]. Launch and local arrays as for */         \
	/* attention_KT_VT, global (L·heads, P). */                               \
	kernel void attention_part_##KT##_##VT(global float* part,                \
			global const float* q, global const KV_##KT* k,                    \
			global const KV_##VT* v, global const int* rows,                   \
			global const int* cells, int Lo, int Hi, int window, int partLen,  \
			int heads, int kvHeads, int D, float scale, float cap,             \
			float capInv, volatile global int* status, local float* lq,        \
			local float* ls, local float* lacc, local float* red) {            \
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
			/* A partition without cells seen adds 0. */                      \
			if (pr[0] != -INFINITY)                                            \
				sum += pr[1] * exp(pr[0] - M);                                 \
		}                                                                      \
		att_view w;                                                            \
		int c0, c1;                                                            \
		att_part(rows, cells, window, Lo, Hi, status, p, partLen, &w, &c0,     \
				&c1);                                                          \
		att_scoring sc = {scale, cap, capInv};                                 \
		att_setup_##KT(q + (ulong)h * D, D, G * D, lq, lacc);                  \
		att_weigh_##KT##_##VT(k + (ulong)kvh * D, v + (ulong)kvh * D,          \
				kvStride, D, sc, w, c0, c1, G, M, 1.0f / sum, false, lq, ls,   \
				lacc);                                                         \
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
