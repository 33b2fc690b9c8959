// attention: causal attention of query rows over the KV cache, decode (n=1)
// and prefill alike. Query row i sits at position pos0+i and attends to
// cache positions 0 … pos0+i; query head h reads KV head h/(heads/kvHeads).
//
// One work-group per (head, query row). Positions are taken in chunks of
// ATT_CHUNK with an online softmax (running maximum m and sum l, the
// accumulator rescaled by e^(m_old-m_new) when the maximum grows), so any
// context length works with fixed local memory and no score buffer.
//
// The output accumulator acc[G][D] lives in local memory: work-item lid owns
// the entries e ≡ lid (mod L); entry e = g·D + d sums positions c ≡ g (mod
// G) of dimension d, so G = L/D groups of work-items share the positions when
// the head is narrower than the group. Entries are private to their owner,
// so updating them needs no barrier.
//
// Launch: global (L·heads, n), local (L, 1). Local arrays: lq D floats, ls
// ATT_CHUNK, lacc max(L, D) floats (G·D ≤ max(L, D)), red L.
//
// Long decode contexts use flash-decoding instead: a single query has only
// `heads` work-groups, too few to fill a GPU, so attention_part splits the
// positions into P partitions, each group writing its partial (m, l, acc[D])
// unnormalised, and attention_merge combines them: with M = max m_p,
// out = Σ_p e^(m_p-M)·acc_p / Σ_p e^(m_p-M)·l_p, which equals the single
// pass up to rounding.

#define ATT_CHUNK 256

// att_setup stages the query row and clears the accumulator.
inline void att_setup(global const float* qr, int D, int GD, local float* lq, local float* lacc) {
	int lid = get_local_id(0), L = get_local_size(0);
	for (int d = lid; d < D; d += L)
		lq[d] = qr[d];
	for (int e = lid; e < GD; e += L)
		lacc[e] = 0.0f;
	barrier(CLK_LOCAL_MEM_FENCE);
}

// att_range folds positions [c0, c1) into the running (m, l, lacc). Every
// work-item calls it with the same arguments.
inline void att_range(global const float* kb, global const float* vb, ulong kvStride, int D, float scale,
		int cBegin, int cEnd, int G, local const float* lq, local float* ls, local float* lacc,
		local float* red, float* mp, float* lp) {
	int lid = get_local_id(0), L = get_local_size(0);
	int GD = G * D;
	int D4 = D & ~3;
	float m = *mp, l = *lp;
	for (int c0 = cBegin; c0 < cEnd; c0 += ATT_CHUNK) {
		int cn = min(ATT_CHUNK, cEnd - c0);
		float tmax = -INFINITY;
		for (int c = lid; c < cn; c += L) {
			global const float* kr = kb + (ulong)(c0 + c) * kvStride;
			float4 s4 = 0.0f;
			for (int d = 0; d < D4; d += 4)
				s4 += vload4(0, lq + d) * vload4(0, kr + d);
			float s = (s4.x + s4.y) + (s4.z + s4.w);
			for (int d = D4; d < D; d++)
				s += lq[d] * kr[d];
			s *= scale;
			ls[c] = s;
			tmax = fmax(tmax, s);
		}
		float mnew = fmax(m, wg_max(red, tmax));
		float alpha = exp(m - mnew);
		float tsum = 0.0f;
		for (int c = lid; c < cn; c += L) {
			float p = exp(ls[c] - mnew);
			ls[c] = p;
			tsum += p;
		}
		l = l * alpha + wg_sum(red, tsum);
		for (int e = lid; e < GD; e += L) {
			int g = e / D, d = e - g * D;
			float a = lacc[e] * alpha;
			for (int c = g; c < cn; c += G)
				a += ls[c] * vb[(ulong)(c0 + c) * kvStride + d];
			lacc[e] = a;
		}
		m = mnew;
		// ls is rewritten by the next chunk.
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	*mp = m;
	*lp = l;
}

// att_sum adds the G partial accumulators of dimension d (every lacc entry
// is final after att_range's last barrier).
inline float att_sum(local const float* lacc, int G, int D, int d) {
	float s = 0.0f;
	for (int g = 0; g < G; g++)
		s += lacc[g * D + d];
	return s;
}

kernel void attention(global float* out, global const float* q, global const float* k,
		global const float* v, int pos0, int heads, int kvHeads, int D, float scale,
		local float* lq, local float* ls, local float* lacc, local float* red) {
	int h = get_group_id(0), i = get_group_id(1);
	int lid = get_local_id(0), L = get_local_size(0);
	int kvh = h / (heads / kvHeads);
	ulong kvStride = (ulong)kvHeads * D;
	int G = L >= D ? L / D : 1;
	att_setup(q + ((ulong)i * heads + h) * D, D, G * D, lq, lacc);
	float m = -INFINITY, l = 0.0f;
	att_range(k + (ulong)kvh * D, v + (ulong)kvh * D, kvStride, D, scale, 0, pos0 + i + 1, G, lq, ls, lacc,
			red, &m, &l);
	global float* orow = out + ((ulong)i * heads + h) * D;
	float inv = 1.0f / l;
	for (int d = lid; d < D; d += L)
		orow[d] = att_sum(lacc, G, D, d) * inv;
}

// attention_part is one partition of a single query's positions: group
// (h, p) covers [p·part, min((p+1)·part, kvLen)) and writes m, l, acc[D]
// to part[(h·P + p)·(D+2) …]. Launch: global (L·heads, P), local (L, 1),
// local arrays as for attention.
kernel void attention_part(global float* part, global const float* q, global const float* k,
		global const float* v, int kvLen, int partLen, int heads, int kvHeads, int D, float scale,
		local float* lq, local float* ls, local float* lacc, local float* red) {
	int h = get_group_id(0), p = get_group_id(1), P = get_num_groups(1);
	int lid = get_local_id(0), L = get_local_size(0);
	int kvh = h / (heads / kvHeads);
	ulong kvStride = (ulong)kvHeads * D;
	int G = L >= D ? L / D : 1;
	att_setup(q + (ulong)h * D, D, G * D, lq, lacc);
	float m = -INFINITY, l = 0.0f;
	int c0 = p * partLen;
	att_range(k + (ulong)kvh * D, v + (ulong)kvh * D, kvStride, D, scale, c0, min(kvLen, c0 + partLen), G, lq,
			ls, lacc, red, &m, &l);
	global float* pr = part + ((ulong)h * P + p) * (D + 2);
	if (lid == 0) {
		pr[0] = m;
		pr[1] = l;
	}
	for (int d = lid; d < D; d += L)
		pr[2 + d] = att_sum(lacc, G, D, d);
}

// attention_merge combines the P partials of each head. Launch: global
// (roundUp(D, L), heads), one output element per work-item.
kernel void attention_merge(global float* out, global const float* part, int P, int D) {
	int d = get_global_id(0), h = get_global_id(1);
	if (d >= D)
		return;
	global const float* ph = part + (ulong)h * P * (D + 2);
	float M = -INFINITY;
	for (int p = 0; p < P; p++)
		M = fmax(M, ph[(ulong)p * (D + 2)]);
	float num = 0.0f, den = 0.0f;
	for (int p = 0; p < P; p++) {
		global const float* pr = ph + (ulong)p * (D + 2);
		float s = exp(pr[0] - M);
		den += s * pr[1];
		num += s * pr[2 + d];
	}
	out[(ulong)h * D + d] = num / den;
}
