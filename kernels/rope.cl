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
// cos and sin are float64's rounded to float, as the CPU backend takes them
// (so the rotated keys are the CPU's to the bit, and an f16 cache rounds
// them alike): in fp64 where the device has it (cl_khr_fp64, optional),
// else in float-float arithmetic (rope_cossin without fp64), whose ~2^-45 relative
// error rounds to the same float except within that distance of a tie.
// A device's own float cos and sin (up to 4 ulp off) would move keys by
// a few ulps, and an f16 cache would round some of them the other way.
//
// Launch: global (dims/2, heads, n), one pair per work-item.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
inline float2 rope_cossin(float t) {
	return (float2)((float)cos((double)t), (float)sin((double)t));
}
#else
// Float-float values (hi, lo), |lo| ≤ ulp(hi)/2, with full two-sums and
// products (norm.cl's ff_add only adds a float). Their sums must not be
// reassociated or contracted.
#pragma OPENCL FP_CONTRACT OFF
inline float2 rope_ff_fast(float a, float b) { // |a| ≥ |b|
	float s = a + b;
	return (float2)(s, b - (s - a));
}
inline float2 rope_ff_sum(float a, float b) {
	float s = a + b, v = s - a;
	return (float2)(s, (a - (s - v)) + (b - v));
}
inline float2 rope_ff_add(float2 a, float2 b) {
	float2 s = rope_ff_sum(a.x, b.x), t = rope_ff_sum(a.y, b.y);
	s = rope_ff_fast(s.x, s.y + t.x);
	return rope_ff_fast(s.x, s.y + t.y);
}
inline float2 rope_ff_mul(float2 a, float2 b) {
	float p = a.x * b.x;
	return rope_ff_fast(p, fma(a.x, b.y, fma(a.y, b.x, fma(a.x, b.x, -p))));
}

// rope_cossin_ff is (cos t, sin t): t − k·π/2 (π/2 in three floats, k·P1
// and k·P2 split exactly by fma), then the Taylor series to the 17th power
// on |r| ≤ π/4 (the next term is below 2^-58), then the quadrant k mod 4.
inline float2 rope_cossin(float t) {
	const float P1 = 0x1.921fb6p+0f, P2 = -0x1.777a5cp-25f, P3 = -0x1.ee59dap-50f;
	// 1/(2i+1)! and 1/(2i)!, i = 0…8, as float-float.
	const float2 sc[9] = {(float2)(0x1p+0f, 0.0f), (float2)(0x1.555556p-3f, -0x1.555556p-28f),
		(float2)(0x1.111112p-7f, -0x1.dddddep-32f), (float2)(0x1.a01a02p-13f, -0x1.7f97fap-39f),
		(float2)(0x1.71de3ap-19f, 0x1.55b1ccp-45f), (float2)(0x1.ae6456p-26f, 0x1.fd5138p-52f),
		(float2)(0x1.612462p-33f, -0x1.8af25ep-58f), (float2)(0x1.ae7f3ep-41f, 0x1.ccee08p-67f),
		(float2)(0x1.952c78p-49f, -0x1.f9ea56p-74f)};
	const float2 cc[9] = {(float2)(0x1p+0f, 0.0f), (float2)(0x1p-1f, 0.0f),
		(float2)(0x1.555556p-5f, -0x1.555556p-30f), (float2)(0x1.6c16c2p-10f, -0x1.27d27ep-35f),
		(float2)(0x1.a01a02p-16f, -0x1.7f97fap-42f), (float2)(0x1.27e4fcp-22f, -0x1.10ec14p-47f),
		(float2)(0x1.1eed8ep-29f, 0x1.ff1b12p-54f), (float2)(0x1.93974ap-37f, 0x1.180f94p-62f),
		(float2)(0x1.ae7f3ep-45f, 0x1.ccee08p-71f)};
	float k = rint(t * 0x1.45f306p-1f);
	float h1 = k * P1, h2 = k * P2;
	float e1 = fma(k, P1, -h1), e2 = fma(k, P2, -h2);
	float2 r = (float2)(t - h1, 0.0f); // exact: k·P1 is within a factor 2 of t
	r = rope_ff_add(r, (float2)(-e1, 0.0f));
	r = rope_ff_add(r, (float2)(-h2, 0.0f));
	r = rope_ff_add(r, (float2)(-e2, 0.0f));
	r = rope_ff_add(r, (float2)(-k * P3, 0.0f));
	float2 mu = -rope_ff_mul(r, r);
	float2 S = sc[8], C = cc[8];
	for (int i = 7; i >= 0; i--) {
		S = rope_ff_add(sc[i], rope_ff_mul(mu, S));
		C = rope_ff_add(cc[i], rope_ff_mul(mu, C));
	}
	float s = rope_ff_mul(r, S).x, c = C.x;
	switch ((int)k & 3) {
	case 0:
		return (float2)(c, s);
	case 1:
		return (float2)(-s, c);
	case 2:
		return (float2)(-c, -s);
	default:
		return (float2)(s, -c);
	}
}
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
	return rope_cossin(theta) * mscale;
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
