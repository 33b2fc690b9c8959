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

#define ATT_CHUNK 256

kernel void attention(global float* out, global const float* q, global const float* k,
		global const float* v, int pos0, int heads, int kvHeads, int D, float scale,
		local float* lq, local float* ls, local float* lacc, local float* red) {
	int h = get_group_id(0), i = get_group_id(1);
	int lid = get_local_id(0), L = get_local_size(0);
	int kvh = h / (heads / kvHeads);
	int kvLen = pos0 + i + 1;
	ulong kvStride = (ulong)kvHeads * D;
	global const float* qr = q + ((ulong)i * heads + h) * D;
	global const float* kb = k + (ulong)kvh * D;
	global const float* vb = v + (ulong)kvh * D;
	int G = L >= D ? L / D : 1;
	int GD = G * D;

	for (int d = lid; d < D; d += L)
		lq[d] = qr[d];
	for (int e = lid; e < GD; e += L)
		lacc[e] = 0.0f;
	barrier(CLK_LOCAL_MEM_FENCE);

	float m = -INFINITY, l = 0.0f;
	for (int c0 = 0; c0 < kvLen; c0 += ATT_CHUNK) {
		int cn = min(ATT_CHUNK, kvLen - c0);
		float tmax = -INFINITY;
		for (int c = lid; c < cn; c += L) {
			global const float* kr = kb + (ulong)(c0 + c) * kvStride;
			float s = 0.0f;
			for (int d = 0; d < D; d++)
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

	global float* orow = out + ((ulong)i * heads + h) * D;
	float inv = 1.0f / l;
	for (int d = lid; d < D; d += L) {
		float s = 0.0f;
		for (int g = 0; g < G; g++)
			s += lacc[g * D + d];
		orow[d] = s * inv;
	}
}
