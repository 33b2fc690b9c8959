// rope rotates, in place, the first dims dimensions of every head of x
// ([n, heads·headDim]) for tokens at positions pos0 … pos0+n-1. Pair j
// turns by pos·inv[j] (divided by freqs[j] when hasFreqs, Llama 3's
// rope_freqs). NeoX pairs are (j, j+dims/2); otherwise (2j, 2j+1).
//
// The angle needs more than float precision: at position 10⁵ one float ulp
// of the frequency moves it by 10⁻² radians. So the host supplies
// inv[j] = theta^(-2j/dims) as an unevaluated float pair hi+lo (computed in
// float64), the division by freqs and the product with the position are done
// in the same double-float arithmetic with fma, and the rotation uses
// cos/sin of both parts. The result matches a float64 computation to float
// rounding, on devices without fp64.
//
// Launch: global (dims/2, heads, n), one pair per work-item.
kernel void rope(global float* x, int heads, int headDim, int dims, int pos0,
		global const float2* inv, global const float* freqs, int hasFreqs, int neox) {
	int j = get_global_id(0), h = get_global_id(1), i = get_global_id(2);
	if (j >= dims / 2)
		return;
	float hi = inv[j].x, lo = inv[j].y;
	if (hasFreqs) {
		float f = freqs[j];
		float q1 = hi / f;
		float r = fma(-q1, f, hi) + lo;
		hi = q1;
		lo = r / f;
	}
	float p = (float)(pos0 + i);
	float ahi = p * hi;
	float alo = fma(p, hi, -ahi) + p * lo;
	float ch = cos(ahi), sh = sin(ahi), cl = cos(alo), sl = sin(alo);
	float c = ch * cl - sh * sl, s = sh * cl + ch * sl;
	global float* hp = x + ((ulong)i * heads + h) * headDim;
	int a = neox ? j : 2 * j;
	int b = neox ? j + dims / 2 : 2 * j + 1;
	float x0 = hp[a], x1 = hp[b];
	hp[a] = x0 * c - x1 * s;
	hp[b] = x0 * s + x1 * c;
}
