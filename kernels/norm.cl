// Row-wise ops: one work-group per row, reductions in local memory.
// Launch: global (L, n), local (L, 1); red holds L floats (argmax: L ints
// more in redi).

// rms_scale is 1/sqrt(mean(xr²) + eps) for a row of cols floats, in
// ggml's operations: float squares summed in double, the mean rounded to
// float, sqrt in double rounded to float, its reciprocal correctly rounded
// (div_rn, quant.cl). A double sum of float squares is exact or within 2⁻⁵³
// in any order, so the scale is the CPU backend's (and llama.cpp's) to the
// bit. Where the device has no fp64 (cl_khr_fp64 is optional) the sum is a
// float-float pair (ff_add: the exact sum to about 2⁻⁴⁸), the
// mean its quotient rounded once (ff_div) and sqrt correctly rounded
// (sqrt_rn): the same float values but where the exact result lies within
// a tiny fraction of an ulp of a rounding boundary. Every work-item of the
// group must call it (it has barriers); red holds get_local_size(0) RMS_RED
// values (8 bytes each either way) and every work-item gets the scale.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define RMS_RED double

inline double wg_sum_d(local double* red, double v) {
	int lid = get_local_id(0);
	red[lid] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
		if (lid < s)
			red[lid] += red[lid + s];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	double r = red[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}

inline float rms_scale(local double* red, global const float* xr, int cols, float eps) {
	int lid = get_local_id(0), ls = get_local_size(0);
	double s = 0.0;
	for (int k = lid; k < cols; k += ls) {
		float sq = xr[k] * xr[k];
		s += sq;
	}
	s = wg_sum_d(red, s);
	float mean = (float)(s / cols);
	return div_rn(1.0f, (float)sqrt((double)(mean + eps)));
}
#else
#define RMS_RED float2

// ff_add adds c to the float-float pair a = (hi, lo), whose value is
// hi + lo: Knuth's TwoSum finds the rounding error of hi + c exactly (IEEE
// arithmetic, no contraction), and lo collects those errors.
inline float2 ff_add(float2 a, float c) {
#pragma OPENCL FP_CONTRACT OFF
	float s = a.x + c;
	float bp = s - a.x;
	float e = (a.x - (s - bp)) + (c - bp);
	return (float2)(s, a.y + e);
}

// ff_merge adds two pairs: TwoSum of the highs, the lows added.
inline float2 ff_merge(float2 a, float2 b) {
	float2 r = ff_add(a, b.x);
	return (float2)(r.x, r.y + b.y);
}

// ff_div is the float nearest (s.x + s.y)/c for a float-float s: the
// remainder of the rounded quotient q is exact (fma), and adding its share
// moves q to the nearest float unless the quotient is within a tiny
// fraction of an ulp of halfway.
inline float ff_div(float2 s, float c) {
#pragma OPENCL FP_CONTRACT OFF
	float q = div_rn(s.x, c);
	float r = fma(-q, c, s.x) + s.y;
	return q + r / c;
}

// sqrt_rn is sqrt(v) correctly rounded (as sqrt in double then rounded to
// float): with CORRECT_DIV the build asks for a correctly rounded sqrt;
// otherwise one Newton step from OpenCL's sqrt (≤ 3 ulp) on its exact
// residual, the square root of a float never lying halfway between two.
inline float sqrt_rn(float v) {
#ifdef CORRECT_DIV
	return sqrt(v);
#else
	float r = sqrt(v);
	if (!(v > 0.0f) || isinf(v))
		return r;
	return fma(fma(-r, r, v), 0.5f / r, r);
#endif
}

inline float rms_scale(local float2* red, global const float* xr, int cols, float eps) {
	int lid = get_local_id(0), ls = get_local_size(0);
	float2 s = 0.0f;
	for (int k = lid; k < cols; k += ls) {
		float sq = xr[k] * xr[k];
		s = ff_add(s, sq);
	}
	red[lid] = s;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int h = ls / 2; h > 0; h >>= 1) {
		if (lid < h)
			red[lid] = ff_merge(red[lid], red[lid + h]);
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	s = red[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	float mean = ff_div(s, (float)cols);
	return div_rn(1.0f, sqrt_rn(mean + eps));
}
#endif

// rms_norm: dst[i, :] = x[i, :] · rms_scale(x[i, :]) · w, as ggml: (x·scale)·w.
kernel void rms_norm(global float* dst, global const float* x, global const float* w,
		int cols, float eps, local RMS_RED* red) {
	int i = get_group_id(1), lid = get_local_id(0), ls = get_local_size(0);
	global const float* xr = x + (ulong)i * cols;
	global float* dr = dst + (ulong)i * cols;
	float scale = rms_scale(red, xr, cols, eps);
	for (int k = lid; k < cols; k += ls) {
		float xs = xr[k] * scale;
		dr[k] = xs * w[k];
	}
}

// argmax writes each row's index of its largest element, the first on ties.
// A work-item's candidate is the first maximum of its own elements (it visits
// them in increasing order); merging prefers the smaller index on equal
// values. -1 marks "no element yet", so rows of -inf still give index 0.
kernel void argmax(global int* dst, global const float* x, int cols,
		local float* red, local int* redi) {
	int i = get_group_id(1), lid = get_local_id(0), ls = get_local_size(0);
	global const float* xr = x + (ulong)i * cols;
	float bv = -INFINITY;
	int bi = -1;
	for (int k = lid; k < cols; k += ls) {
		float v = xr[k];
		if (bi < 0 || v > bv) {
			bv = v;
			bi = k;
		}
	}
	red[lid] = bv;
	redi[lid] = bi;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = ls / 2; s > 0; s >>= 1) {
		if (lid < s) {
			float ov = red[lid + s];
			int oi = redi[lid + s];
			float sv = red[lid];
			int si = redi[lid];
			if (oi >= 0 && (si < 0 || ov > sv || (ov == sv && oi < si))) {
				red[lid] = ov;
				redi[lid] = oi;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (lid == 0)
		dst[i] = redi[0];
}

// layer_norm: dst[i, :] = (x[i, :] − mean)/sqrt(var + eps)·w + b, in ggml's
// operations where the device has fp64: the row summed in double, the mean
// rounded to float, the float deviations' squares summed in double, the
// variance rounded to float, scale = 1/sqrt(var + eps) in float (sqrt and
// the division correctly rounded), then (d·scale)·w + b, each rounded. As
// for rms_norm, double sums make the row's statistics the CPU backend's to
// the bit. hasB 0: no bias.
#ifdef cl_khr_fp64
#define LN_ACC double
#define LN_SUM(red, v) wg_sum_d(red, v)
#define LN_SQRT(v) ((float)sqrt((double)(v)))
#else
#define LN_ACC float
#define LN_SUM(red, v) wg_sum(red, v)
#define LN_SQRT(v) sqrt(v)
#endif
kernel void layer_norm(global float* dst, global const float* x, global const float* w,
		global const float* b, int hasB, int cols, float eps, local LN_ACC* red) {
	int i = get_group_id(1), lid = get_local_id(0), ls = get_local_size(0);
	global const float* xr = x + (ulong)i * cols;
	global float* dr = dst + (ulong)i * cols;
	LN_ACC s = 0;
	for (int k = lid; k < cols; k += ls)
		s += xr[k];
	s = LN_SUM(red, s);
	float mean = (float)(s / cols);
	LN_ACC s2 = 0;
	for (int k = lid; k < cols; k += ls) {
		float d = xr[k] - mean;
		float sq = d * d;
		s2 += sq;
	}
	s2 = LN_SUM(red, s2);
	float var = (float)(s2 / cols);
	float scale = div_rn(1.0f, LN_SQRT(var + eps));
	for (int k = lid; k < cols; k += ls) {
		float d = xr[k] - mean;
		float y = (d * scale) * w[k];
		dr[k] = hasB ? y + b[k] : y;
	}
}
