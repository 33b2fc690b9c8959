// Weight formats, read in their stored layout (dtype/dtype.go's
// DequantizeRow is the definition). Each type T provides three readers of a
// row (a pointer to its first byte):
//
//   dot_T(row, u, x)  (plain types only) the 16 lane-wise products Σ w·x of
//                     "unit" u, MVU_T contiguous elements starting at
//                     u·MVU_T, for the matrix-vector kernels, with x rounded
//                     to T's activation type (MVR16_T). The caller sums the 16
//                     lanes once per row, not once per unit. The block
//                     formats multiply integer activations instead (quant.cl).
//   deq16_T(row, g)   the 16 dequantised elements 16g … 16g+15, for the
//                     plain matrix-matrix and every embedding kernel.
//                     Values are exactly DequantizeRow's: the same products
//                     in the same order.
//   elem_T(row, k)    one element, for the tail of plain-type rows whose
//                     length is not a multiple of 16 (block formats never
//                     have one: rows are whole blocks).
//
// vloadn needs only the scalar's alignment, so any element offset works.
// Scales are halves at even byte offsets (blocks of 34, 18 and 210 bytes,
// Q6_K's d at offset 208), which is all vload_half needs.

#define MVU_f32 16
#define MVU_f16 16
#define MVU_bf16 16

// TAIL_T says whether rows of T can end inside a 16-element group.
#define TAIL_f32 1
#define TAIL_f16 1
#define TAIL_bf16 1

// XR_T(x) is one activation rounded to T's activation type
// (dtype.ActivationType: F16 and BF16 weights see F16 and BF16 activations,
// as in llama.cpp); round_act_T applies it once to a matmul's activations.
// The matrix-matrix kernels always read activations so rounded. On a GPU
// the matrix-vector kernels round as they read instead (MVR_T, MVR16_T):
// there the arithmetic hides under the weight reads and it saves a launch
// per token. A CPU device (MV_ROUNDED_X, set by the host) runs round_act_T
// before mv_T too: each work-item streams a whole row, so rounding as it
// reads would round every activation once per row, which measured 2–3×
// slower than the unrounded kernel on PoCL.
#define XR_f32(x) (x)
#define XR_f16(x) f16_round(x)
#define XR_bf16(x) bf16_round(x)
#define MVR_f32(x) (x)
#define MVR16_f32(v) (v)
#ifdef MV_ROUNDED_X
#define MVR_f16(x) (x)
#define MVR_bf16(x) (x)
#define MVR16_f16(v) (v)
#define MVR16_bf16(v) (v)
#else
#define MVR_f16(x) f16_round(x)
#define MVR_bf16(x) bf16_round(x)
#define MVR16_f16(v) f16_round16(v)
#define MVR16_bf16(v) bf16_round16(v)
#endif

inline float hsum16(float16 v) {
	float8 a = v.lo + v.hi;
	float4 b = a.lo + a.hi;
	float2 c = b.lo + b.hi;
	return c.x + c.y;
}

// ---- F32

inline float16 dot_f32(global const uchar* row, int u, global const float* x) {
	return vload16(u, (global const float*)row) * vload16(u, x);
}

inline float16 deq16_f32(global const uchar* row, int g) {
	return vload16(g, (global const float*)row);
}

inline float elem_f32(global const uchar* row, int k) {
	return ((global const float*)row)[k];
}

// ---- F16

inline float16 dot_f16(global const uchar* row, int u, global const float* x) {
	return vload_half16(u, (global const half*)row) * MVR16_f16(vload16(u, x));
}

inline float16 deq16_f16(global const uchar* row, int g) {
	return vload_half16(g, (global const half*)row);
}

inline float elem_f16(global const uchar* row, int k) {
	return vload_half(k, (global const half*)row);
}

// ---- BF16: the upper half of a float's bits.

inline float16 deq16_bf16(global const uchar* row, int g) {
	return as_float16(convert_uint16(vload16(g, (global const ushort*)row)) << 16);
}

inline float16 dot_bf16(global const uchar* row, int u, global const float* x) {
	return deq16_bf16(row, u) * MVR16_bf16(vload16(u, x));
}

inline float elem_bf16(global const uchar* row, int k) {
	return as_float((uint)((global const ushort*)row)[k] << 16);
}

// ---- Q8_0: f16 scale d, 32 int8.

inline float16 deq16_q8_0(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 1) * 34;
	float d = vload_half(0, (global const half*)blk);
	return d * convert_float16(as_char16(vload16(0, blk + 2 + (g & 1) * 16)));
}

inline float elem_q8_0(global const uchar* row, int k) { return 0.0f; }

// ---- Q4_0: f16 scale d, 16 bytes; byte j holds element j (low nibble) and
// j+16 (high nibble), both offset by 8.

inline float16 deq16_q4_0(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 1) * 18;
	float d = vload_half(0, (global const half*)blk);
	uchar16 q = vload16(0, blk + 2);
	q = (g & 1) ? q >> (uchar16)4 : q & (uchar16)0xF;
	return d * (convert_float16(q) - 8.0f);
}

inline float elem_q4_0(global const uchar* row, int k) { return 0.0f; }

// ---- Q6_K: 256-element super-blocks of ql[128] (low four bits), qh[64]
// (high two), int8 sub-scales sc[16], f16 d. Element nh·128 + quarter·32 + l
// (l < 32) takes its low bits from ql[nh·64 + (quarter&1)·32 + l] (nibble
// quarter>>1), its high bits from qh[nh·32 + l] >> 2·quarter and its scale
// from sc[nh·8 + l/16 + 2·quarter].

// deq16_q6_k: group p of a super-block is half nh = p>>3, quarter
// (p>>1)&3, l0 = (p&1)·16.
inline float16 deq16_q6_k(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 4) * 210;
	int p = g & 15;
	int nh = p >> 3, quarter = (p >> 1) & 3, l0 = (p & 1) * 16;
	uchar16 ql = vload16(0, blk + nh * 64 + (quarter & 1) * 32 + l0);
	uchar16 qh = vload16(0, blk + 128 + nh * 32 + l0);
	float d = vload_half(0, (global const half*)(blk + 208));
	float sc = (float)as_char(blk[192 + nh * 8 + (p & 1) + 2 * quarter]);
	uchar16 lo = (quarter >> 1) ? ql >> (uchar16)4 : ql & (uchar16)0xF;
	uchar16 hi = (qh >> (uchar16)(2 * quarter)) & (uchar16)3;
	return (d * sc) * (convert_float16(lo | (hi << (uchar16)4)) - 32.0f);
}

inline float elem_q6_k(global const uchar* row, int k) { return 0.0f; }
