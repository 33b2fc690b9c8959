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
// no flash attention) as the CPU backend computes it for the llama.cpp
// build it follows (backend/cpu/attention.go, flavor.go), whose vectors
// hold W floats: 8 (its AVX2 build) or, with wide set, 16 (AVX-512; only
// for K and V caches of one type). A cell's lane in every sum is its
// offset from the row's lo (llama.cpp's view starts at cell 0):
//   - K F16: the query is rounded to f16 (mul_mat's vec_dot_type);
//   - score_j: the query's dot product with key j (att_dot: tinyBLAS's one
//     W-lane accumulator in a prefill that sgemm takes, ktiny, else
//     ggml_vec_dot's four, over 4W-element steps, and its remainder),
//     soft-capped when cap > 0 (× 1/cap, tanh, × cap), × scale in float;
//   - softmax: M = max_j score_j, e_j = exp(score_j − M) with the build's
//     exp (expf_lanes), summed in W-cell blocks (att_reduce), the block
//     sums added in order in float64 (cl_khr_fp64; a float pair carrying
//     float64's precision near enough elsewhere); p_j = e_j·float(1/sum),
//     normalised before V is weighted;
//   - V F16: p_j is rounded to f16;
//   - out_d = Σ_j p_j·v_jd in G lanes, a cell's lane its offset mod G, each
//     a chain of fused multiply-adds in cell order: W (tinyBLAS in a
//     prefill) or 4W (vec_dot), folded and reduced as the CPU does; on
//     AVX-512 the cells past vec_dot's last 64-cell step of the padded
//     view (nkv & ~63, nkv = max(32, roundup32(hi − lo))) are then added
//     one by one.
// So these kernels give the CPU backend's bits, except: soft-capping (its
// tanh is OpenCL's, within a few ulp of the C library's); where local
// memory holds fewer than G lanes per output (the host then picks fewer,
// summed plainly); without fp64, where the float pair's sum rounds
// otherwise (very rarely); and in the flash-decoding split below.
//
// A work-group takes a tile of queries: hq query heads of one KV head
// (grouped-query attention) times R query rows, where the rows scan the
// same cells with the same arithmetic (a prompt's rows; rows that do not
// go through one by one), at most ATT_Q queries, as the host finds local
// memory for. It makes three passes over the cells, each key and value
// read once for all its queries, whose arithmetic is each its own alone:
// the scores and their maximum (keeping the first ATT_CHUNK scores in
// local memory), the block sums (work-item per block, then work-item j
// adds query j's in order), and the weighing, chunk after chunk of
// ATT_CHUNK cells: the chunk's p_j into local memory, then the lane sums,
// held in local memory lacc[j][G][D]: entry e = g·D + d of query j sums
// the chunk's cells c ≡ g (mod G) of dimension d and is owned by work-item
// e mod L, so updating it needs no barrier. Scores past the first chunk
// are computed again, identically, in the later passes.
//
// Launch: global (L·heads/hq, ceil(n/R)), local (L, 1). Local arrays, per
// query: lq D floats, ls ATT_CHUNK, lacc G·D floats, red L.
//
// Long decode ranges use flash-decoding instead: a single query has only
// heads/hq work-groups, too few to fill a GPU, so the view [Lo, Hi) is
// split into P partitions, each work-group again hq query heads of one KV
// head. attention_stats_K writes each partition's (m_p, l_p);
// attention_part_K_V combines them into the global M = max m_p and
// sum = Σ_p l_p·e^(m_p−M), which is all the rounding of p_j needs, and
// writes its partition's Σ_j p_j·v_j; attention_merge adds the partitions.
// The result is the single pass's up to the order of float sums.
//
// A row whose sequence id or range is bad is reported in the status word
// (common.cl) and gets zeros.

#define ATT_CHUNK 256

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// Per cache type: the element pointer type, whether it is F16, and the
// rounding of the query for a K cache and of the probabilities for a V
// cache.
#define KV_f32 float
#define KV_f16 half
#define KHALF_f32 false
#define KHALF_f16 true
#define KVR_f32(x) (x)
#define KVR_f16(x) f16_round(x)

// att_acc (common.cl) is ggml's ggml_float sum; att_inv is 1/sum rounded.
#ifdef cl_khr_fp64
inline float att_inv(att_acc s) { return (float)(1.0 / s); }
#else
// att_inv is 1/(hi + lo): div_rn's quotient of hi, one Newton step on.
inline float att_inv(att_acc s) {
	float r = div_rn(1.0f, s.x);
	return fma(r, fma(-r, s.y, fma(-r, s.x, 1.0f)), r);
}
#endif

// att_reduce is the sum of a build's W lanes x[0…W) as ggml takes it: on
// AVX2 (W = 8) the halves added, then (0+1)+(2+3) after vec_dot
// (GGML_F32x8_REDUCE) or (0+2)+(1+3) (tinyBLAS's and soft_max's hsum); on
// AVX-512 (W = 16) _mm512_reduce_add_ps's halving tree for both.
inline float att_reduce(const float* x, int W, bool vecdot) {
	if (W == 16) {
		float q0 = (x[0] + x[8]) + (x[4] + x[12]), q1 = (x[1] + x[9]) + (x[5] + x[13]);
		float q2 = (x[2] + x[10]) + (x[6] + x[14]), q3 = (x[3] + x[11]) + (x[7] + x[15]);
		return (q0 + q2) + (q1 + q3);
	}
	float t0 = x[0] + x[4], t1 = x[1] + x[5], t2 = x[2] + x[6], t3 = x[3] + x[7];
	return vecdot ? (t0 + t1) + (t2 + t3) : (t0 + t2) + (t1 + t3);
}

// att_mode is a launch's arithmetic (see the header): W lanes, ktiny for
// tinyBLAS's scores, G V lanes per output, exact when G is the build's
// count (else they are summed plainly), npv the view cells (from lo) that
// vec_dot's lanes take.
typedef struct {
	int W, G, npv;
	bool ktiny, exact;
} att_mode;

// att_batched reports whether row i's sequence has another of the n rows
// (then the row takes the prefill arithmetic: a row's bits are those of its
// sequence decoded alone, whatever shares its batch; cpu.task.prefill).
inline bool att_batched(global const int* rows, int i, int n) {
	int s = rows[4 * i + 1];
	for (int j = 0; j < n; j++)
		if (j != i && rows[4 * j + 1] == s)
			return true;
	return false;
}

// att_mode_of is the mode of a row of span cells: wide for AVX-512,
// prefill for a row whose sequence has more rows in the batch (where sgemm takes F16 K and
// AVX-512's F32 K of whole vectors, and V but for AVX2's head sizes not a
// multiple of 4), G the lanes the host gave lacc, split for the
// flash-decoding partitions (never exact).
inline att_mode att_mode_of(bool wide, bool prefill, bool khalf, int D, int G, int span, bool split) {
	att_mode m;
	m.W = wide ? 16 : 8;
	m.ktiny = prefill && (wide ? D % 16 == 0 : khalf && D % 8 == 0);
	bool vtiny = prefill && (wide || D % 4 == 0);
	int need = vtiny ? m.W : 4 * m.W;
	m.exact = !split && G >= need;
	m.G = m.exact ? need : G;
	m.npv = m.exact && wide && !vtiny ? max(32, (span + 31) & ~31) & ~63 : INT_MAX;
	return m;
}

// att_dot_tail_f32 adds vec_dot's remainder, elements np…D-1, to r as gcc
// compiles ggml's loop: the products of whole 4-element (AVX2) or
// 8-element (AVX-512) groups rounded and added in order, the rest by fused
// multiply-adds.
inline float att_dot_tail_f32(local const float* lq, global const float* kr, int np, int D, float r, bool avx2) {
#pragma OPENCL FP_CONTRACT OFF
	int i = np, n4 = np + ((D - np) & (avx2 ? ~3 : ~7));
	for (; i < n4; i++) {
		float p = kr[i] * lq[i];
		r = r + p;
	}
	for (; i < D; i++)
		r = fma(kr[i], lq[i], r);
	return r;
}

// att_dot_tail_f16 adds ggml_vec_dot_f16's remainder, exact products
// added in float64.
inline float att_dot_tail_f16(local const float* lq, global const half* kr, int np, int D, float r, bool avx2) {
#pragma OPENCL FP_CONTRACT OFF
	att_acc s = att_acc_of(r);
	for (int i = np; i < D; i++)
		s = att_add(s, vload_half(i, kr) * lq[i]);
	return att_round(s);
}

// Loads of W cache values at element i of p, as floats.
#define KLOAD_f32(W, p, i) vload##W(0, (p) + (i))
#define KLOAD_f16(W, p, i) vload_half##W(0, (p) + (i))

// DEFINE_ATT_DOTW defines att_dotwW_KT, the query's dot product with key
// kr in a build of W-float vectors (one lane of a vector per W-th element,
// every lane a chain of fused multiply-adds): with tiny tinyBLAS's one
// vector, reduced as its hsum; else ggml_vec_dot's four over 4W-element
// steps, folded (0+2)+(1+3) lane-wise and reduced, then its remainder.
#define DEFINE_ATT_DOTW(KT, W)                                                 \
	inline float att_dotw##W##_##KT(local const float* lq,                    \
			global const KV_##KT* kr, int D, bool tiny) {                      \
		float x[W];                                                            \
		if (tiny) {                                                            \
			float##W a = 0.0f;                                                 \
			for (int i = 0; i < D; i += W)                                     \
				a = fma(KLOAD_##KT(W, kr, i), vload##W(0, lq + i), a);         \
			vstore##W(a, 0, x);                                                \
			return att_reduce(x, W, false);                                    \
		}                                                                      \
		int np = D & ~(4 * W - 1);                                             \
		float##W a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;                   \
		for (int i = 0; i < np; i += 4 * W) {                                  \
			a0 = fma(KLOAD_##KT(W, kr, i), vload##W(0, lq + i), a0);           \
			a1 = fma(KLOAD_##KT(W, kr, i + W), vload##W(0, lq + i + W), a1);   \
			a2 = fma(KLOAD_##KT(W, kr, i + 2 * W),                             \
					vload##W(0, lq + i + 2 * W), a2);                          \
			a3 = fma(KLOAD_##KT(W, kr, i + 3 * W),                             \
					vload##W(0, lq + i + 3 * W), a3);                          \
		}                                                                      \
		vstore##W((a0 + a2) + (a1 + a3), 0, x);                                \
		return att_dot_tail_##KT(lq, kr, np, D, att_reduce(x, W, true),        \
				W == 8);                                                       \
	}

DEFINE_ATT_DOTW(f32, 8)
DEFINE_ATT_DOTW(f32, 16)
DEFINE_ATT_DOTW(f16, 8)
DEFINE_ATT_DOTW(f16, 16)

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

// ATT_Q is the most queries a work-group of attention_K_V takes: query
// heads of one KV head (grouped-query attention) times query rows that
// scan the same cells (a prompt's), as many as the host finds local memory
// for. The queries read each key and value together; each query's
// arithmetic is its own alone. ATT_QS(q) runs the statement after it for
// q = 0 … nq−1; ATT_QS_REG(q) does so unrolled on a GPU, for the
// weighing's lane sums, which then stay in registers. Only there: unrolled
// copies of the scoring multiplied PoCL's compile time many times over.
#define ATT_Q 8
#define ATT_QS(q) for (int q = 0; q < nq; q++)
#ifdef CPU_VARIANT
#define ATT_QS_REG(q) ATT_QS(q)
#else
#define ATT_QS_REG(q) _Pragma("unroll") for (int q = 0; q < ATT_Q; q++) if (q < nq)
#endif

// att_queries is what the n queries of a work-group see: query q is row
// (q / hq) of its rows and head (q % hq) of its heads, and w[q] its row's
// view.
typedef struct {
	int n;
	att_view w[ATT_Q];
} att_queries;

// att_max_n sets mp[q] to the maximum of mx[q] over the work-group, for
// the nq queries at once (red: nq·L floats). Every work-item must call it.
inline void att_max_n(local float* red, const float* mx, int nq, float* mp) {
	int lid = get_local_id(0), L = get_local_size(0);
#ifdef SUBGROUPS
	uint sg = get_sub_group_id(), ns = get_num_sub_groups();
	ATT_QS(q) {
		float m = sub_group_reduce_max(mx[q]);
		if (get_sub_group_local_id() == 0)
			red[q * L + sg] = m;
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	ATT_QS(q) {
		float r = red[q * L];
		for (uint i = 1; i < ns; i++)
			r = fmax(r, red[q * L + i]);
		mp[q] = r;
	}
#else
	ATT_QS(q) red[q * L + lid] = mx[q];
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = L / 2; s > 0; s >>= 1) {
		if (lid < s) {
			ATT_QS(q) red[q * L + lid] = fmax(red[q * L + lid], red[q * L + lid + s]);
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	ATT_QS(q) mp[q] = red[q * L];
#endif
	barrier(CLK_LOCAL_MEM_FENCE);
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

inline float vel_f32(global const float* v, ulong i) { return v[i]; }
inline float vel_f16(global const half* v, ulong i) { return vload_half(i, v); }

// att_sum adds the G lane sums of dimension d plainly (the flash-decoding
// partitions, and lanes fewer than the build's).
inline float att_sum(local const float* lacc, int G, int D, int d) {
	float s = 0.0f;
	for (int g = 0; g < G; g++)
		s += lacc[g * D + d];
	return s;
}

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

// att_part_queries is att_part for the hq query heads of one KV head that
// a split's work-group takes: the single query row's view for each.
inline void att_part_queries(global const int* rows, global const int* cells,
		int window, int Lo, int Hi, volatile global int* status, int p,
		int partLen, int hq, att_queries* aq, int* c0, int* c1) {
	att_part(rows, cells, window, Lo, Hi, status, p, partLen, &aq->w[0], c0, c1);
	aq->n = hq;
	for (int j = 1; j < hq; j++)
		aq->w[j] = aq->w[0];
}

// DEFINE_ATT_K defines what depends on the K type only: staging the query,
// scoring, the softmax's statistics, and the split's per-partition
// statistics.
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
	/* att_dot_KT is the query's dot product with key kr as mul_mat takes */ \
	/* it (att_mode), in vectors of the build's W lanes (att_dotw). */       \
	inline float att_dot_##KT(local const float* lq,                          \
			global const KV_##KT* kr, int D, att_mode m) {                     \
		return m.W == 16 ? att_dotw16_##KT(lq, kr, D, m.ktiny)                 \
				: att_dotw8_##KT(lq, kr, D, m.ktiny);                          \
	}                                                                          \
	/* att_score_KT is the score of key kr (see att_scoring). */              \
	inline float att_score_##KT(local const float* lq,                        \
			global const KV_##KT* kr, int D, att_mode m, att_scoring sc) {     \
		float s = att_dot_##KT(lq, kr, D, m);                                  \
		if (sc.cap > 0.0f)                                                     \
			s = sc.cap * tanh(s * sc.capInv);                                  \
		return s * sc.scale;                                                   \
	}                                                                          \
	/* att_seen_KT is the score of cell c, or −∞ where w does not see it. */ \
	inline float att_seen_##KT(local const float* lq,                         \
			global const KV_##KT* kb, ulong kvStride, int D, att_mode m,       \
			att_scoring sc, att_view w, int c) {                               \
		return att_sees(w, c)                                                  \
				? att_score_##KT(lq, kb + (ulong)c * kvStride, D, m, sc)       \
				: -INFINITY;                                                   \
	}                                                                          \
	/* att_softmax_KT returns, to every work-item, for each of the nq */      \
	/* queries (att_queries) the maximum score mp[q] over the cells of */     \
	/* [c0, c1) that it sees and float(1/sum) invp[q], the softmax's sum */   \
	/* formed as ggml_vec_soft_max_f32 does (W-cell blocks from c0, each */   \
	/* att_reduce'd, added in order in float64 by work-item q). The */        \
	/* queries read each key together; their scores of the first */           \
	/* ATT_CHUNK cells stay in ls (ATT_CHUNK per query, −∞ where unseen). */ \
	/* red holds nq·L floats. */                                               \
	inline void att_softmax_##KT(global const KV_##KT* kb, ulong kvStride,    \
			int D, att_mode m, att_scoring sc, att_queries aq, int c0, int c1, \
			local const float* lq, local float* ls, local float* red,          \
			float* mp, float* invp) {                                          \
		int lid = get_local_id(0), L = get_local_size(0), W = m.W, nq = aq.n;  \
		float mx[ATT_Q];                                                       \
		ATT_QS(q) mx[q] = -INFINITY;                                           \
		for (int c = c0 + lid; c < c1; c += L) {                               \
			global const KV_##KT* kr = kb + (ulong)c * kvStride;               \
			ATT_QS(q) {                                                        \
				float s = att_sees(aq.w[q], c)                        \
						? att_score_##KT(lq + q * D, kr, D, m, sc) : -INFINITY; \
				mx[q] = fmax(mx[q], s);                                        \
				if (c - c0 < ATT_CHUNK)                                        \
					ls[q * ATT_CHUNK + c - c0] = s;                            \
			}                                                                  \
		}                                                                      \
		att_max_n(red, mx, nq, mp);                                            \
		int nb = (c1 - c0 + W - 1) / W;                                        \
		att_acc sum = att_acc_of(0.0f);                                        \
		for (int b0 = 0; b0 < nb; b0 += L) {                                   \
			ATT_QS(q) {                                                        \
				float bs = 0.0f;                                               \
				if (b0 + lid < nb) {                                           \
					float e[16];                                               \
					for (int l = 0; l < W; l++) {                              \
						int c = c0 + (b0 + lid) * W + l;                       \
						float s = c >= c1 ? -INFINITY : c - c0 < ATT_CHUNK     \
								? ls[q * ATT_CHUNK + c - c0]                   \
								: att_seen_##KT(lq + q * D, kb, kvStride, D, m, \
										sc, aq.w[q], c);              \
						e[l] = s == -INFINITY ? 0.0f                           \
								: expf_lanes(s - mp[q], W);                    \
					}                                                          \
					bs = att_reduce(e, W, false);                              \
				}                                                              \
				red[q * L + lid] = bs;                                         \
			}                                                                  \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
			if (lid < nq)                                                      \
				for (int i = 0; i < min(L, nb - b0); i++)                      \
					sum = att_add(sum, red[lid * L + i]);                      \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
		}                                                                      \
		if (lid < nq)                                                          \
			red[lid] = att_inv(sum);                                           \
		barrier(CLK_LOCAL_MEM_FENCE);                                          \
		ATT_QS(q) invp[q] = red[q];                                            \
		barrier(CLK_LOCAL_MEM_FENCE);                                          \
	}                                                                          \
	/* att_stats_KT returns, to every work-item, for each of the nq */        \
	/* queries the maximum score mp[q] over the cells of [c0, c1) that it */  \
	/* sees and the sum lp[q] of e^(score−max) (−∞ and 0 when it sees */      \
	/* none), online: a flash-decoding partition's statistics. red holds */  \
	/* nq·L floats. */                                                        \
	inline void att_stats_##KT(global const KV_##KT* kb, ulong kvStride,      \
			int D, att_mode m, att_scoring sc, att_queries aq, int c0, int c1, \
			local const float* lq, local float* red, float* mp, float* lp) {   \
		int lid = get_local_id(0), L = get_local_size(0), nq = aq.n;           \
		float mx[ATT_Q], l[ATT_Q];                                             \
		ATT_QS(q) {                                                            \
			mx[q] = -INFINITY;                                                 \
			l[q] = 0.0f;                                                       \
		}                                                                      \
		for (int c = c0 + lid; c < c1; c += L) {                               \
			global const KV_##KT* kr = kb + (ulong)c * kvStride;               \
			ATT_QS(q) {                                                        \
				if (att_sees(aq.w[q], c))                             \
					att_online(att_score_##KT(lq + q * D, kr, D, m, sc),       \
							&mx[q], &l[q]);                                    \
			}                                                                  \
		}                                                                      \
		att_max_n(red, mx, nq, mp);                                            \
		/* A work-item without cells has mx = -inf, l = 0: adds 0. */        \
		ATT_QS(q) lp[q] = wg_sum(red, mx[q] == -INFINITY ? 0.0f                \
				: l[q] * exp(mx[q] - mp[q]));                                  \
	}                                                                          \
	/* attention_stats_KT: partition p of the view of query heads h0 … */     \
	/* h0+hq−1 of one KV head (h0 = hq·group 0; see attention_part) */        \
	/* writes head h's (m, l) to part[(h·P + p)·(D+2) …]. Launch: global */  \
	/* (L·heads/hq, P), local (L, 1); lq hq·D floats, red hq·L. */            \
	kernel void attention_stats_##KT(global float* part,                      \
			global const float* q, global const KV_##KT* k,                    \
			global const int* rows, global const int* cells, int Lo, int Hi,   \
			int window, int partLen, int heads, int kvHeads, int D,            \
			float scale, float cap, float capInv, volatile global int* status, \
			int wide, int hq, local float* lq, local float* red) {             \
		int h0 = get_group_id(0) * hq, p = get_group_id(1);                    \
		int P = get_num_groups(1), kvh = h0 / (heads / kvHeads);               \
		att_queries aq;                                                        \
		int c0, c1;                                                            \
		att_part_queries(rows, cells, window, Lo, Hi, status, p, partLen, hq,  \
				&aq, &c0, &c1);                                                \
		att_scoring sc = {scale, cap, capInv};                                 \
		att_mode m = att_mode_of(wide, false, KHALF_##KT, D, 1, 0, true);     \
		att_setup_##KT(q + (ulong)h0 * D, hq * D, 0, lq, lq);                  \
		float mx[ATT_Q], l[ATT_Q];                                             \
		att_stats_##KT(k + (ulong)kvh * D, (ulong)kvHeads * D, D, m, sc, aq,   \
				c0, c1, lq, red, mx, l);                                       \
		int j = get_local_id(0);                                               \
		if (j < hq) {                                                          \
			global float* pr = part + ((ulong)(h0 + j) * P + p) * (D + 2);     \
			pr[0] = mx[j];                                                     \
			pr[1] = l[j];                                                      \
		}                                                                      \
	}

// DEFINE_ATT_KV defines the weighing and the kernels for a K and a V type.
#define DEFINE_ATT_KV(KT, VT)                                                  \
	/* att_weigh_KT_VT adds p_j·v_j for the cells of [c0, c1) to lacc's */   \
	/* G lanes (att_mode) of each of the nq queries (GD entries each), */     \
	/* p_j = e^(score_j−M[q])·inv[q] rounded for the V type where the */      \
	/* query sees cell j, else 0 (and skipped), chunk after chunk in cell */  \
	/* order; with stored set, ls holds the first chunk's scores */           \
	/* (ATT_CHUNK per query). The queries read each key and value */          \
	/* together. Every work-item calls it with the same arguments. */         \
	inline void att_weigh_##KT##_##VT(global const KV_##KT* kb,               \
			global const KV_##VT* vb, ulong kvStride, int D, att_mode m,       \
			att_scoring sc, att_queries aq, int c0, int c1, const float* M,    \
			const float* inv, bool stored, local const float* lq,              \
			local float* ls, local float* lacc) {                              \
		int lid = get_local_id(0), L = get_local_size(0), nq = aq.n;           \
		int G = m.G, GD = G * D;                                               \
		for (int cb = c0; cb < c1; cb += ATT_CHUNK) {                          \
			int cn = min(ATT_CHUNK, c1 - cb);                                  \
			bool first = stored && cb == c0;                                   \
			for (int c = lid; c < cn; c += L) {                                \
				global const KV_##KT* kr = kb + (ulong)(cb + c) * kvStride;    \
				ATT_QS(q) {                                                    \
					float s = first ? ls[q * ATT_CHUNK + c]                    \
							: att_sees(aq.w[q], cb + c)               \
							? att_score_##KT(lq + q * D, kr, D, m, sc)         \
							: -INFINITY;                                       \
					ls[q * ATT_CHUNK + c] = s == -INFINITY ? 0.0f              \
							: KVR_##VT(expf_lanes(s - M[q], m.W) * inv[q]);    \
				}                                                              \
			}                                                                  \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
			/* The cells vec_dot's lanes take; AVX-512's rest: att_out. */    \
			int lim = min(cn, m.npv - (cb - c0));                              \
			for (int e = lid; e < GD; e += L) {                                \
				int g = e / D, d = e - g * D;                                  \
				float a[ATT_Q];                                                \
				ATT_QS_REG(q) a[q] = lacc[q * GD + e];                         \
				for (int c = g; c < lim; c += G) {                             \
					float v = 0.0f;                                            \
					bool got = false;                                          \
					ATT_QS_REG(q) {                                            \
						float p = ls[q * ATT_CHUNK + c];                       \
						if (p != 0.0f) {                                       \
							if (!got)                                          \
								v = vel_##VT(vb, (ulong)(cb + c) * kvStride + d); \
							got = true;                                        \
							a[q] = fma(v, p, a[q]);                            \
						}                                                      \
					}                                                          \
				}                                                              \
				ATT_QS_REG(q) lacc[q * GD + e] = a[q];                         \
			}                                                                  \
			/* ls is rewritten by the next chunk (att_out reads the last). */ \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
		}                                                                      \
	}                                                                          \
	/* att_out_KT_VT is output d from lacc's lanes: mul_mat's fold and */    \
	/* reduction where exact, then on AVX-512 the cells of [c0, c1) past */  \
	/* npv, whose probabilities the last chunk left in ls. */                \
	inline float att_out_##KT##_##VT(local const float* lacc,                 \
			local const float* ls, global const KV_##VT* vb, ulong kvStride,   \
			int D, int d, att_mode m, int c0, int c1) {                        \
		_Pragma("OPENCL FP_CONTRACT OFF");                                     \
		int W = m.W, G = m.G;                                                  \
		if (!m.exact)                                                          \
			return att_sum(lacc, G, D, d);                                     \
		float x[16];                                                           \
		for (int l = 0; l < W; l++)                                            \
			x[l] = G == W ? lacc[l * D + d]                                    \
					: (lacc[l * D + d] + lacc[(2 * W + l) * D + d])            \
					+ (lacc[(W + l) * D + d] + lacc[(3 * W + l) * D + d]);     \
		float r = att_reduce(x, W, G != W);                                    \
		if (m.npv >= c1 - c0)                                                  \
			return r;                                                          \
		int cl = c0 + (c1 - c0 - 1) / ATT_CHUNK * ATT_CHUNK;                   \
		att_acc s = att_acc_of(r);                                             \
		for (int c = c0 + m.npv; c < c1; c++) {                                \
			float p = ls[c - cl];                                              \
			if (p == 0.0f)                                                     \
				continue;                                                      \
			float v = vel_##VT(vb, (ulong)c * kvStride + d);                   \
			/* F32: rounded products (the remainder is 32 cells, whole */   \
			/* 8-element groups of vec_dot's AVX-512 tail). */                \
			if (KHALF_##VT)                                                    \
				s = att_add(s, v * p);                                         \
			else                                                               \
				r = r + v * p;                                                 \
		}                                                                      \
		return KHALF_##VT ? att_round(s) : r;                                  \
	}                                                                          \
	/* attention_KT_VT: rows i0 … i0+R−1 (i0 = R·group 1) and query */       \
	/* heads h0 … h0+hq−1 of one KV head (h0 = hq·group 0). Rows that */      \
	/* scan the same cells with the same arithmetic (a prompt's) go */        \
	/* through together, R·hq queries; other rows one by one, hq each. */    \
	kernel void attention_##KT##_##VT(global float* out,                      \
			global const float* q, global const KV_##KT* k,                    \
			global const KV_##VT* v, global const int* rows,                   \
			global const int* cells, int Lo, int Hi, int window, int heads,    \
			int kvHeads, int D, float scale, float cap, float capInv,          \
			volatile global int* status, int wide, int prefill, int G, int hq, \
			int R, int n, local float* lq, local float* ls, local float* lacc, \
			local float* red) {                                                \
		int h0 = get_group_id(0) * hq, i0 = get_group_id(1) * R;              \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int kvh = h0 / (heads / kvHeads), nr = min(R, n - i0);                 \
		ulong kvStride = (ulong)kvHeads * D;                                   \
		global const KV_##KT* kb = k + (ulong)kvh * D;                         \
		global const KV_##VT* vb = v + (ulong)kvh * D;                         \
		att_scoring sc = {scale, cap, capInv};                                 \
		/* Each row's view and range (a bad one sees nothing: zeros) and */  \
		/* whether all share the first's range and arithmetic. */            \
		att_view wr[ATT_Q];                                                    \
		int lor[ATT_Q], hir[ATT_Q];                                            \
		bool prer[ATT_Q], same = true;                                         \
		for (int r = 0; r < nr; r++) {                                         \
			if (!att_row(rows, i0 + r, cells, window, Lo, Hi, status, &wr[r],  \
					&lor[r], &hir[r]))                                         \
				hir[r] = lor[r];                                               \
			prer[r] = prefill && att_batched(rows, i0 + r, n);                 \
			same = same && lor[r] == lor[0] && hir[r] == hir[0]                \
					&& prer[r] == prer[0];                                     \
		}                                                                      \
		int step = same ? nr : 1;                                              \
		for (int r0 = 0; r0 < nr; r0 += step) {                                \
			int nq = step * hq, lo = lor[r0], hi = hir[r0];                    \
			att_queries aq;                                                    \
			aq.n = nq;                                                         \
			ATT_QS(j) aq.w[j] = wr[r0 + j / hq];                               \
			att_mode m = att_mode_of(wide, prer[r0], KHALF_##KT, D, G,         \
					hi - lo, false);                                           \
			/* Query j's row: q's rows of heads·D, its heads consecutive. */ \
			for (int e = lid; e < nq * D; e += L) {                            \
				int j = e / D, d = e - j * D;                                  \
				lq[e] = KVR_##KT(q[((ulong)(i0 + r0 + j / hq) * heads + h0     \
						+ j % hq) * D + d]);                                   \
			}                                                                  \
			for (int e = lid; e < nq * m.G * D; e += L)                        \
				lacc[e] = 0.0f;                                                \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
			float M[ATT_Q], inv[ATT_Q];                                        \
			att_softmax_##KT(kb, kvStride, D, m, sc, aq, lo, hi, lq, ls, red,  \
					M, inv);                                                   \
			att_weigh_##KT##_##VT(kb, vb, kvStride, D, m, sc, aq, lo, hi, M,   \
					inv, true, lq, ls, lacc);                                  \
			for (int e = lid; e < nq * D; e += L) {                            \
				int j = e / D, d = e - j * D;                                  \
				out[((ulong)(i0 + r0 + j / hq) * heads + h0 + j % hq) * D + d] \
						= att_out_##KT##_##VT(lacc + j * m.G * D,              \
								ls + j * ATT_CHUNK, vb, kvStride, D, d, m, lo, \
								hi);                                           \
			}                                                                  \
			/* lq, ls and lacc are the next rows'. */                         \
			barrier(CLK_LOCAL_MEM_FENCE);                                      \
		}                                                                      \
	}                                                                          \
	/* attention_part_KT_VT is partition p of a single query's view, */      \
	/* [Lo + p·partLen, Lo + (p+1)·partLen) ∩ [lo, hi), for query heads */    \
	/* h0 … h0+hq−1 of one KV head, after attention_stats: it writes head */  \
	/* h's Σ_j p_j·v_j to part[(h·P + p)·(D+2) + 2 …]. Launch and local */   \
	/* arrays as for attention_KT_VT, global (L·heads/hq, P). */              \
	kernel void attention_part_##KT##_##VT(global float* part,                \
			global const float* q, global const KV_##KT* k,                    \
			global const KV_##VT* v, global const int* rows,                   \
			global const int* cells, int Lo, int Hi, int window, int partLen,  \
			int heads, int kvHeads, int D, float scale, float cap,             \
			float capInv, volatile global int* status, int wide, int G,        \
			int hq, local float* lq, local float* ls, local float* lacc,       \
			local float* red) {                                                \
		int h0 = get_group_id(0) * hq, p = get_group_id(1);                    \
		int P = get_num_groups(1), nq = hq;                                    \
		int lid = get_local_id(0), L = get_local_size(0);                      \
		int kvh = h0 / (heads / kvHeads);                                      \
		ulong kvStride = (ulong)kvHeads * D;                                   \
		/* Each head's global maximum and 1/sum over the partitions. */      \
		float M[ATT_Q], inv[ATT_Q];                                            \
		ATT_QS(j) {                                                            \
			global const float* ph = part + (ulong)(h0 + j) * P * (D + 2);     \
			float mj = -INFINITY, sum = 0.0f;                                  \
			for (int r = 0; r < P; r++)                                        \
				mj = fmax(mj, ph[(ulong)r * (D + 2)]);                         \
			for (int r = 0; r < P; r++) {                                      \
				global const float* pr = ph + (ulong)r * (D + 2);              \
				/* A partition without cells seen adds 0. */                  \
				if (pr[0] != -INFINITY)                                        \
					sum += pr[1] * exp(pr[0] - mj);                            \
			}                                                                  \
			M[j] = mj;                                                         \
			inv[j] = 1.0f / sum;                                               \
		}                                                                      \
		att_queries aq;                                                        \
		int c0, c1;                                                            \
		att_part_queries(rows, cells, window, Lo, Hi, status, p, partLen, hq,  \
				&aq, &c0, &c1);                                                \
		att_scoring sc = {scale, cap, capInv};                                 \
		att_mode m = att_mode_of(wide, false, KHALF_##KT, D, G, 0, true);     \
		att_setup_##KT(q + (ulong)h0 * D, hq * D, hq * G * D, lq, lacc);       \
		att_weigh_##KT##_##VT(k + (ulong)kvh * D, v + (ulong)kvh * D,          \
				kvStride, D, m, sc, aq, c0, c1, M, inv, false, lq, ls, lacc);  \
		for (int e = lid; e < hq * D; e += L) {                                \
			int j = e / D, d = e - j * D;                                      \
			part[((ulong)(h0 + j) * P + p) * (D + 2) + 2 + d] =                \
					att_sum(lacc + j * G * D, G, D, d);                        \
		}                                                                      \
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
