// Elementwise ops over count elements. Launch: global count rounded up to
// the local size.

// silu_mul: dst = silu(gate)·up, silu(g) = g / (1 + e^-g), in llama.cpp's
// float operations (ggml_v_silu, then the product): its exp (expf_ggml) and
// a correctly rounded division (div_rn, quant.cl), so the result is the CPU
// backend's to the bit. It feeds the FFN's down projection, whose
// activation rounding (Q8_0, F16) turns any difference into a jump.
kernel void silu_mul(global float* dst, global const float* gate, global const float* up, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	float g = gate[k];
	dst[k] = div_rn(g, 1.0f + expf_ggml(-g)) * up[k];
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
