// rope rotates, in place, the first dims dimensions of every head of x
// ([n, heads·headDim]), row i by the position pos[i], as the CPU backend
// and llama.cpp do, to the bit: cos and sin come from the host's table cs
// (rope.go: the C library's cosf and sinf of ggml's angles, times the
// attention factor), row p − lo for position p, a float2 per pair; the
// rotation is fma(x0, cos, −x1·sin), fma(x0, sin, x1·cos), as gcc
// contracts ggml's x0·cos − x1·sin and x0·sin + x1·cos. NeoX pairs are
// (j, j+dims/2); otherwise (2j, 2j+1).
//
// Launch: global (dims/2, heads, n), one pair per work-item.

// rope_cs is pair j's cos and sin at position p.
inline float2 rope_cs(global const float2* cs, int lo, int dims, int p, int j) {
	return cs[(ulong)(p - lo) * (dims / 2) + j];
}

// rope_pair is (x0, x1) turned by cs.
inline float2 rope_pair(float x0, float x1, float2 cs) {
	return (float2)(fma(x0, cs.x, -(x1 * cs.y)), fma(x0, cs.y, x1 * cs.x));
}

kernel void rope(global float* x, int heads, int headDim, int dims, global const int* pos,
		global const float2* cs, int lo, int neox) {
	int j = get_global_id(0), h = get_global_id(1), i = get_global_id(2);
	if (j >= dims / 2)
		return;
	float2 c = rope_cs(cs, lo, dims, pos[i], j);
	global float* hp = x + ((ulong)i * heads + h) * headDim;
	int a = neox ? j : 2 * j;
	int b = neox ? j + dims / 2 : 2 * j + 1;
	float2 r = rope_pair(hp[a], hp[b], c);
	hp[a] = r.x;
	hp[b] = r.y;
}
