// Weight formats, read in their stored layout (dtype/dtype.go's
// DequantizeRow is the definition). Each type T provides three readers of a
// row (a pointer to its first byte):
//
//   dot_T(row, u, x)  the 16 lane-wise products Σ w·x of "unit" u, MVU_T
//                     contiguous elements starting at u·MVU_T, for the
//                     matrix-vector kernels. Units are the natural piece of
//                     each format (a Q8_0/Q4_0 block, a quarter super-block of
//                     Q6_K that shares its ql/qh bytes) so that every stored
//                     byte is loaded once, with vector loads. The caller sums
//                     the 16 lanes once per row, not once per unit.
//   deq16_T(row, g)   the 16 dequantised elements 16g … 16g+15, for the
//                     matrix-matrix and embedding kernels. Values are exactly
//                     DequantizeRow's: the same products in the same order.
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
#define MVU_q8_0 32
#define MVU_q4_0 32
#define MVU_q6_k 64

// TAIL_T says whether rows of T can end inside a 16-element group.
#define TAIL_f32 1
#define TAIL_f16 1
#define TAIL_bf16 1
#define TAIL_q8_0 0
#define TAIL_q4_0 0
#define TAIL_q6_k 0

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
	return vload_half16(u, (global const half*)row) * vload16(u, x);
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
	return deq16_bf16(row, u) * vload16(u, x);
}

inline float elem_bf16(global const uchar* row, int k) {
	return as_float((uint)((global const ushort*)row)[k] << 16);
}

// ---- Q8_0: f16 scale d, 32 int8.

inline float16 dot_q8_0(global const uchar* row, int u, global const float* x) {
	global const uchar* blk = row + u * 34;
	float d = vload_half(0, (global const half*)blk);
	float16 q0 = convert_float16(as_char16(vload16(0, blk + 2)));
	float16 q1 = convert_float16(as_char16(vload16(0, blk + 18)));
	global const float* xb = x + u * 32;
	return d * (q0 * vload16(0, xb) + q1 * vload16(1, xb));
}

inline float16 deq16_q8_0(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 1) * 34;
	float d = vload_half(0, (global const half*)blk);
	return d * convert_float16(as_char16(vload16(0, blk + 2 + (g & 1) * 16)));
}

inline float elem_q8_0(global const uchar* row, int k) { return 0.0f; }

// ---- Q4_0: f16 scale d, 16 bytes; byte j holds element j (low nibble) and
// j+16 (high nibble), both offset by 8.

inline float16 dot_q4_0(global const uchar* row, int u, global const float* x) {
	global const uchar* blk = row + u * 18;
	float d = vload_half(0, (global const half*)blk);
	uchar16 q = vload16(0, blk + 2);
	float16 lo = convert_float16(q & (uchar16)0xF) - 8.0f;
	float16 hi = convert_float16(q >> (uchar16)4) - 8.0f;
	global const float* xb = x + u * 32;
	return d * (lo * vload16(0, xb) + hi * vload16(1, xb));
}

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

// dot_q6_k unit u covers l0 … l0+15 (l0 = 0 or 16) of half nh of super-block
// u/4, all four quarters: 16 bytes of each of ql[l], ql[l+32], qh[l] make 64
// elements.
inline float16 dot_q6_k(global const uchar* row, int u, global const float* x) {
	global const uchar* blk = row + (u >> 2) * 210;
	int nh = (u >> 1) & 1, l0 = (u & 1) * 16;
	uchar16 qa = vload16(0, blk + nh * 64 + l0);
	uchar16 qb = vload16(0, blk + nh * 64 + 32 + l0);
	uchar16 qh = vload16(0, blk + 128 + nh * 32 + l0);
	global const char* sc = (global const char*)(blk + 192 + nh * 8 + (u & 1));
	float d = vload_half(0, (global const half*)(blk + 208));
	const uchar16 m4 = (uchar16)0xF, m2 = (uchar16)3;
	float16 q1 = convert_float16((qa & m4) | ((qh & m2) << (uchar16)4)) - 32.0f;
	float16 q2 = convert_float16((qb & m4) | (((qh >> (uchar16)2) & m2) << (uchar16)4)) - 32.0f;
	float16 q3 = convert_float16((qa >> (uchar16)4) | (((qh >> (uchar16)4) & m2) << (uchar16)4)) - 32.0f;
	float16 q4 = convert_float16((qb >> (uchar16)4) | ((qh >> (uchar16)6) << (uchar16)4)) - 32.0f;
	global const float* xb = x + (u >> 2) * 256 + nh * 128 + l0;
	return d * ((float)sc[0] * (q1 * vload16(0, xb)) + (float)sc[2] * (q2 * vload16(0, xb + 32)) +
			(float)sc[4] * (q3 * vload16(0, xb + 64)) + (float)sc[6] * (q4 * vload16(0, xb + 96)));
}

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
