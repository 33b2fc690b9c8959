// Elementwise ops over count elements. Launch: global count rounded up to
// the local size.

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// expf_libm stands for the C library's expf: float64's exp rounded where
// the device has fp64 (glibc's expf is that but where it is not correctly
// rounded, rarely), else OpenCL's exp (within 3 ulp).
inline float expf_libm(float x) {
#ifdef cl_khr_fp64
	return (float)exp((double)x);
#else
	return exp(x);
#endif
}

// silu_mul: dst = silu(gate)·up, silu(g) = g / (1 + e^-g), in llama.cpp's
// float operations (ggml_vec_silu_f32, then the product) for the build
// whose vectors hold lanes floats (see attention.cl), on rows of whole
// vectors: its vectorised exp (expf_lanes) and a correctly rounded
// division (div_rn, quant.cl), so the result is the CPU backend's to the
// bit. It feeds the FFN's down projection, whose activation rounding
// (Q8_0, F16) turns any difference into a jump.
kernel void silu_mul(global float* dst, global const float* gate, global const float* up, int count, int lanes) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	float g = gate[k];
	dst[k] = div_rn(g, 1.0f + expf_lanes(-g, lanes)) * up[k];
}

// silu_mul_rows is silu_mul on rows of cols elements, not whole vectors:
// ggml_silu_f32 takes the last cols % lanes of each with the C library's
// exp (expf_libm: the CPU backend's bits but where that rounds otherwise).
kernel void silu_mul_rows(global float* dst, global const float* gate, global const float* up, int count,
		int lanes, int cols) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	float g = gate[k];
	float e = k % cols < cols - cols % lanes ? expf_lanes(-g, lanes) : expf_libm(-g);
	dst[k] = div_rn(g, 1.0f + e) * up[k];
}

kernel void add(global float* dst, global const float* a, global const float* b, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	dst[k] = a[k] + b[k];
}

// copy moves count 4-byte elements (F32 or I32) between element offsets:
// rows for Copy, the KV-cache append for CopySlice.
kernel void copy(global uint* dst, ulong dstOff, global const uint* src, ulong srcOff, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	dst[dstOff + k] = src[srcOff + k];
}

// copy_f16 moves count 2-byte elements (F16) between element offsets.
kernel void copy_f16(global ushort* dst, ulong dstOff, global const ushort* src, ulong srcOff, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	dst[dstOff + k] = src[srcOff + k];
}

// copy_f32_f16 is the append to an f16 KV cache: each F32 element rounded to
// the nearest half, ties to even (llama.cpp's cache store).
kernel void copy_f32_f16(global half* dst, ulong dstOff, global const float* src, ulong srcOff, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	vstore_half_rte(src[srcOff + k], dstOff + k, dst);
}

// copy_f16_f32 widens F16 elements to F32, exactly: an f16 KV cache read
// into F32 rows for a K-shift (llama.cpp's rope over its f16 cache works in
// float and rounds back).
kernel void copy_f16_f32(global float* dst, ulong dstOff, global const half* src, ulong srcOff, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	dst[dstOff + k] = vload_half(srcOff + k, src);
}

// f16_bits is x rounded to the nearest half, ties to even, as bits (the
// index of ggml's F16 tables).
inline ushort f16_bits(float x) {
	ushort h;
	vstore_half_rte(x, 0, (private half*)&h);
	return h;
}

// gelu_ggml is ggml_vec_gelu_f32 as llama.cpp's CPU build computes it: 0 at
// or below −10, x at or above 10, else ggml's table of F16 GELU results
// (gelu_table, built on the host: ggmlmath.GELUTable) at x rounded to F16.
// The CPU backend looks up the same table, so the results agree to the bit.
inline float gelu_ggml(float x, global const half* gelu_table) {
	if (x <= -10.0f)
		return 0.0f;
	if (x >= 10.0f)
		return x;
	return vload_half(f16_bits(x), gelu_table);
}

// gelu_mul: dst = gelu(gate)·up (GeGLU); up == gate with hasUp 0 is plain
// GELU (GPT-2).
kernel void gelu_mul(global float* dst, global const float* gate, global const float* up, int count,
		global const half* gelu_table, int hasUp) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	float g = gelu_ggml(gate[k], gelu_table);
	dst[k] = hasUp ? g * up[k] : g;
}

// add_bias: dst[i, j] = x[i, j] + bias[j] over count elements of rows of
// cols.
kernel void add_bias(global float* dst, global const float* x, global const float* bias, int count, int cols) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	dst[k] = x[k] + bias[k % cols];
}

// scale: dst = x·s (ggml_scale).
kernel void scale(global float* dst, global const float* x, float s, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	dst[k] = x[k] * s;
}

// soft_cap: x = tanh(x·inv)·cap, inv = 1/cap rounded to float, as ggml's
// scale, tanh, scale. tanh is float64's rounded to float where the device
// has fp64 (within an ulp of the C library's tanhf that the CPU backend
// calls); float otherwise.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define TANH_F(t) ((float)tanh((double)(t)))
#else
#define TANH_F(t) tanh(t)
#endif
kernel void soft_cap(global float* x, float inv, float cap, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	x[k] = TANH_F(x[k] * inv) * cap;
}
