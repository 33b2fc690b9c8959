// Weight formats, read in their stored layout (dtype/dtype.go's
// DequantizeRow is the definition). A row is split into "units": the
// smallest piece one work-item dequantises, contiguous in the row.
//   F32, F16, BF16: 1 element.
//   Q8_0, Q4_0:     8 elements, a quarter of a 32-element block.
//   Q6_K:           16 elements, a sixteenth of a 256-element super-block.
// unit_T writes the unit's values to v and returns the index of its first
// element within the row. Scales are halves read with vload_half from byte
// offsets that are always even (blocks of 34, 18 and 210 bytes, Q6_K's d at
// offset 208), which is all vload_half needs.

#define UE_f32 1
#define UE_f16 1
#define UE_bf16 1
#define UE_q8_0 8
#define UE_q4_0 8
#define UE_q6_k 16

inline int unit_f32(global const uchar* row, int u, float* v) {
	v[0] = ((global const float*)row)[u];
	return u;
}

inline int unit_f16(global const uchar* row, int u, float* v) {
	v[0] = vload_half(u, (global const half*)row);
	return u;
}

inline int unit_bf16(global const uchar* row, int u, float* v) {
	v[0] = as_float((uint)((global const ushort*)row)[u] << 16);
	return u;
}

inline int unit_q8_0(global const uchar* row, int u, float* v) {
	int b = u >> 2, p = u & 3;
	global const uchar* blk = row + b * 34;
	float d = vload_half(0, (global const half*)blk);
	global const uchar* q = blk + 2 + p * 8;
	for (int j = 0; j < 8; j++)
		v[j] = d * (float)as_char(q[j]);
	return b * 32 + p * 8;
}

// Q4_0 byte j holds element j (low nibble) and j+16 (high nibble); quarter p
// takes bytes (p&1)*8 … +7, nibble p>>1.
inline int unit_q4_0(global const uchar* row, int u, float* v) {
	int b = u >> 2, p = u & 3;
	global const uchar* blk = row + b * 18;
	float d = vload_half(0, (global const half*)blk);
	global const uchar* q = blk + 2 + (p & 1) * 8;
	int shift = (p >> 1) * 4;
	for (int j = 0; j < 8; j++)
		v[j] = d * (float)((int)((q[j] >> shift) & 0xF) - 8);
	return b * 32 + (p >> 1) * 16 + (p & 1) * 8;
}

// Q6_K: element nh*128 + quarter*32 + l of a super-block takes its low four
// bits from ql[nh*64 + (quarter&1)*32 + l] (nibble quarter>>1), its high two
// from qh[nh*32 + l] >> 2*quarter and its scale from sc[nh*8 + l/16 +
// 2*quarter]. Unit p covers 16 values of l, so one scale.
inline int unit_q6_k(global const uchar* row, int u, float* v) {
	int b = u >> 4, p = u & 15;
	global const uchar* blk = row + b * 210;
	int nh = p >> 3, quarter = (p >> 1) & 3, l0 = (p & 1) * 16;
	global const uchar* ql = blk + nh * 64 + (quarter & 1) * 32 + l0;
	global const uchar* qh = blk + 128 + nh * 32 + l0;
	float d = vload_half(0, (global const half*)(blk + 208));
	float sc = (float)as_char(blk[192 + nh * 8 + (p & 1) + 2 * quarter]);
	int sl = (quarter >> 1) * 4, sh = 2 * quarter;
	for (int j = 0; j < 16; j++) {
		int q = ((ql[j] >> sl) & 0xF) | (((qh[j] >> sh) & 3) << 4);
		v[j] = d * sc * (float)(q - 32);
	}
	return b * 256 + nh * 128 + quarter * 32 + l0;
}
