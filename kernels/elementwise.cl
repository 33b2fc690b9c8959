// Elementwise ops over count elements. Launch: global count rounded up to
// the local size.

// silu_mul: dst = silu(gate)·up, silu(g) = g / (1 + e^-g).
kernel void silu_mul(global float* dst, global const float* gate, global const float* up, int count) {
	int k = get_global_id(0);
	if (k >= count)
		return;
	float g = gate[k];
	dst[k] = g / (1.0f + exp(-g)) * up[k];
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
