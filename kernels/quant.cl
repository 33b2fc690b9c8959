// Integer matmuls for quantised weights, in llama.cpp's arithmetic
// (dtype.RoundActivations is the definition): each activation row is first
// rounded to the weight type's activation type by a quantize_ kernel, into a
// scratch pair of int8 quants xq (row i at i·K) and float scales xd (row i
// at i·K/B, B the activation block: 32 for Q8_0, 256 for Q8_K). The dot
// kernels then multiply int8 by int8 exactly in integers and apply the
// float scales once per block, so every backend that rounds the activations
// the same way sees the same products.
//
// The quantisers must reproduce the Go reference bit for bit (the backends
// must give the same greedy tokens): amax and the element of largest
// magnitude are exact; the f16 rounding of the Q8_0 scale is
// vstore_half_rte; the divisions are correctly rounded when the host builds
// with -cl-fp32-correctly-rounded-divide-sqrt (CORRECT_DIV), and otherwise
// go through div_rn's correction step, because OpenCL's plain "/" may be
// 2.5 ulp off and 127/amax decides which way ties round.

// div_rn is a/b rounded to nearest. Without CORRECT_DIV, one Markstein step
// from the device's approximate quotient: the remainder a - q·b is exact
// (fma), and adding remainder/b lands within a tiny fraction of an ulp of the
// true quotient, which is never exactly halfway between two floats.
inline float div_rn(float a, float b) {
#ifdef CORRECT_DIV
	return a / b;
#else
	float q = a / b;
	float r = fma(-q, b, a);
	// A zero remainder leaves q exact (and its zero's sign right); an
	// infinite b or quotient makes the remainder NaN, and q is right then.
	return isfinite(r) && r != 0.0f ? fma(r, 1.0f / b, q) : q;
#endif
}

inline int isum16(int16 v) {
	int8 a = v.lo + v.hi;
	int4 b = a.lo + a.hi;
	int2 c = b.lo + b.hi;
	return c.x + c.y;
}

// fmax16 is the largest of v's elements (fmax: a NaN never wins).
inline float fmax16(float16 v) {
	float8 a = fmax(v.lo, v.hi);
	float4 b = fmax(a.lo, a.hi);
	float2 c = fmax(b.lo, b.hi);
	return fmax(c.x, c.y);
}

// quant_v32 rounds 32 floats v0, v1 to Q8_0 as ggml's x86
// quantize_row_q8_0 does: d = f16(amax/127), q = rint(x·(127/amax)). It
// returns d and the quants in *q0, *q1; *dr gets amax/127 before the f16
// rounding and *sum Σq, which Q8_1 needs.
inline float quant_v32(float16 v0, float16 v1, char16* q0, char16* q1, float* dr, int* sum) {
	float amax = fmax16(fmax(fabs(v0), fabs(v1)));
	float d = 0.0f, id = 0.0f;
	*dr = 0.0f;
	if (amax != 0.0f) {
		*dr = div_rn(amax, 127.0f);
		d = f16_round(*dr);
		id = div_rn(127.0f, amax);
	}
	// |x·id| ≤ 127 (up to rounding, which rint undoes): no saturation.
	*q0 = convert_char16(rint(v0 * id));
	*q1 = convert_char16(rint(v1 * id));
	*sum = isum16(convert_int16(*q0) + convert_int16(*q1));
	return d;
}

// quant_block32 is quant_v32 of the 32 floats at x + off, stored to xq + off.
inline float quant_block32(global const float* x, global char* xq, ulong off, float* dr, int* sum) {
	char16 q0, q1;
	float d = quant_v32(vload16(0, x + off), vload16(0, x + off + 16), &q0, &q1, dr, sum);
	vstore16(q0, 0, xq + off);
	vstore16(q1, 0, xq + off + 16);
	return d;
}

// quantize_q8_0: one work-item per 32-element block.
// Launch: global (roundUp(K/32, L), n), local (L, 1).
kernel void quantize_q8_0(global const float* x, global char* xq, global float* xd, int K) {
	int b = get_global_id(0), i = get_global_id(1);
	int nb = K / 32;
	if (b >= nb)
		return;
	float dr;
	int sum;
	xd[(ulong)i * nb + b] = quant_block32(x, xq, (ulong)i * K + (ulong)b * 32, &dr, &sum);
}

// quantize_q8_1: quantize_q8_0 that also stores each block's sum
// s = f16((amax/127)·Σq) (dtype.Q8_1Sum), after its scale: xd holds the
// pairs (d, s), row i at 2·i·K/32. The weights with a min (Q4_1, Q5_1)
// multiply it by their min. Launch: as quantize_q8_0.
kernel void quantize_q8_1(global const float* x, global char* xq, global float* xd, int K) {
	int b = get_global_id(0), i = get_global_id(1);
	int nb = K / 32;
	if (b >= nb)
		return;
	float dr;
	int sum;
	float d = quant_block32(x, xq, (ulong)i * K + (ulong)b * 32, &dr, &sum);
	vstore2((float2)(d, f16_round(dr * (float)sum)), (ulong)i * nb + b, xd);
}

// Q8K_F must match q8kFloats in matmul.go: floats per Q8_K block in xd.
#define Q8K_F 17

// quantize_q8_k: one work-group per 256-element block
// (quantize_row_q8_K_ref): m = the element of largest magnitude, the first
// on ties, found by a reduction that keeps the smaller index on equal
// magnitudes, so that the result does not depend on the group size;
// iscale = -127/m, q = min(127, rint(iscale·x)), d = 1/iscale. Each block
// stores Q8K_F floats in xd (row i at Q8K_F·i·K/256): d, then the sums of
// its sixteen 16-element groups of quants (exact in a float), which the
// K-quants multiply by their mins.
// Launch: global (K/256·L, n), local (L, 1) with L a power of two ≤ 256;
// ra and ri hold L floats and L ints.
kernel void quantize_q8_k(global const float* x, global char* xq, global float* xd, int K,
		local float* ra, local int* ri) {
	int b = get_group_id(0), i = get_global_id(1);
	int lid = get_local_id(0), L = get_local_size(0);
	ulong off = (ulong)i * K + (ulong)b * 256;
	global const float* xb = x + off;
	// Zeros never win (strict >), so an all-zero block ends with best 0.
	float best = 0.0f;
	int at = 256;
	for (int k = lid; k < 256; k += L) {
		float v = fabs(xb[k]);
		if (v > best) {
			best = v;
			at = k;
		}
	}
	ra[lid] = best;
	ri[lid] = at;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = L / 2; s > 0; s >>= 1) {
		if (lid < s) {
			float o = ra[lid + s];
			int oi = ri[lid + s];
			if (o > ra[lid] || (o == ra[lid] && oi < ri[lid])) {
				ra[lid] = o;
				ri[lid] = oi;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	global char* q = xq + off;
	global float* dd = xd + ((ulong)i * (K / 256) + b) * Q8K_F;
	if (ra[0] == 0.0f) {
		for (int k = lid; k < 256; k += L)
			q[k] = 0;
		for (int k = lid; k < Q8K_F; k += L)
			dd[k] = 0.0f;
		return;
	}
	float iscale = div_rn(-127.0f, xb[ri[0]]);
	for (int k = lid; k < 256; k += L)
		q[k] = (char)fmin(127.0f, rint(iscale * xb[k]));
	// A group's sum recomputes its quants (the same expression, so the
	// same values) rather than wait for other work-items' stores.
	for (int g = lid; g < 16; g += L) {
		int sum = 0;
		for (int k = 16 * g; k < 16 * g + 16; k++)
			sum += (int)fmin(127.0f, rint(iscale * xb[k]));
		dd[1 + g] = (float)sum;
	}
	if (lid == 0)
		dd[0] = div_rn(1.0f, iscale);
}

// Each weight type T reads a row in "units" (QU_T elements sharing their
// stored bytes, as in weights.cl), UPB_T units to a weight block: wload_T
// decodes unit u into registers (wu_T, with its block's f16 scales as
// floats). The unit's activation quants start at XOFF_T(u) and its
// activation block is XBLK_T(u), whose XDN_T floats (the scale d; for Q8_1
// then the block sum s, for Q8_K the sixteen group sums) start at
// xd[XDN_T·XBLK_T(u)]. The K-quants and IQ4_XS split their 256-element
// blocks into units of 64 or 32 to keep the decoded unit in registers.
// The macros below take p and xp as macro arguments so that they may point
// to global or local memory. Products fit in shorts where the comments say
// so; sums are ints, exact.
//
// Every type follows ggml's x86 order ("lanes", the CPU backend's
// dotKLanes, dot32Lanes and dotQ4_0Repacked, which the kernels must
// reproduce bit for bit):
// LDOT_T(w, p, u) is the unit's share of its block's eight exact integer
// lane sums, lane l gathering, in every 32-element chunk, elements
// 4l … 4l+3 with their sub-block scales; PDOT_T(w, xp, u) its share of the
// integer min terms from the group sums at xp, in the lanes LK_T says (see
// lanes_block). HDR_T is the block's size in bytes and the offsets of its
// f16 d and min (-1: none), read by wdm.

// madd_fold is the lane sums of the products a·x: each run of four
// consecutive elements summed, so 16 elements that start a 32-element chunk
// (or its second half) give four lanes. It adds adjacent pairs first, as
// x86's pmaddwd does; PoCL compiles that to far fewer instructions than
// widening all sixteen products, which shows in Q8_0 decode. A
// sub-block scale multiplies the four sums, not the sixteen products: the
// same integers.
inline int4 madd_fold(short16 a, short16 x) {
	int8 p = convert_int8(a.even) * convert_int8(x.even) + convert_int8(a.odd) * convert_int8(x.odd);
	return p.even + p.odd;
}

// place4 puts four lane sums at lanes 0…3 (hi 0) or 4…7 (hi 1).
inline int8 place4(int4 v, int hi) {
	int4 z = (int4)0;
	return hi ? (int8)(z, v) : (int8)(v, z);
}

// lane_at is v in lane l, zeros elsewhere.
inline int8 lane_at(int v, int l) {
	return select((int8)0, (int8)v, (int8)(0, 1, 2, 3, 4, 5, 6, 7) == (int8)l);
}

// ldot32 is the lanes of 32 consecutive elements a (0…15) and b (16…31);
// each product is at most 128·127 in magnitude, which fits a short.
inline int8 ldot32(short16 a, short16 b, char16 x0, char16 x1) {
	return (int8)(madd_fold(a, convert_short16(x0)), madd_fold(b, convert_short16(x1)));
}

// wdm is the f16 d and min (0 where moff < 0) of block b of a row as floats.
inline float2 wdm(global const uchar* row, int b, int bytes, int doff, int moff) {
	global const uchar* blk = row + b * bytes;
	float d = vload_half(0, (global const half*)(blk + doff));
	return (float2)(d, moff < 0 ? 0.0f : vload_half(0, (global const half*)(blk + moff)));
}

// ---- Q4_0 × Q8_0: Σ (qw-8)·qx per 32-element block; the decoded unit is
// Q8_0's (|qw-8| ≤ 8). Its kind depends on the matrix (LK_R8 below): ggml
// repacks Q4_0 matrices whose row count M is a multiple of 8 and keeps one
// accumulator per output there; other matrices take Q5_0's lanes. Every
// kernel has M, so the kind is picked per launch with no second kernel.

#define QU_q4_0 32
#define ABLK_q4_0 32
#define XOFF_q4_0(u) ((u) * 32)
#define XBLK_q4_0(u) (u)
#define LDOT_q4_0(w, p, u) ldot32((w).a, (w).b, vload16(0, p), vload16(0, (p) + 16))
#define XDN_q4_0 1
#define UPB_q4_0 1
#define PDOT_q4_0(w, xp, u) ((int8)0)
#define HDR_q4_0 18, 0, -1
#define LK_q4_0 ((M) % 8 == 0 ? LK_R8 : LK_32)

// ---- Q8_0 × Q8_0: Σ qw·qx per 32-element block.

#define QU_q8_0 32
#define ABLK_q8_0 32
#define XOFF_q8_0(u) ((u) * 32)
#define XBLK_q8_0(u) (u)
#define LDOT_q8_0(w, p, u) ldot32((w).a, (w).b, vload16(0, p), vload16(0, (p) + 16))
#define XDN_q8_0 1
#define UPB_q8_0 1
#define PDOT_q8_0(w, xp, u) ((int8)0)
#define HDR_q8_0 34, 0, -1
#define LK_q8_0 LK_32

typedef struct {
	float d;
	short16 a, b;
} wu_q8_0;

inline wu_q8_0 wload_q8_0(global const uchar* row, int u) {
	global const uchar* blk = row + u * 34;
	wu_q8_0 w;
	w.d = vload_half(0, (global const half*)blk);
	w.a = convert_short16(vload16(0, (global const char*)(blk + 2)));
	w.b = convert_short16(vload16(0, (global const char*)(blk + 18)));
	return w;
}

// Q4_0 (above) decodes into Q8_0's unit.
typedef wu_q8_0 wu_q4_0;

inline wu_q4_0 wload_q4_0(global const uchar* row, int u) {
	global const uchar* blk = row + u * 18;
	uchar16 q = vload16(0, blk + 2);
	wu_q4_0 w;
	w.d = vload_half(0, (global const half*)blk);
	w.a = convert_short16(q & (uchar16)0xF) - (short16)8;
	w.b = convert_short16(q >> (uchar16)4) - (short16)8;
	return w;
}

// ---- Q6_K × Q8_K: per 256-element block, Σ_j sc[j]·Σ (q6-32)·q8 over its
// sixteen 16-element sub-blocks. Unit u is weights.cl's 64-element unit:
// l0 … l0+15 (l0 = 16·(u&1)) of half nh = (u>>1)&1 of super-block u/4, all
// four quarters, i.e. elements at p, p+32, p+64, p+96.

#define QU_q6_k 64
#define ABLK_q6_k 256
#define XOFF_q6_k(u) (((u) >> 2) * 256 + (((u) >> 1) & 1) * 128 + ((u) & 1) * 16)
#define XBLK_q6_k(u) ((u) >> 2)
#define LDOT_q6_k(w, p, u) \
	ldot_q6_k(w, vload16(0, p), vload16(0, (p) + 32), vload16(0, (p) + 64), vload16(0, (p) + 96), (u) & 1)
#define XDN_q6_k Q8K_F
#define UPB_q6_k 4
#define PDOT_q6_k(w, xp, u) ((int8)0)
#define HDR_q6_k 210, 208, -1
#define LK_q6_k LK_PLAIN

typedef struct {
	float d;
	short16 q1, q2, q3, q4;
	int s1, s2, s3, s4;
} wu_q6_k;

inline wu_q6_k wload_q6_k(global const uchar* row, int u) {
	global const uchar* blk = row + (u >> 2) * 210;
	int nh = (u >> 1) & 1, l0 = (u & 1) * 16;
	uchar16 qa = vload16(0, blk + nh * 64 + l0);
	uchar16 qb = vload16(0, blk + nh * 64 + 32 + l0);
	uchar16 qh = vload16(0, blk + 128 + nh * 32 + l0);
	global const char* sc = (global const char*)(blk + 192 + nh * 8 + (u & 1));
	const uchar16 m4 = (uchar16)0xF, m2 = (uchar16)3;
	wu_q6_k w;
	w.d = vload_half(0, (global const half*)(blk + 208));
	w.q1 = convert_short16((qa & m4) | ((qh & m2) << (uchar16)4)) - (short16)32;
	w.q2 = convert_short16((qb & m4) | (((qh >> (uchar16)2) & m2) << (uchar16)4)) - (short16)32;
	w.q3 = convert_short16((qa >> (uchar16)4) | (((qh >> (uchar16)4) & m2) << (uchar16)4)) - (short16)32;
	w.q4 = convert_short16((qb >> (uchar16)4) | ((qh >> (uchar16)6) << (uchar16)4)) - (short16)32;
	w.s1 = sc[0];
	w.s2 = sc[2];
	w.s3 = sc[4];
	w.s4 = sc[6];
	return w;
}

// ldot_q6_k: the unit's four 16-element rows all sit at chunk offset
// 16·hf, so they share lanes 4·hf … 4·hf+3.
inline int8 ldot_q6_k(wu_q6_k w, char16 x0, char16 x1, char16 x2, char16 x3, int hf) {
	// Each product ≤ 32·127 fits a short; scaled by an int8 sub-scale and
	// summed over four quarters it needs an int.
	int4 p = w.s1 * madd_fold(w.q1, convert_short16(x0)) + w.s2 * madd_fold(w.q2, convert_short16(x1)) +
			w.s3 * madd_fold(w.q3, convert_short16(x2)) + w.s4 * madd_fold(w.q4, convert_short16(x3));
	return place4(p, hf);
}

// ---- Q5_0 × Q8_0: Σ (q5-16)·qx per 32-element block; the decoded unit is
// Q8_0's (|q5-16| ≤ 16).

#define QU_q5_0 32
#define ABLK_q5_0 32
#define XOFF_q5_0(u) ((u) * 32)
#define XBLK_q5_0(u) (u)
#define LDOT_q5_0(w, p, u) ldot32((w).a, (w).b, vload16(0, p), vload16(0, (p) + 16))
#define XDN_q5_0 1
#define UPB_q5_0 1
#define PDOT_q5_0(w, xp, u) ((int8)0)
#define HDR_q5_0 22, 0, -1
#define LK_q5_0 LK_32

typedef wu_q8_0 wu_q5_0;

inline wu_q5_0 wload_q5_0(global const uchar* row, int u) {
	global const uchar* blk = row + u * 22;
	uchar16 q = vload16(0, blk + 6);
	wu_q5_0 w;
	w.d = vload_half(0, (global const half*)blk);
	w.a = convert_short16((q & (uchar16)0xF) | q5_hi16(blk + 2, 0)) - (short16)16;
	w.b = convert_short16((q >> (uchar16)4) | q5_hi16(blk + 2, 1)) - (short16)16;
	return w;
}

// ---- IQ4_NL × Q8_0: Σ level·qx per 32-element block (|level| ≤ 127).

#define QU_iq4_nl 32
#define ABLK_iq4_nl 32
#define XOFF_iq4_nl(u) ((u) * 32)
#define XBLK_iq4_nl(u) (u)
#define LDOT_iq4_nl(w, p, u) ldot32((w).a, (w).b, vload16(0, p), vload16(0, (p) + 16))
#define XDN_iq4_nl 1
#define UPB_iq4_nl 1
#define PDOT_iq4_nl(w, xp, u) ((int8)0)
#define HDR_iq4_nl 18, 0, -1
#define LK_iq4_nl LK_NL

typedef wu_q8_0 wu_iq4_nl;

inline wu_iq4_nl wload_iq4_nl(global const uchar* row, int u) {
	global const uchar* blk = row + u * 18;
	uchar16 q = vload16(0, blk + 2);
	wu_iq4_nl w;
	w.d = vload_half(0, (global const half*)blk);
	w.a = convert_short16(iq4nl_levels(q & (uchar16)0xF));
	w.b = convert_short16(iq4nl_levels(q >> (uchar16)4));
	return w;
}

// ---- Q4_1 × Q8_1: Σ q·qx per 32-element block with q unsigned, plus the
// min times the activation block's sum (XDN 2: d and s).

#define QU_q4_1 32
#define ABLK_q4_1 32
#define XOFF_q4_1(u) ((u) * 32)
#define XBLK_q4_1(u) (u)
#define LDOT_q4_1(w, p, u) ldot32((w).a, (w).b, vload16(0, p), vload16(0, (p) + 16))
#define XDN_q4_1 2
#define UPB_q4_1 1
#define PDOT_q4_1(w, xp, u) ((int8)0)
#define HDR_q4_1 20, 0, 2
#define LK_q4_1 LK_Q81

typedef struct {
	float d, m;
	short16 a, b;
} wu_q4_1;

inline wu_q4_1 wload_q4_1(global const uchar* row, int u) {
	global const uchar* blk = row + u * 20;
	uchar16 q = vload16(0, blk + 4);
	wu_q4_1 w;
	w.d = vload_half(0, (global const half*)blk);
	w.m = vload_half(1, (global const half*)blk);
	w.a = convert_short16(q & (uchar16)0xF);
	w.b = convert_short16(q >> (uchar16)4);
	return w;
}

// ---- Q5_1 × Q8_1: Q4_1 with five bits (q ≤ 31).

#define QU_q5_1 32
#define ABLK_q5_1 32
#define XOFF_q5_1(u) ((u) * 32)
#define XBLK_q5_1(u) (u)
#define LDOT_q5_1(w, p, u) ldot32((w).a, (w).b, vload16(0, p), vload16(0, (p) + 16))
#define XDN_q5_1 2
#define UPB_q5_1 1
#define PDOT_q5_1(w, xp, u) ((int8)0)
#define HDR_q5_1 24, 0, 2
#define LK_q5_1 LK_Q81

typedef wu_q4_1 wu_q5_1;

inline wu_q5_1 wload_q5_1(global const uchar* row, int u) {
	global const uchar* blk = row + u * 24;
	uchar16 q = vload16(0, blk + 8);
	wu_q5_1 w;
	w.d = vload_half(0, (global const half*)blk);
	w.m = vload_half(1, (global const half*)blk);
	w.a = convert_short16((q & (uchar16)0xF) | q5_hi16(blk + 4, 0));
	w.b = convert_short16((q >> (uchar16)4) | q5_hi16(blk + 4, 1));
	return w;
}

// Q2_K and Q3_K units are Q6_K's: the 16 quant bytes 32h + 16half … of
// super-block u/4 (h = (u>>1)&1, half = u&1) hold, at shifts 0, 2, 4 and 6,
// the 16-element groups p = 8h + 2j + half (j = 0…3) at offsets 0, 32, 64
// and 96 from XOFF_q6_k(u), with scales p.

// ---- Q3_K × Q8_K: Σ_p scale_p·Σ q3·qx; q3 in [-4, 3], so the decoded unit
// and its dot product are Q6_K's.

#define QU_q3_k 64
#define ABLK_q3_k 256
#define XOFF_q3_k(u) XOFF_q6_k(u)
#define XBLK_q3_k(u) ((u) >> 2)
#define LDOT_q3_k(w, p, u) LDOT_q6_k(w, p, u)
#define XDN_q3_k Q8K_F
#define UPB_q3_k 4
#define PDOT_q3_k(w, xp, u) ((int8)0)
#define HDR_q3_k 110, 108, -1
#define LK_q3_k LK_PLAIN

typedef wu_q6_k wu_q3_k;

inline wu_q3_k wload_q3_k(global const uchar* row, int u) {
	global const uchar* blk = row + (u >> 2) * 110;
	int h = (u >> 1) & 1, hf = u & 1;
	uchar16 q = vload16(0, blk + 32 + h * 32 + hf * 16);
	// A clear hmask bit subtracts 4: nh holds the complemented bits j.
	uchar16 nh = ~(vload16(0, blk + hf * 16) >> (uchar16)(4 * h));
	const uchar16 m2 = (uchar16)3, m1 = (uchar16)1;
	wu_q3_k w;
	w.d = vload_half(54, (global const half*)blk);
	w.q1 = convert_short16(q & m2) - convert_short16((nh & m1) << (uchar16)2);
	w.q2 = convert_short16((q >> (uchar16)2) & m2) - convert_short16(((nh >> (uchar16)1) & m1) << (uchar16)2);
	w.q3 = convert_short16((q >> (uchar16)4) & m2) - convert_short16(((nh >> (uchar16)2) & m1) << (uchar16)2);
	w.q4 = convert_short16(q >> (uchar16)6) - convert_short16(((nh >> (uchar16)3) & m1) << (uchar16)2);
	int p = 8 * h + hf;
	w.s1 = q3k_scale(blk + 96, p);
	w.s2 = q3k_scale(blk + 96, p + 2);
	w.s3 = q3k_scale(blk + 96, p + 4);
	w.s4 = q3k_scale(blk + 96, p + 6);
	return w;
}

// ---- Q2_K × Q8_K: Σ_p (sc_p & 15)·Σ q2·qx and Σ_p (sc_p >> 4)·Σ qx.

#define QU_q2_k 64
#define ABLK_q2_k 256
#define XOFF_q2_k(u) XOFF_q6_k(u)
#define XBLK_q2_k(u) ((u) >> 2)
#define LDOT_q2_k(w, p, u) \
	ldot_q2_k(w, vload16(0, p), vload16(0, (p) + 32), vload16(0, (p) + 64), vload16(0, (p) + 96), (u) & 1)
#define XDN_q2_k Q8K_F
#define UPB_q2_k 4
// Lane l's min term is groups 2l and 2l+1: this unit's groups g + 2j
// (g = 8h + hf) are lane 4h + j's share.
#define PDOT_q2_k(w, xp, u)                                                                          \
	place4((int4)((w).m1 * (int)(xp)[1 + (w).g], (w).m2 * (int)(xp)[3 + (w).g],                     \
				   (w).m3 * (int)(xp)[5 + (w).g], (w).m4 * (int)(xp)[7 + (w).g]),                    \
			(w).g >> 3)
#define HDR_q2_k 84, 80, 82
#define LK_q2_k LK_Q2K

typedef struct {
	float d, dmin;
	short16 q1, q2, q3, q4;
	// g is the unit's first group p: its groups are g, g+2, g+4, g+6.
	int s1, s2, s3, s4, m1, m2, m3, m4, g;
} wu_q2_k;

inline wu_q2_k wload_q2_k(global const uchar* row, int u) {
	global const uchar* blk = row + (u >> 2) * 84;
	int h = (u >> 1) & 1, hf = u & 1;
	uchar16 q = vload16(0, blk + 16 + h * 32 + hf * 16);
	global const uchar* sc = blk + 8 * h + hf;
	const uchar16 m2 = (uchar16)3;
	wu_q2_k w;
	w.d = vload_half(40, (global const half*)blk);
	w.dmin = vload_half(41, (global const half*)blk);
	w.q1 = convert_short16(q & m2);
	w.q2 = convert_short16((q >> (uchar16)2) & m2);
	w.q3 = convert_short16((q >> (uchar16)4) & m2);
	w.q4 = convert_short16(q >> (uchar16)6);
	w.s1 = sc[0] & 0xF;
	w.s2 = sc[2] & 0xF;
	w.s3 = sc[4] & 0xF;
	w.s4 = sc[6] & 0xF;
	w.m1 = sc[0] >> 4;
	w.m2 = sc[2] >> 4;
	w.m3 = sc[4] >> 4;
	w.m4 = sc[6] >> 4;
	w.g = 8 * h + hf;
	return w;
}

// ldot_q2_k is ldot_q6_k for Q2_K's unit.
inline int8 ldot_q2_k(wu_q2_k w, char16 x0, char16 x1, char16 x2, char16 x3, int hf) {
	// Products ≤ 3·127 fit a short; scaled and summed they need an int.
	int4 p = w.s1 * madd_fold(w.q1, convert_short16(x0)) + w.s2 * madd_fold(w.q2, convert_short16(x1)) +
			w.s3 * madd_fold(w.q3, convert_short16(x2)) + w.s4 * madd_fold(w.q4, convert_short16(x3));
	return place4(p, hf);
}

// ---- Q4_K × Q8_K: unit u is chunk u&3 of super-block u/4, 64 contiguous
// elements: sub-block 2c (low nibbles of the chunk's 32 bytes) and 2c+1
// (high nibbles), each with a 6-bit scale and min; Σ scale·Σ q·qx and
// Σ min·Σ qx.

#define QU_q4_k 64
#define ABLK_q4_k 256
#define XOFF_q4_k(u) ((u) * 64)
#define XBLK_q4_k(u) ((u) >> 2)
#define LDOT_q4_k(w, p, u) \
	ldot_q4_k(w, vload16(0, p), vload16(0, (p) + 16), vload16(0, (p) + 32), vload16(0, (p) + 48))
#define XDN_q4_k Q8K_F
#define UPB_q4_k 4
// MSUM_q4_k is the unit's Σ min·x, ggml's P4[c] for chunk c: Q4_K keeps it
// in lane c (a four-lane accumulator), Q5_K all four in lane 0 (a scalar).
#define MSUM_q4_k(w, xp)                                                                  \
	((w).m1 * ((int)(xp)[1 + (w).g] + (int)(xp)[2 + (w).g]) +                              \
			(w).m2 * ((int)(xp)[3 + (w).g] + (int)(xp)[4 + (w).g]))
#define PDOT_q4_k(w, xp, u) lane_at(MSUM_q4_k(w, xp), (w).g >> 2)
#define HDR_q4_k 144, 0, 2
#define LK_q4_k LK_Q4K

typedef struct {
	float d, dmin;
	short16 q1, q2, q3, q4;
	// g is the unit's first group: sub-block 2c is groups g and g+1.
	int s1, s2, m1, m2, g;
} wu_q4_k;

inline wu_q4_k wload_q4_k(global const uchar* row, int u) {
	global const uchar* blk = row + (u >> 2) * 144;
	int c = u & 3;
	uchar16 qa = vload16(0, blk + 16 + c * 32), qb = vload16(0, blk + 32 + c * 32);
	const uchar16 m4 = (uchar16)0xF;
	wu_q4_k w;
	w.d = vload_half(0, (global const half*)blk);
	w.dmin = vload_half(1, (global const half*)blk);
	w.q1 = convert_short16(qa & m4);
	w.q2 = convert_short16(qb & m4);
	w.q3 = convert_short16(qa >> (uchar16)4);
	w.q4 = convert_short16(qb >> (uchar16)4);
	int2 a = k4_scale_min(blk + 4, 2 * c), b = k4_scale_min(blk + 4, 2 * c + 1);
	w.s1 = a.x;
	w.m1 = a.y;
	w.s2 = b.x;
	w.m2 = b.y;
	w.g = 4 * c;
	return w;
}

// ldot_q4_k: the unit is two 32-element chunks (sub-blocks 2c: q1, q2 and
// 2c+1: q3, q4), so q1 and q3 share lanes 0…3, q2 and q4 lanes 4…7.
inline int8 ldot_q4_k(wu_q4_k w, char16 x0, char16 x1, char16 x2, char16 x3) {
	// Products ≤ 31·127 (Q5_K) fit a short, scaled an int.
	int4 lo = w.s1 * madd_fold(w.q1, convert_short16(x0)) + w.s2 * madd_fold(w.q3, convert_short16(x2));
	int4 hi = w.s1 * madd_fold(w.q2, convert_short16(x1)) + w.s2 * madd_fold(w.q4, convert_short16(x3));
	return (int8)(lo, hi);
}

// ---- Q5_K × Q8_K: Q4_K with a fifth bit, bit s of qh[l] for byte l of
// sub-block s.

#define QU_q5_k 64
#define ABLK_q5_k 256
#define XOFF_q5_k(u) ((u) * 64)
#define XBLK_q5_k(u) ((u) >> 2)
#define LDOT_q5_k(w, p, u) LDOT_q4_k(w, p, u)
#define XDN_q5_k Q8K_F
#define UPB_q5_k 4
#define PDOT_q5_k(w, xp, u) lane_at(MSUM_q4_k(w, xp), 0)
#define HDR_q5_k 176, 0, 2
#define LK_q5_k LK_Q5K

typedef wu_q4_k wu_q5_k;

inline wu_q5_k wload_q5_k(global const uchar* row, int u) {
	global const uchar* blk = row + (u >> 2) * 176;
	int c = u & 3;
	uchar16 qa = vload16(0, blk + 48 + c * 32), qb = vload16(0, blk + 64 + c * 32);
	uchar16 ha = vload16(0, blk + 16) >> (uchar16)(2 * c), hb = vload16(0, blk + 32) >> (uchar16)(2 * c);
	const uchar16 m4 = (uchar16)0xF, one = (uchar16)1, s4 = (uchar16)4;
	wu_q5_k w;
	w.d = vload_half(0, (global const half*)blk);
	w.dmin = vload_half(1, (global const half*)blk);
	w.q1 = convert_short16((qa & m4) | ((ha & one) << s4));
	w.q2 = convert_short16((qb & m4) | ((hb & one) << s4));
	w.q3 = convert_short16((qa >> s4) | (((ha >> one) & one) << s4));
	w.q4 = convert_short16((qb >> s4) | (((hb >> one) & one) << s4));
	int2 a = k4_scale_min(blk + 4, 2 * c), b = k4_scale_min(blk + 4, 2 * c + 1);
	w.s1 = a.x;
	w.m1 = a.y;
	w.s2 = b.x;
	w.m2 = b.y;
	w.g = 4 * c;
	return w;
}

// ---- IQ4_XS × Q8_K: unit u is sub-block u&7 of super-block u/8 (32
// elements, IQ4_NL levels, low nibbles first); Σ scale·Σ level·qx.

#define QU_iq4_xs 32
#define ABLK_iq4_xs 256
#define XOFF_iq4_xs(u) ((u) * 32)
#define XBLK_iq4_xs(u) ((u) >> 3)
#define LDOT_iq4_xs(w, p, u) ((w).ls * ldot32((w).a, (w).b, vload16(0, p), vload16(0, (p) + 16)))
#define XDN_iq4_xs Q8K_F
#define UPB_iq4_xs 8
#define PDOT_iq4_xs(w, xp, u) ((int8)0)
#define HDR_iq4_xs 136, 0, -1
#define LK_iq4_xs LK_PLAIN

typedef struct {
	float d;
	short16 a, b;
	int ls;
} wu_iq4_xs;

inline wu_iq4_xs wload_iq4_xs(global const uchar* row, int u) {
	global const uchar* blk = row + (u >> 3) * 136;
	int ib = u & 7;
	uchar16 q = vload16(0, blk + 8 + ib * 16);
	wu_iq4_xs w;
	w.d = vload_half(0, (global const half*)blk);
	w.a = convert_short16(iq4nl_levels(q & (uchar16)0xF));
	w.b = convert_short16(iq4nl_levels(q >> (uchar16)4));
	w.ls = iq4xs_scale(blk, ib);
	return w;
}

// The kernels mirror matmul.cl's mv_T and mmc_T (the same launch shapes and
// work split), reading activations from xq/xd; a GPU's prompts take
// gemm.cl's mmt_T.
//
// mvq_T: R rows × S lanes per work-group.
// Launch: global (ceil(M/R)·R·S), local (R·S); li holds
// 16·R·max(S, UPB_T) ints (which is more than R·S float2s).
//
// mmcq_T: MM_BN tokens per work-item, reading the token tile from global
// memory (see mmc_T). Launch: global (roundUp(M, L), ceil(n/MM_BN)),
// local (L, 1).

#define BW(T) (QU_##T * UPB_##T)

// The operands of the block macro in mmcq_T: X(T, t, u) is the address of
// token t's quants of unit u, XP(T, t) that of its block's activation
// floats.
#define MMQ_GX(T, t, u) (xb + (ulong)(t) * K + XOFF_##T(u))
#define MMQ_GXP(T, t) (db + ((t) * nb + xbk) * XDN_##T)

// The prefill kernel's loop over a row's blocks, shared by every type:
// BLOCK(T, b, tn, X, XP) accumulates block b for tokens t < tn (a constant
// MM_BN lets the compiler unroll) into acc (ACC[MM_BN], set by INIT),
// and VALUE(T, acc[t]) is token t's dot product.
#define MMQ_KERNELS(T, ACC, INIT, BLOCK, VALUE)                                                \
	kernel void mmcq_##T(global const uchar* w, ulong rowBytes, global const char* xq,         \
			global const float* xd, global float* dst, int K, int M, int n) {                  \
		int o = get_global_id(0);                                                              \
		if (o >= M)                                                                            \
			return;                                                                            \
		int i0 = get_group_id(1) * MM_BN;                                                      \
		int nt = min(MM_BN, n - i0);                                                           \
		const int nb = K / ABLK_##T;                                                           \
		global const uchar* row = w + (ulong)o * rowBytes;                                     \
		global const char* xb = xq + (ulong)i0 * K;                                            \
		global const float* db = xd + (ulong)i0 * nb * XDN_##T;                                \
		ACC acc[MM_BN];                                                                        \
		for (int t = 0; t < MM_BN; t++)                                                        \
			INIT(acc[t]);                                                                      \
		int blocks = K / BW(T);                                                                \
		if (nt == MM_BN) {                                                                     \
			for (int b = 0; b < blocks; b++) {                                                 \
				int xbk = XBLK_##T(b * UPB_##T);                                               \
				BLOCK(T, b, MM_BN, MMQ_GX, MMQ_GXP)                                            \
			}                                                                                  \
		} else {                                                                               \
			for (int b = 0; b < blocks; b++) {                                                 \
				int xbk = XBLK_##T(b * UPB_##T);                                               \
				BLOCK(T, b, nt, MMQ_GX, MMQ_GXP)                                               \
			}                                                                                  \
		}                                                                                      \
		for (int t = 0; t < nt; t++)                                                           \
			dst[(ulong)(i0 + t) * M + o] = VALUE(T, acc[t]);                                   \
	}

// X1(T, XD, b) is activation block b's second float (Q8_1's sum), or 0.
#define X1(T, XD, b) (XDN_##T > 1 ? (XD)[(b) * XDN_##T + 1] : 0.0f)

// mvq_T: LANES_MV_ROW of R rows × S lanes per
// work-group, activations from xq/xd.
#define DEFINE_MVQ_KERNEL(T, ROW)                                                              \
	kernel void mvq_##T(global const uchar* w, ulong rowBytes, global const char* xq,          \
			global const float* xd, global float* dst, int K, int M, int S, local int* li) {   \
		int lid = get_local_id(0);                                                             \
		/* Dimension 1 is the token: MatMulDecode runs each row as a lone one. */             \
		int tok = get_group_id(1);                                                             \
		xq += (ulong)tok * K;                                                                  \
		xd += (ulong)tok * (K / ABLK_##T) * XDN_##T;                                           \
		dst += (ulong)tok * M;                                                                 \
		int r = lid / S, lane = lid - r * S;                                                   \
		int o = get_group_id(0) * (get_local_size(0) / S) + r;                                 \
		global const uchar* row = w + (ulong)min(o, M - 1) * rowBytes;                         \
		float v;                                                                               \
		ROW(T, row, xq, xd, v)                                                                 \
		if (lane == 0 && o < M)                                                                \
			dst[o] = v;                                                                        \
	}

// ---- ggml's x86 lanes (see LDOT_T). A row's dot product
// keeps eight float lanes; block by block, in order, each lane adds its
// exact integer sum L times d = dx·dw with one fused multiply-add (OpenCL's
// fma is correctly rounded, as the CPU backend's fmaf), and the lanes are
// reduced as ggml's hsum_float_8. The mins, per LK_T:
//   LK_Q2K  before a block's lanes, each lane adds its min term P times
//           dmin = -dx·mw (fma);
//   LK_Q4K  a four-lane accumulator m adds P (lanes 0…3) times dmin, and
//           is reduced as (m0+m2) + (m1+m3) and added after the lanes;
//   LK_Q5K  a scalar m.x adds P (lane 0) times dmin, added at the end;
//   LK_Q81  (Q4_1, Q5_1) a scalar m.x adds mw times the Q8_1 sum s;
//   LK_32   (Q5_0, Q8_0, and Q4_0 where M % 8 != 0) none, but m.x (zero)
//           is still added, as in ggml's Q5_0 (for Q8_0, whose lanes are
//           never -0, adding +0 changes nothing);
//   LK_NL   (IQ4_NL) LK_32, except that decode alternates two accumulators
//           between even and odd blocks and takes an odd last block as one
//           scalar fma of its whole integer sum (ggml_vec_dot_iq4_nl_q8_0);
//   LK_PLAIN (Q3_K, Q6_K, IQ4_XS) none;
//   LK_R8   (Q4_0 matrices of M % 8 == 0 rows, ggml's 8×8 repacked gemv
//           and gemm) no lanes at all: one accumulator m.x adds each
//           block's whole integer sum times d (fma), and is the result.
// No other operation may be contracted: the products d and dmin are rounded
// before their fma.

#define LK_PLAIN 0
#define LK_Q2K 1
#define LK_Q4K 2
#define LK_Q5K 3
#define LK_Q81 4
#define LK_32 5
#define LK_NL 6
#define LK_R8 7

// LK_PF is a kind as prefill runs it (llamafile's tinyBLAS for IQ4_NL: one
// accumulator).
#define LK_PF(k) ((k) == LK_NL ? LK_32 : (k))

typedef struct {
	float8 a;
	float4 m;
} lacc;

#define LACC_INIT(s) ((s).a = 0.0f, (s).m = 0.0f)
#define LANES_VALUE(T, s) lanes_value(LK_PF(LK_##T), s)

// lanes_block adds one block, with lane sums L and min terms P, to s: xdv
// is the activation block's scale, xs its Q8_1 sum (LK_Q81), dm the
// weight block's f16 d and min.
inline void lanes_block(int kind, lacc* s, int8 L, int8 P, float xdv, float xs, float2 dm) {
#pragma OPENCL FP_CONTRACT OFF
	float d = xdv * dm.x, dmin = -xdv * dm.y;
	if (kind == LK_Q2K)
		s->a = fma((float8)dmin, convert_float8(P), s->a);
	else if (kind == LK_Q4K)
		s->m = fma((float4)dmin, convert_float4(P.lo), s->m);
	else if (kind == LK_Q5K)
		s->m.x = fma(dmin, (float)P.s0, s->m.x);
	else if (kind == LK_Q81)
		s->m.x = fma(dm.y, xs, s->m.x);
	if (kind == LK_R8) {
		int4 l4 = L.lo + L.hi;
		int2 l2 = l4.lo + l4.hi;
		s->m.x = fma(d, (float)(l2.x + l2.y), s->m.x);
		return;
	}
	s->a = fma((float8)d, convert_float8(L), s->a);
}

// lanes_value is the dot product of s: hsum_float_8 of the lanes, then the
// min accumulator.
inline float lanes_value(int kind, lacc s) {
#pragma OPENCL FP_CONTRACT OFF
	if (kind == LK_R8)
		return s.m.x;
	float4 r = s.a.lo + s.a.hi;
	float v = (r.s0 + r.s2) + (r.s1 + r.s3);
	if (kind == LK_Q4K)
		v += (s.m.s0 + s.m.s2) + (s.m.s1 + s.m.s3);
	else if (kind != LK_PLAIN && kind != LK_Q2K)
		v += s.m.x;
	return v;
}

// lanes_mv_block is lanes_block for block b of nb in decode, where IQ4_NL
// pairs its blocks: odd blocks go to s2.
// x0 and x1 are the activation block's first two floats (x1: Q8_1's sum).
inline void lanes_mv_block(int kind, lacc* s, lacc* s2, int b, int nb, int8 L, int8 P,
		float x0, float x1, float2 dm) {
#pragma OPENCL FP_CONTRACT OFF
	if (kind != LK_NL) {
		lanes_block(kind, s, L, P, x0, kind == LK_Q81 ? x1 : 0.0f, dm);
		return;
	}
	if ((nb & 1) && b == nb - 1) {
		// Its d, integer sum and a flag wait for lanes_mv_value (NL_TAIL).
		int4 l4 = L.lo + L.hi;
		int2 l2 = l4.lo + l4.hi;
		s->m.x = x0 * dm.x;
		s->m.y = (float)(l2.x + l2.y);
		s->m.z = 1.0f;
		return;
	}
	lanes_block(LK_32, (b & 1) ? s2 : s, L, P, x0, 0.0f, dm);
}

// lanes_mv_value is lanes_value in decode: the 32-element types add the
// second accumulator (IQ4_NL's odd blocks, zero for the others) first.
inline float lanes_mv_value(int kind, lacc s, lacc s2) {
#pragma OPENCL FP_CONTRACT OFF
	if (kind == LK_NL && s.m.z != 0.0f) {
		// NL_TAIL: an odd last block (d in m.x, its integer sum in m.y) is
		// added after the reduction by one fma, as gcc contracts ggml's
		// scalar sumf += d·s.
		s.a += s2.a;
		float4 r = s.a.lo + s.a.hi;
		return fma(s.m.x, s.m.y, (r.s0 + r.s2) + (r.s1 + r.s3));
	}
	if (kind >= LK_Q81)
		s.a += s2.a;
	return lanes_value(LK_PF(kind), s);
}

// mvq_T's GPU path keeps LREC ints per unit in local memory: its lane sums
// (0…7) and min terms (8…15); the first unit of a block adds the block's
// scales (lanes_scales) at 16…18.
#define LREC 20

// lanes_scales is a block's d = dx·dw and, per kind, dmin = -dx·mw or (LK_Q81)
// mw and the Q8_1 sum s: x0 and x1 are the activation block's first two
// floats (its scale and, for Q8_1, its sum), dm the weight block's f16 d
// and min.
inline float4 lanes_scales(int kind, float x0, float x1, float2 dm) {
#pragma OPENCL FP_CONTRACT OFF
	if (kind == LK_Q81)
		return (float4)(x0 * dm.x, dm.y, x1, 0.0f);
	return (float4)(x0 * dm.x, -x0 * dm.y, 0.0f, 0.0f);
}

// lanes_chain is one lane l of mvq_T's GPU path: it adds n blocks from b0 on
// (of nb in the row), whose units' records (LREC ints each, upb to a block)
// start at e, to the lane's accumulators: a (a2 for IQ4_NL's odd blocks),
// am (lane l of LK_Q4K's m) and, for l = 0, sm (m.x).
inline void lanes_chain(int kind, int upb, local const int* e, int l, int b0, int n, int nb,
		float* a, float* a2, float* am, float* sm) {
#pragma OPENCL FP_CONTRACT OFF
	for (int k = 0; k < n; k++, e += LREC * upb) {
		int b = b0 + k, L = 0, P = 0;
		for (int i = 0; i < upb; i++) {
			L += e[LREC * i + l];
			// Only the types with min terms store them.
			if (kind == LK_Q2K || kind == LK_Q4K || kind == LK_Q5K)
				P += e[LREC * i + 8 + l];
		}
		float d = as_float(e[16]), m = as_float(e[17]);
		if (kind == LK_Q2K) {
			*a = fma(m, (float)P, *a);
		} else if (kind == LK_Q4K) {
			if (l < 4)
				*am = fma(m, (float)P, *am);
		} else if (kind == LK_Q5K) {
			if (l == 0)
				*sm = fma(m, (float)P, *sm);
		} else if (kind == LK_Q81) {
			if (l == 0)
				*sm = fma(m, as_float(e[18]), *sm);
		} else if (kind == LK_R8) {
			// The block's whole sum, in lane 0's chain.
			if (l == 0) {
				int t = 0;
				for (int i = 0; i < upb; i++)
					for (int j = 0; j < 8; j++)
						t += e[LREC * i + j];
				*sm = fma(d, (float)t, *sm);
			}
			continue;
		} else if (kind == LK_NL) {
			if ((nb & 1) && b == nb - 1) {
				// NL_TAIL: lane 0 keeps d (m.x), lane 1 the integer sum
				// (m.y), lane 2 the flag (m.z).
				if (l == 0) {
					*sm = d;
				} else if (l == 1) {
					int t = 0;
					for (int i = 0; i < 8; i++)
						t += e[i];
					*am = (float)t;
				} else if (l == 2) {
					*am = 1.0f;
				}
				continue;
			}
			if (b & 1) {
				*a2 = fma(d, (float)L, *a2);
				continue;
			}
		}
		*a = fma(d, (float)L, *a);
	}
}

#define LANES_BLOCK(T, b, tn, X, XP)                                                           \
	{                                                                                          \
		int8 ls[MM_BN], ps[MM_BN];                                                             \
		_Pragma("unroll") for (int t = 0; t < MM_BN; t++) {                                    \
			ls[t] = 0;                                                                         \
			ps[t] = 0;                                                                         \
		}                                                                                      \
		for (int u = (b) * UPB_##T; u < ((b) + 1) * UPB_##T; u++) {                            \
			wu_##T wu = wload_##T(row, u);                                                     \
			_Pragma("unroll") for (int t = 0; t < MM_BN; t++) if (t < tn) {                    \
				ls[t] += LDOT_##T(wu, X(T, t, u), u);                                           \
				ps[t] += PDOT_##T(wu, XP(T, t), u);                                             \
			}                                                                                  \
		}                                                                                      \
		float2 dm = wdm(row, b, HDR_##T);                                                      \
		_Pragma("unroll") for (int t = 0; t < MM_BN; t++) if (t < tn)                          \
			lanes_block(LK_PF(LK_##T), &acc[t], ls[t], ps[t], XP(T, t)[0],                       \
					LK_##T == LK_Q81 ? XP(T, t)[1] : 0.0f, dm);                                \
	}

// LANES_MV_ROW(T, row, XQ, XD, out) sets out to the dot product of a
// matrix row (at row, K elements of type T) with one activation row whose
// quants and floats are at XQ and XD (global or local memory), for the
// lanes types; on a GPU (S > 1) only in lane 0. A CPU device (S = 1) runs
// the row's blocks in order in one work-item. On a GPU the S work-items of
// a row compute the integer lane sums of a chunk of max(S, UPB_T) units at
// once (one unit each: the row's weights are read in parallel, coalesced)
// into local memory; then eight of them, one per lane, run the chunk's
// short chain of fused multiply-adds (the only sequential part, one per
// block); lane 0 reduces the lanes at the end. Every work-item of the group
// must run it (barriers), with K, M (the matrix's rows, which decide
// LK_q4_0), S, lane, r (the row's index in the group) and li (16·R·max(S,
// UPB_T) ints of local memory, R rows to a group) in scope.
#define LANES_MV_ROW(T, row, XQ, XD, out)                                                      \
	{                                                                                          \
		const int U = K / QU_##T, nb = U / UPB_##T;                                            \
		if (S == 1) {                                                                          \
			/* Accumulators of this branch only: PoCL keeps what lives across */                \
			/* the other branch's barriers in memory, one store per block. */                    \
			lacc c, c2;                                                                        \
			LACC_INIT(c);                                                                      \
			LACC_INIT(c2);                                                                     \
			for (int b = 0; b < nb; b++) {                                                     \
				int8 L = 0, P = 0;                                                             \
				for (int u = b * UPB_##T; u < (b + 1) * UPB_##T; u++) {                        \
					wu_##T wu = wload_##T(row, u);                                             \
					L += LDOT_##T(wu, (XQ) + XOFF_##T(u), u);                                  \
					P += PDOT_##T(wu, (XD) + b * XDN_##T, u);                                  \
				}                                                                              \
				lanes_mv_block(LK_##T, &c, &c2, b, nb, L, P, (XD)[b * XDN_##T], X1(T, XD, b),  \
						wdm(row, b, HDR_##T));                                                 \
			}                                                                                  \
			out = lanes_mv_value(LK_##T, c, c2);                                               \
		} else {                                                                               \
			lacc s, s2;                                                                        \
			LACC_INIT(s);                                                                      \
			LACC_INIT(s2);                                                                     \
			const int CU = max(S, UPB_##T), CB = CU / UPB_##T;                                 \
			local int* my = li + r * CU * LREC;                                                \
			float la[8], la2[8], lam[8], lsm = 0.0f;                                               \
			_Pragma("unroll") for (int j = 0; j < 8; j++)                                      \
				la[j] = la2[j] = lam[j] = 0.0f;                                                   \
			for (int c0 = 0; c0 < U; c0 += CU) {                                               \
				for (int i = lane; i < CU && c0 + i < U; i += S) {                             \
					int u = c0 + i, xb = XBLK_##T(u);                                          \
					local int* e = my + LREC * i;                                              \
					wu_##T wu = wload_##T(row, u);                                             \
					vstore8(LDOT_##T(wu, (XQ) + XOFF_##T(u), u), 0, e);                        \
					if (LK_##T == LK_Q2K || LK_##T == LK_Q4K || LK_##T == LK_Q5K)              \
						vstore8(PDOT_##T(wu, (XD) + xb * XDN_##T, u), 0, e + 8);               \
					if (u % UPB_##T == 0)                                                      \
						vstore3(as_int3(lanes_scales(LK_##T, (XD)[xb * XDN_##T], X1(T, XD, xb), \
											   wdm(row, u / UPB_##T, HDR_##T))                 \
											   .xyz),                                          \
								0, e + 16);                                                    \
				}                                                                              \
				barrier(CLK_LOCAL_MEM_FENCE);                                                  \
				int b0 = c0 / UPB_##T;                                                         \
				/* Work-item lane runs lanes lane, lane + S, … (S < 8 for short rows). An */  \
				/* if (lane < 8) for S ≥ 8 miscompiled on PoCL 3.1: every work-item then */   \
				/* passed the final if. */                                                     \
				for (int j = 0; lane + j * S < 8; j++)                                         \
					lanes_chain(LK_##T, UPB_##T, my, lane + j * S, b0, min(CB, nb - b0), nb,   \
							&la[j], &la2[j], &lam[j], &lsm);                                        \
				barrier(CLK_LOCAL_MEM_FENCE);                                                  \
			}                                                                                  \
			/* my (≥ 2·LREC ints, as CU ≥ 2) takes the accumulators la, la2, lam, lsm. */       \
			for (int j = 0; lane + j * S < 8; j++) {                                           \
				int l = lane + j * S;                                                          \
				my[l] = as_int(la[j]);                                                          \
				my[8 + l] = as_int(la2[j]);                                                     \
				if (l < 4)                                                                     \
					my[16 + l] = as_int(lam[j]);                                                \
			}                                                                                  \
			if (lane == 0)                                                                     \
				my[20] = as_int(lsm);                                                           \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
			out = 0.0f;                                                                        \
			if (lane == 0) {                                                                   \
				s.a = as_float8(vload8(0, my));                                                \
				s2.a = as_float8(vload8(1, my));                                               \
				s.m = as_float4(vload4(4, my));                                                \
				s.m.x = LK_##T == LK_Q4K ? s.m.x : as_float(my[20]);                           \
				out = lanes_mv_value(LK_##T, s, s2);                                           \
			}                                                                                  \
			/* The next row's records overwrite my. */                                         \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
		}                                                                                      \
	}

#define DEFINE_LANES_MATMUL_KERNELS(T)                                                         \
	DEFINE_MVQ_KERNEL(T, LANES_MV_ROW)                                                         \
	MMQ_KERNELS(T, lacc, LACC_INIT, LANES_BLOCK, LANES_VALUE)

DEFINE_LANES_MATMUL_KERNELS(q8_0)
DEFINE_LANES_MATMUL_KERNELS(q4_0)
DEFINE_LANES_MATMUL_KERNELS(q6_k)
DEFINE_LANES_MATMUL_KERNELS(q4_1)
DEFINE_LANES_MATMUL_KERNELS(q5_0)
DEFINE_LANES_MATMUL_KERNELS(q5_1)
DEFINE_LANES_MATMUL_KERNELS(q2_k)
DEFINE_LANES_MATMUL_KERNELS(q3_k)
DEFINE_LANES_MATMUL_KERNELS(q4_k)
DEFINE_LANES_MATMUL_KERNELS(q5_k)
DEFINE_LANES_MATMUL_KERNELS(iq4_nl)
DEFINE_LANES_MATMUL_KERNELS(iq4_xs)
