// kvquant: the KV-cache append into a BF16 or quantised cache and its
// reverse (backend.CopySlice), so that such a cache stays on the device.
// A row is stored as llama.cpp's ggml_cpy stores a cache row, with the CPU
// type traits' from_float of the cache type:
//   - BF16: GGML_FP32_TO_BF16 (bf16_round's bits);
//   - Q8_0: quantize_row_q8_0, ggml's x86 SIMD one (quant_v32: id = 127/amax,
//     ties to even), not the _ref quantiser (1/d, half away from zero) —
//     KVQ_Q8_0 below is the one place that chooses;
//   - Q4_0, Q4_1, Q5_0, Q5_1: their _ref quantisers (dtype.QuantizeRow);
//   - IQ4_NL: quantize_row_iq4_nl_ref, which runs quantize_row_iq4_nl_impl
//     with ntry −1: d = max/−127, each element's nearest level at 1/d, then
//     d = Σwqx/Σwq² (w = x²) with no trial scales (llama-quantize's ntry 7,
//     dtype.QuantizeRow's, searches fifteen more). A block below
//     GROUP_MAX_EPS stores d = 0; its nibbles (stale in llama.cpp) are the
//     level nearest 0, which dequantises to the same zeros.
// Every float operation is rounded on its own (no contraction), as the
// reference C compiles without FMA; divisions are div_rn's.

#define KVT_BF16 0
#define KVT_Q8_0 1
#define KVT_Q4_0 2
#define KVT_Q4_1 3
#define KVT_Q5_0 4
#define KVT_Q5_1 5
#define KVT_IQ4_NL 6

// KVQ_Q8_0 stores one Q8_0 block of x: the rounding of a Q8_0 cache, the
// SIMD from_float's (see the header).
inline void KVQ_Q8_0(global uchar* blk, global const float* x) {
	char16 q0, q1;
	float dr;
	int sum;
	float d = quant_v32(vload16(0, x), vload16(0, x + 16), &q0, &q1, &dr, &sum);
	vstore_half_rte(d, 0, (global half*)blk);
	vstore16(as_uchar16(q0), 0, blk + 2);
	vstore16(as_uchar16(q1), 0, blk + 18);
}

// kvq_signed_max is the element of largest magnitude with its sign, the
// first on ties, and that magnitude.
inline float kvq_signed_max(global const float* x, float* amax) {
	float mx = 0.0f, a = 0.0f;
	for (int j = 0; j < 32; j++) {
		float v = fabs(x[j]);
		if (v > a) {
			a = v;
			mx = x[j];
		}
	}
	*amax = a;
	return mx;
}

// kvq_min_max is the smallest and largest element from ±FLT_MAX.
inline void kvq_min_max(global const float* x, float* mn, float* mx) {
	*mn = FLT_MAX;
	*mx = -FLT_MAX;
	for (int j = 0; j < 32; j++) {
		if (x[j] < *mn)
			*mn = x[j];
		if (x[j] > *mx)
			*mx = x[j];
	}
}

inline float kvq_inv(float d) { return d != 0.0f ? div_rn(1.0f, d) : 0.0f; }

// kvq_nibbles stores sixteen bytes of element j (low nibble) and j+16
// (high), q[] holding the 32 levels, and returns the fifth bits as qh.
inline uint kvq_nibbles(global uchar* qs, const uchar* q) {
	uint qh = 0;
	for (int j = 0; j < 16; j++) {
		qs[j] = (q[j] & 0xF) | ((q[j + 16] & 0xF) << 4);
		qh |= (uint)((q[j] >> 4) & 1) << j;
		qh |= (uint)((q[j + 16] >> 4) & 1) << (j + 16);
	}
	return qh;
}

inline void kvq_put_u32(global uchar* p, uint v) {
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

// kvq_sym stores Q4_0 (levels 16, bias 8) or Q5_0 (32, 16): d = max/−bias.
inline void kvq_sym(global uchar* blk, global const float* x, int bias, bool five) {
#pragma OPENCL FP_CONTRACT OFF
	float amax, mx = kvq_signed_max(x, &amax);
	float d = div_rn(mx, -(float)bias), id = kvq_inv(d);
	uchar q[32];
	for (int j = 0; j < 32; j++) {
		float v = x[j] * id;
		q[j] = (uchar)min(2 * bias - 1, (int)(char)(v + ((float)bias + 0.5f)));
	}
	vstore_half_rte(d, 0, (global half*)blk);
	if (five)
		kvq_put_u32(blk + 2, kvq_nibbles(blk + 6, q));
	else
		kvq_nibbles(blk + 2, q);
}

// kvq_min stores Q4_1 (levels 16) or Q5_1 (32): d = (max−min)/(levels−1).
inline void kvq_min(global uchar* blk, global const float* x, bool five) {
#pragma OPENCL FP_CONTRACT OFF
	float mn, mx;
	kvq_min_max(x, &mn, &mx);
	float d = div_rn(mx - mn, five ? 31.0f : 15.0f), id = kvq_inv(d);
	uchar q[32];
	for (int j = 0; j < 32; j++) {
		float v = (x[j] - mn) * id;
		// Q4_1 caps its level; Q5_1's reference does not.
		q[j] = five ? (uchar)(v + 0.5f) : (uchar)min(15, (int)(char)(v + 0.5f));
	}
	vstore_half_rte(d, 0, (global half*)blk);
	vstore_half_rte(mn, 1, (global half*)blk);
	if (five)
		kvq_put_u32(blk + 4, kvq_nibbles(blk + 8, q));
	else
		kvq_nibbles(blk + 4, q);
}

constant char kvq_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// kvq_best is ggml's best_index_int8 over IQ4_NL's levels.
inline int kvq_best(float x) {
#pragma OPENCL FP_CONTRACT OFF
	if (x <= (float)kvq_iq4nl[0])
		return 0;
	if (x >= (float)kvq_iq4nl[15])
		return 15;
	int ml = 0, mu = 15;
	while (mu - ml > 1) {
		int mav = (ml + mu) / 2;
		if (x < (float)kvq_iq4nl[mav])
			mu = mav;
		else
			ml = mav;
	}
	return x - (float)kvq_iq4nl[mu - 1] < (float)kvq_iq4nl[mu] - x ? mu - 1 : mu;
}

inline void kvq_iq4_nl(global uchar* blk, global const float* x) {
#pragma OPENCL FP_CONTRACT OFF
	float amax, mx = kvq_signed_max(x, &amax);
	uchar q[32];
	float d = 0.0f;
	if (amax < 1e-15f) {
		for (int j = 0; j < 32; j++)
			q[j] = kvq_best(0.0f);
	} else {
		float d0 = div_rn(mx, (float)kvq_iq4nl[0]), id = div_rn(1.0f, d0);
		float sumqx = 0.0f, sumq2 = 0.0f;
		for (int j = 0; j < 32; j++) {
			int l = kvq_best(id * x[j]);
			q[j] = l;
			float lv = (float)kvq_iq4nl[l], w = x[j] * x[j];
			float wq = w * lv;
			float t = wq * x[j];
			sumqx = sumqx + t;
			t = wq * lv;
			sumq2 = sumq2 + t;
		}
		d = div_rn(sumqx, sumq2);
	}
	vstore_half_rte(d, 0, (global half*)blk);
	for (int j = 0; j < 16; j++)
		blk[2 + j] = q[j] | (q[j + 16] << 4);
}

// kv_quant stores nb blocks of 32 floats from src + srcOff as cache type t
// at byte dstByte of dst, one work-item a block. Launch: global
// (roundUp(nb, L)), local (L).
kernel void kv_quant(global uchar* dst, ulong dstByte, global const float* src, ulong srcOff, int nb, int t) {
	int b = get_global_id(0);
	if (b >= nb)
		return;
	global const float* x = src + srcOff + (ulong)b * 32;
	switch (t) {
	case KVT_Q8_0: KVQ_Q8_0(dst + dstByte + (ulong)b * 34, x); break;
	case KVT_Q4_0: kvq_sym(dst + dstByte + (ulong)b * 18, x, 8, false); break;
	case KVT_Q5_0: kvq_sym(dst + dstByte + (ulong)b * 22, x, 16, true); break;
	case KVT_Q4_1: kvq_min(dst + dstByte + (ulong)b * 20, x, false); break;
	case KVT_Q5_1: kvq_min(dst + dstByte + (ulong)b * 24, x, true); break;
	default: kvq_iq4_nl(dst + dstByte + (ulong)b * 18, x); break;
	}
}

// kv_deq16 is the 16 values of group g of a cache row of type t
// (weights.cl's dequantisers, DequantizeRow's values).
inline float16 kv_deq16(int t, global const uchar* row, int g) {
	switch (t) {
	case KVT_BF16: return deq16_bf16(row, g);
	case KVT_Q8_0: return deq16_q8_0(row, g);
	case KVT_Q4_0: return deq16_q4_0(row, g);
	case KVT_Q4_1: return deq16_q4_1(row, g);
	case KVT_Q5_0: return deq16_q5_0(row, g);
	case KVT_Q5_1: return deq16_q5_1(row, g);
	default: return deq16_iq4_nl(row, g);
	}
}

// kv_dequant writes ng groups of 16 values of cache type t, from byte
// srcByte of src (a whole block's start), to dst + dstOff. Launch: global
// (roundUp(ng, L)), local (L).
kernel void kv_dequant(global float* dst, ulong dstOff, global const uchar* src, ulong srcByte, int ng, int t) {
	int g = get_global_id(0);
	if (g >= ng)
		return;
	vstore16(kv_deq16(t, src + srcByte, g), 0, dst + dstOff + (ulong)g * 16);
}

// kv_bf16 rounds count floats to BF16 (the append to a BF16 cache) and
// kv_from_bf16 widens them back exactly. Launch: global (roundUp(count, L)).
kernel void kv_bf16(global ushort* dst, ulong dstOff, global const float* src, ulong srcOff, int count) {
	int i = get_global_id(0);
	if (i < count)
		dst[dstOff + i] = as_uint(bf16_round(src[srcOff + i])) >> 16;
}

kernel void kv_from_bf16(global float* dst, ulong dstOff, global const ushort* src, ulong srcOff, int count) {
	int i = get_global_id(0);
	if (i < count)
		dst[dstOff + i] = as_float((uint)src[srcOff + i] << 16);
}
