// Weight formats, read in their stored layout (dtype/dtype.go's
// DequantizeRow is the definition). Each type T provides two readers of a
// row (a pointer to its first byte):
//
//   deq16_T(row, g)   the 16 dequantised elements 16g … 16g+15, for the
//                     plain matrix kernels (MVU_T = 16 elements a unit) and
//                     every embedding kernel.
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
// per token. A CPU device (CPU_VARIANT, set by the host) runs round_act_T
// before mv_T too: each work-item streams a whole row, so rounding as it
// reads would round every activation once per row, which measured 2–3×
// slower than the unrounded kernel on PoCL.
#define XR_f32(x) (x)
#define XR_f16(x) f16_round(x)
#define XR_bf16(x) bf16_round(x)
#define MVR_f32(x) (x)
#define MVR16_f32(v) (v)
#ifdef CPU_VARIANT
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

inline float16 deq16_f32(global const uchar* row, int g) {
	return vload16(g, (global const float*)row);
}

inline float elem_f32(global const uchar* row, int k) {
	return ((global const float*)row)[k];
}

// ---- F16

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

inline float elem_bf16(global const uchar* row, int k) {
	return as_float((uint)((global const ushort*)row)[k] << 16);
}

// ---- The float-weight sums: the CPU backend's (backend/cpu/kernels.go,
// floatSum), which are llama.cpp's: mode FS_VEC8/FS_VEC16 is
// ggml_vec_dot_f16/f32/bf16 of its AVX2/AVX-512 build (element k in lane
// k mod W, W = 32 or 64, BF16 on AVX-512 32; then folded, reduced and the
// elements past the last whole step added: F32 in float, F16 and BF16 in
// float64), FS_TINY8/FS_TINY16 tinyBLAS (8 or 16 lanes over all of k,
// reduced). Lanes sum by fused multiply-adds. FS_VECBF/FS_TINYBF are the
// same of a build for a CPU with AVX512_BF16, which sums BF16 by vdpbf16ps:
// a lane takes a pair of elements a step (fs_dp8). fs_t holds one output's
// lanes as float16s (lanes 16i…16i+15 in a[i]) or, for FS_TINY8, t.

#define FS_VEC8 0
#define FS_VEC16 1
#define FS_TINY8 2
#define FS_TINY16 3
#define FS_VECBF 4
#define FS_TINYBF 5

typedef struct {
	float16 a[4];
	float8 t;
} fs_t;

inline void fs_zero(fs_t* f) {
	for (int i = 0; i < 4; i++)
		f->a[i] = 0.0f;
	f->t = 0.0f;
}

inline int fs_width(int mode, bool bf16) {
	return mode == FS_TINY8 ? 8 : mode == FS_TINY16 ? 16 : mode == FS_VEC16 && !bf16 || mode == FS_VECBF ? 64 : 32;
}

// fs_groups is how many 16-element groups of a row of K go to the lanes;
// the rest is fs_finish's.
inline int fs_groups(int mode, bool bf16, int K) {
	return (K & ~(mode == FS_TINY8 ? 15 : fs_width(mode, bf16) - 1)) / 16;
}

// fs_mad is lanes + w·x: fused for F32 (kind 0); for F16 and BF16, whose
// products are exact, a product added, the same bits where the device's
// fma flushes subnormal results (llvmpipe) and its multiply does not.
inline float16 fs_mad(int kind, float16 w, float16 x, float16 a) {
#pragma OPENCL FP_CONTRACT OFF
	if (kind == 0)
		return fma(w, x, a);
	float16 p = w * x;
	return a + p;
}

inline float8 fs_mad8(int kind, float8 w, float8 x, float8 a) {
#pragma OPENCL FP_CONTRACT OFF
	if (kind == 0)
		return fma(w, x, a);
	float8 p = w * x;
	return a + p;
}

// fs_ftz8 is v with subnormals flushed to zeros of their signs.
inline float8 fs_ftz8(float8 v) {
	return select(v, copysign((float8)0.0f, v), isless(fabs(v), (float8)FLT_MIN));
}

// fs_dp8 is vdpbf16ps on 8 lanes: lane j adds the products of elements
// 2j+1 and then 2j of w and x, each by a fused multiply-add that takes
// subnormals as zero and flushes a subnormal result to zero.
inline float8 fs_dp8(float8 a, float16 w, float16 x) {
	a = fs_ftz8(fma(fs_ftz8(w.odd), fs_ftz8(x.odd), fs_ftz8(a)));
	return fs_ftz8(fma(fs_ftz8(w.even), fs_ftz8(x.even), a));
}

// fs_add adds group g's products into its lanes (kind: FS_KIND_T).
inline void fs_add(fs_t* f, int mode, int kind, int g, float16 w, float16 x) {
	if (mode == FS_VECBF || mode == FS_TINYBF) {
		// A group's 8 pairs are one half of a 16-lane accumulator: the
		// second of FS_VECBF's two takes each step's elements 32…63.
		switch ((mode == FS_VECBF ? g & 3 : g & 1)) {
		case 0: f->a[0].lo = fs_dp8(f->a[0].lo, w, x); break;
		case 1: f->a[0].hi = fs_dp8(f->a[0].hi, w, x); break;
		case 2: f->a[1].lo = fs_dp8(f->a[1].lo, w, x); break;
		default: f->a[1].hi = fs_dp8(f->a[1].hi, w, x); break;
		}
		return;
	}
	if (mode == FS_TINY8) {
		f->t = fs_mad8(kind, w.lo, x.lo, f->t);
		f->t = fs_mad8(kind, w.hi, x.hi, f->t);
		return;
	}
	// Constant indices only: a private array indexed at run time would
	// live in memory, not registers.
	switch (g & (fs_width(mode, kind == 2) / 16 - 1)) {
	case 0: f->a[0] = fs_mad(kind, w, x, f->a[0]); break;
	case 1: f->a[1] = fs_mad(kind, w, x, f->a[1]); break;
	case 2: f->a[2] = fs_mad(kind, w, x, f->a[2]); break;
	default: f->a[3] = fs_mad(kind, w, x, f->a[3]); break;
	}
}

// hsum8 is tinyBLAS's hsum: the halves added, then (0+2)+(1+3).
inline float fs_hsum8(float8 v) {
	float4 r = v.lo + v.hi;
	return (r.s0 + r.s2) + (r.s1 + r.s3);
}

// fs_reduce8 is GGML_F32x8_REDUCE's last steps: the halves, (0+1)+(2+3).
inline float fs_reduce8(float8 v) {
	float4 r = v.lo + v.hi;
	return (r.s0 + r.s1) + (r.s2 + r.s3);
}

// fs_reduce16 is gcc's _mm512_reduce_add_ps.
inline float fs_reduce16(float16 v) { return fs_hsum8(v.lo + v.hi); }

// fs_tail_f32 adds ggml_vec_dot_f32's remainder, elements from…K-1, to r as
// gcc compiles its loop: the products of whole groups (4 elements in the
// AVX2 build, 8 in the AVX-512 one) rounded and added in order, the rest by
// fused multiply-adds.
inline float fs_tail_f32(float r, global const uchar* row, global const float* x, int from, int K, int group) {
#pragma OPENCL FP_CONTRACT OFF
	int whole = from + ((K - from) & -group), k = from;
	for (; k < whole; k++) {
		float p = elem_f32(row, k) * x[k];
		r = r + p;
	}
	for (; k < K; k++)
		r = fma(elem_f32(row, k), x[k], r);
	return r;
}

// FS_KIND_T: 0 F32 (its remainder in float), 1 F16, 2 BF16.
#define FS_KIND_f32 0
#define FS_KIND_f16 1
#define FS_KIND_bf16 2

// fs_finish_T is one output: its lanes reduced and the elements from…K-1 of
// row · x added (x rounded to T's activation type).
#define DEFINE_FS_FINISH(T)                                                                    \
	__attribute__((noinline)) float fs_finish_##T(fs_t* f, int mode, global const uchar* row, \
			global const float* x, int from, int K) {                                          \
		_Pragma("OPENCL FP_CONTRACT OFF");                                                     \
		const int kind = FS_KIND_##T;                                                          \
		if (mode == FS_TINY8) {                                                                \
			float wa[8] = {0.0f}, xa[8] = {0.0f};                                              \
			for (int k = from; k < K; k++) {                                                   \
				wa[k & 7] = elem_##T(row, k);                                                  \
				xa[k & 7] = MVR_##T(x[k]);                                                     \
			}                                                                                  \
			float8 t = from < K ? fs_mad8(kind, vload8(0, wa), vload8(0, xa), f->t) : f->t;    \
			return fs_hsum8(t);                                                                \
		}                                                                                      \
		if (mode == FS_TINY16 || mode == FS_TINYBF)                                            \
			return fs_reduce16(f->a[0]);                                                       \
		att_acc sum;                                                                           \
		float r;                                                                               \
		if (mode == FS_VEC8) {                                                                 \
			float8 c = (f->a[0].lo + f->a[1].lo) + (f->a[0].hi + f->a[1].hi);                  \
			if (kind == 2) {                                                                   \
				sum = att_acc_of(fs_hsum8(c));                                                 \
			} else {                                                                           \
				r = fs_reduce8(c);                                                             \
				if (kind == 0)                                                                 \
					return fs_tail_f32(r, row, x, from, K, 4);                                 \
				sum = att_acc_of(r);                                                           \
			}                                                                                  \
		} else if (kind == 2) {                                                                \
			sum = att_add(att_acc_of(fs_reduce16(f->a[0])), fs_reduce16(f->a[1]));             \
		} else {                                                                               \
			r = fs_reduce16((f->a[0] + f->a[2]) + (f->a[1] + f->a[3]));                        \
			if (kind == 0)                                                                     \
				return fs_tail_f32(r, row, x, from, K, 8);                                     \
			sum = att_acc_of(r);                                                           \
		}                                                                                      \
		for (int k = from; k < K; k++)                                                         \
			sum = att_add(sum, elem_##T(row, k) * MVR_##T(x[k]));                              \
		return att_round(sum);                                                                 \
	}

DEFINE_FS_FINISH(f32)
DEFINE_FS_FINISH(f16)
DEFINE_FS_FINISH(bf16)

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

// Some formats below subtract or add a min after the product: those
// functions turn contraction off, so that the compiler cannot fuse the two
// into a multiply-add, which DequantizeRow (and ggml) never does. Their
// halves, like the others', sit at even byte offsets of even-sized blocks
// (20, 22, 24, 84, 110, 144, 176, 18 and 136 bytes).

// ---- Q4_1: f16 d and m, 16 bytes of unsigned nibbles as Q4_0's;
// value = q·d + m.

inline float16 deq16_q4_1(global const uchar* row, int g) {
#pragma OPENCL FP_CONTRACT OFF
	global const uchar* blk = row + (g >> 1) * 20;
	float d = vload_half(0, (global const half*)blk);
	float m = vload_half(1, (global const half*)blk);
	uchar16 q = vload16(0, blk + 4);
	q = (g & 1) ? q >> (uchar16)4 : q & (uchar16)0xF;
	return convert_float16(q) * d + m;
}

inline float elem_q4_1(global const uchar* row, int k) { return 0.0f; }

// q5_hi16 is the fifth bits (as 0 or 16) of the 16 elements of group h (0 or
// 1) of a Q5_0/Q5_1 block whose 32-bit little-endian qh is at p: bit j of
// qh belongs to element j.
inline uchar16 q5_hi16(global const uchar* p, int h) {
	uint qh = (uint)p[0] | (uint)p[1] << 8 | (uint)p[2] << 16 | (uint)p[3] << 24;
	uint16 sh = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) + (uint16)(16 * h);
	return convert_uchar16((((uint16)qh >> sh) & (uint16)1) << (uint16)4);
}

// ---- Q5_0: f16 d, 32 high bits, 16 bytes of nibbles; value = (q5-16)·d.

inline float16 deq16_q5_0(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 1) * 22;
	float d = vload_half(0, (global const half*)blk);
	uchar16 q = vload16(0, blk + 6);
	q = (g & 1) ? q >> (uchar16)4 : q & (uchar16)0xF;
	q |= q5_hi16(blk + 2, g & 1);
	return (convert_float16(q) - 16.0f) * d;
}

inline float elem_q5_0(global const uchar* row, int k) { return 0.0f; }

// ---- Q5_1: f16 d and m, 32 high bits, 16 bytes of nibbles;
// value = q5·d + m.

inline float16 deq16_q5_1(global const uchar* row, int g) {
#pragma OPENCL FP_CONTRACT OFF
	global const uchar* blk = row + (g >> 1) * 24;
	float d = vload_half(0, (global const half*)blk);
	float m = vload_half(1, (global const half*)blk);
	uchar16 q = vload16(0, blk + 8);
	q = (g & 1) ? q >> (uchar16)4 : q & (uchar16)0xF;
	q |= q5_hi16(blk + 4, g & 1);
	return convert_float16(q) * d + m;
}

inline float elem_q5_1(global const uchar* row, int k) { return 0.0f; }

// ---- IQ4_NL: f16 d, 16 bytes of nibbles indexing kvalues_iq4nl (ggml's
// non-uniform levels); value = d·level.

// iq4nl_levels looks the levels of 16 nibbles up in the table packed four
// bytes to a uint, kvalues_iq4nl[4i + j] in byte j of word i: the top two
// bits of a nibble pick the word, the low two the byte. Every step is a
// 32-bit vector operation, where shuffle with a variable mask is a scalar
// loop on some devices (on PoCL IQ4_NL matmuls took 1.6× as long with it).
inline char16 iq4nl_levels(uchar16 nib) {
	uint16 n = convert_uint16(nib);
	// select tests the sign bit: bits 2 and 3 moved there.
	int16 b2 = as_int16(n << (uint16)29), b3 = as_int16(n << (uint16)28);
	uint16 lo = select((uint16)0xBFAD9881u, (uint16)0xF6EADDCFu, b2); // -127 -104 -83 -65 | -49 -35 -22 -10
	uint16 hi = select((uint16)0x26190D01u, (uint16)0x71594535u, b2); // 1 13 25 38 | 53 69 89 113
	uint16 w = select(lo, hi, b3);
	return as_char16(convert_uchar16((w >> ((n & (uint16)3) << (uint16)3)) & (uint16)0xFF));
}

inline float16 deq16_iq4_nl(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 1) * 18;
	float d = vload_half(0, (global const half*)blk);
	uchar16 q = vload16(0, blk + 2);
	q = (g & 1) ? q >> (uchar16)4 : q & (uchar16)0xF;
	return d * convert_float16(iq4nl_levels(q));
}

inline float elem_iq4_nl(global const uchar* row, int k) { return 0.0f; }

// The 256-element K-quant super-blocks of Q2_K and Q3_K (like Q6_K) are
// sixteen 16-element groups; group p = 8·h + 2·j + half holds elements
// 128h + 32j + 16half + l (l < 16), whose two bits are at shift 2j of
// byte 32h + 16half + l of the quants, and uses scale p.

// ---- Q2_K: scales[16] (4-bit scale, 4-bit min), qs[64], f16 d and dmin;
// value = (d·sc)·q - dmin·m.

inline float16 deq16_q2_k(global const uchar* row, int g) {
#pragma OPENCL FP_CONTRACT OFF
	global const uchar* blk = row + (g >> 4) * 84;
	int p = g & 15;
	uchar16 q = vload16(0, blk + 16 + (p >> 3) * 32 + (p & 1) * 16);
	q = (q >> (uchar16)(2 * ((p >> 1) & 3))) & (uchar16)3;
	float d = vload_half(40, (global const half*)blk);
	float dmin = vload_half(41, (global const half*)blk);
	uchar s = blk[p];
	float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
	return dl * convert_float16(q) - ml;
}

inline float elem_q2_k(global const uchar* row, int k) { return 0.0f; }

// q3k_scale is Q3_K's signed 6-bit scale j (dtype's q3KScales): four low
// bits from the first 8 bytes, two high bits from the last 4, biased by 32.
inline int q3k_scale(global const uchar* sc, int j) {
	int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
	int hi = (sc[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
	return (lo | hi << 4) - 32;
}

// ---- Q3_K: hmask[32], qs[64], scales[12], f16 d; the third bit of element
// 128h + 32j + 16half + l is bit 4h + j of hmask[16half + l], and a clear
// bit subtracts 4; value = (d·scale)·q3.

inline float16 deq16_q3_k(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 4) * 110;
	int p = g & 15, h = p >> 3, j = (p >> 1) & 3, hf = p & 1;
	uchar16 q = vload16(0, blk + 32 + h * 32 + hf * 16);
	uchar16 hm = vload16(0, blk + hf * 16);
	char16 v = as_char16((q >> (uchar16)(2 * j)) & (uchar16)3);
	v -= select((char16)4, (char16)0, as_char16(hm & (uchar16)(1 << (4 * h + j))) != (char16)0);
	float d = vload_half(54, (global const half*)blk);
	float dl = d * (float)q3k_scale(blk + 96, p);
	return dl * convert_float16(v);
}

inline float elem_q3_k(global const uchar* row, int k) { return 0.0f; }

// k4_scale_min is ggml's get_scale_min_k4 (dtype's scaleMinK4): Q4_K and
// Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes.
inline int2 k4_scale_min(global const uchar* q, int j) {
	if (j < 4)
		return (int2)(q[j] & 63, q[j + 4] & 63);
	return (int2)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4, (q[j + 4] >> 4) | (q[j] >> 6) << 4);
}

// Q4_K and Q5_K super-blocks are four 64-element chunks c, each two
// sub-blocks 2c (low nibbles of 32 bytes) and 2c+1 (high nibbles) with their
// own scale and min; group p is chunk p>>2, sub-block 2c + (p>>1 & 1),
// bytes 16·(p&1) … of the chunk's 32.

// ---- Q4_K: f16 d and dmin, scales[12], qs[128]; value = (d·sc)·q - dmin·m.

inline float16 deq16_q4_k(global const uchar* row, int g) {
#pragma OPENCL FP_CONTRACT OFF
	global const uchar* blk = row + (g >> 4) * 144;
	int p = g & 15, c = p >> 2, hi = (p >> 1) & 1;
	uchar16 q = vload16(0, blk + 16 + c * 32 + (p & 1) * 16);
	q = hi ? q >> (uchar16)4 : q & (uchar16)0xF;
	float d = vload_half(0, (global const half*)blk);
	float dmin = vload_half(1, (global const half*)blk);
	int2 sm = k4_scale_min(blk + 4, 2 * c + hi);
	float dl = d * (float)sm.x, ml = dmin * (float)sm.y;
	return dl * convert_float16(q) - ml;
}

inline float elem_q4_k(global const uchar* row, int k) { return 0.0f; }

// ---- Q5_K: Q4_K plus qh[32]: the fifth bit of sub-block s's byte l is bit s
// of qh[l].

inline float16 deq16_q5_k(global const uchar* row, int g) {
#pragma OPENCL FP_CONTRACT OFF
	global const uchar* blk = row + (g >> 4) * 176;
	int p = g & 15, c = p >> 2, hi = (p >> 1) & 1, s = 2 * c + hi;
	uchar16 q = vload16(0, blk + 48 + c * 32 + (p & 1) * 16);
	uchar16 qh = vload16(0, blk + 16 + (p & 1) * 16);
	q = hi ? q >> (uchar16)4 : q & (uchar16)0xF;
	q |= ((qh >> (uchar16)s) & (uchar16)1) << (uchar16)4;
	float d = vload_half(0, (global const half*)blk);
	float dmin = vload_half(1, (global const half*)blk);
	int2 sm = k4_scale_min(blk + 4, s);
	float dl = d * (float)sm.x, ml = dmin * (float)sm.y;
	return dl * convert_float16(q) - ml;
}

inline float elem_q5_k(global const uchar* row, int k) { return 0.0f; }

// iq4xs_scale is IQ4_XS's signed scale of sub-block ib: four low bits from
// scales_l (at blk+4), two high from the 16-bit scales_h (at blk+2), biased
// by 32.
inline int iq4xs_scale(global const uchar* blk, int ib) {
	int lo = (blk[4 + (ib >> 1)] >> (4 * (ib & 1))) & 0xF;
	int sh = blk[2] | blk[3] << 8;
	return (lo | ((sh >> (2 * ib)) & 3) << 4) - 32;
}

// ---- IQ4_XS: f16 d, scales_h, scales_l[4], qs[128]: eight 32-element
// sub-blocks ib of IQ4_NL levels (16 bytes, low nibbles first) with a 6-bit
// scale; value = (d·scale)·level.

inline float16 deq16_iq4_xs(global const uchar* row, int g) {
	global const uchar* blk = row + (g >> 4) * 136;
	int p = g & 15, ib = p >> 1;
	uchar16 q = vload16(0, blk + 8 + ib * 16);
	q = (p & 1) ? q >> (uchar16)4 : q & (uchar16)0xF;
	float d = vload_half(0, (global const half*)blk);
	float dl = d * (float)iq4xs_scale(blk, ib);
	return dl * convert_float16(iq4nl_levels(q));
}

inline float elem_iq4_xs(global const uchar* row, int k) { return 0.0f; }
