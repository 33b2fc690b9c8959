// rope rotates, in place, the first dims dimensions of every head of x
// ([n, heads·headDim]), row i by the position pos[i], in ggml's
// float arithmetic operation for operation (as the CPU backend does), so
// that keys rounded into an f16 cache match llama.cpp's: pair j turns by
// theta_j = pos·thetaScale^j, the power taken by j float multiplications,
// then divided by freqs[j] when hasFreqs (Llama 3's rope_freqs, a
// correctly rounded division: div_rn, quant.cl) and multiplied by freqScale
// (linear scaling), cos and sin by mscale (LongRoPE); the rotation is
// fma(x0, cos, −x1·sin), fma(x0, sin, x1·cos), as gcc contracts ggml's
// x0·cos − x1·sin and x0·sin + x1·cos. NeoX pairs are (j, j+dims/2);
// otherwise (2j, 2j+1).
//
// cos and sin are float64's rounded to float where the device has fp64
// (cl_khr_fp64, optional: float otherwise, within 4 ulp), as the CPU backend
// takes them, so that on such devices the rotated keys are the CPU's to the
// bit, and an f16 cache rounds them alike.
//
// Launch: global (dims/2, heads, n), one pair per work-item.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define ROPE_COS(t) ((float)cos((double)(t)))
#define ROPE_SIN(t) ((float)sin((double)(t)))
#else
#define ROPE_COS(t) cos(t)
#define ROPE_SIN(t) sin(t)
#endif

// rope_cs is pair j's cos and sin at position p.
inline float2 rope_cs(int p, int j, float thetaScale, global const float* freqs, int hasFreqs, float freqScale,
		float mscale) {
	float theta = (float)p;
	for (int k = 0; k < j; k++)
		theta *= thetaScale;
	if (hasFreqs)
		theta = div_rn(theta, freqs[j]);
	theta = freqScale * theta;
	return (float2)(ROPE_COS(theta) * mscale, ROPE_SIN(theta) * mscale);
}

// rope_pair is (x0, x1) turned by cs.
inline float2 rope_pair(float x0, float x1, float2 cs) {
	return (float2)(fma(x0, cs.x, -(x1 * cs.y)), fma(x0, cs.y, x1 * cs.x));
}

kernel void rope(global float* x, int heads, int headDim, int dims,
		global const int* pos, float thetaScale, global const float* freqs,
		int hasFreqs, int neox, float freqScale, float mscale) {
	int j = get_global_id(0), h = get_global_id(1), i = get_global_id(2);
	if (j >= dims / 2)
		return;
	float2 cs = rope_cs(pos[i], j, thetaScale, freqs, hasFreqs, freqScale, mscale);
	global float* hp = x + ((ulong)i * heads + h) * headDim;
	int a = neox ? j : 2 * j;
	int b = neox ? j + dims / 2 : 2 * j + 1;
	float2 r = rope_pair(hp[a], hp[b], cs);
	hp[a] = r.x;
	hp[b] = r.y;
}
