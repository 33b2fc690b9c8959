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
	return fma(r, 1.0f / b, q);
#endif
}

// quantize_q8_0: one work-item per 32-element block (ggml's x86
// quantize_row_q8_0): d = f16(amax/127), q = rint(x·(127/amax)).
// Launch: global (roundUp(K/32, L), n), local (L, 1).
kernel void quantize_q8_0(global const float* x, global char* xq, global float* xd, int K) {
	int b = get_global_id(0), i = get_global_id(1);
	int nb = K / 32;
	if (b >= nb)
		return;
	ulong off = (ulong)i * K + (ulong)b * 32;
	float16 v0 = vload16(0, x + off), v1 = vload16(0, x + off + 16);
	float16 a = fmax(fabs(v0), fabs(v1));
	float8 a8 = fmax(a.lo, a.hi);
	float4 a4 = fmax(a8.lo, a8.hi);
	float2 a2 = fmax(a4.lo, a4.hi);
	float amax = fmax(a2.x, a2.y);
	float d = 0.0f, id = 0.0f;
	if (amax != 0.0f) {
		d = f16_round(div_rn(amax, 127.0f));
		id = div_rn(127.0f, amax);
	}
	// |x·id| ≤ 127 (up to rounding, which rint undoes): no saturation.
	vstore16(convert_char16(rint(v0 * id)), 0, xq + off);
	vstore16(convert_char16(rint(v1 * id)), 0, xq + off + 16);
	xd[(ulong)i * nb + b] = d;
}

// quantize_q8_k: one work-group per 256-element block
// (quantize_row_q8_K_ref): m = the element of largest magnitude, the first
// on ties, found by a reduction that keeps the smaller index on equal
// magnitudes, so that the result does not depend on the group size;
// iscale = -127/m, q = min(127, rint(iscale·x)), d = 1/iscale.
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
	if (ra[0] == 0.0f) {
		for (int k = lid; k < 256; k += L)
			q[k] = 0;
		if (lid == 0)
			xd[(ulong)i * (K / 256) + b] = 0.0f;
		return;
	}
	float iscale = div_rn(-127.0f, xb[ri[0]]);
	for (int k = lid; k < 256; k += L)
		q[k] = (char)fmin(127.0f, rint(iscale * xb[k]));
	if (lid == 0)
		xd[(ulong)i * (K / 256) + b] = div_rn(1.0f, iscale);
}

inline int isum16(int16 v) {
	int8 a = v.lo + v.hi;
	int4 b = a.lo + a.hi;
	int2 c = b.lo + b.hi;
	return c.x + c.y;
}

// Each weight type T reads a row in "units" (QU_T elements sharing their
// stored bytes, as in weights.cl): wload_T decodes unit u into registers
// (wu_T, with its f16 scale d as float) and IDOT_T(w, p) is its exact
// integer dot product with the activation quants at p, which points at the
// unit's first element (XOFF_T(u)); the unit's activation scale is
// xd[XBLK_T(u)]. IDOT_T is a macro so that p may be global or local.
// Products fit in shorts where the comments say so; sums are ints.

// ---- Q4_0 × Q8_0: Σ (qw-8)·qx per 32-element block.

#define QU_q4_0 32
#define ABLK_q4_0 32
#define XOFF_q4_0(u) ((u) * 32)
#define XBLK_q4_0(u) (u)
#define IDOT_q4_0(w, p) idot_q4_0(w, vload16(0, p), vload16(0, (p) + 16))

typedef struct {
	float d;
	short16 lo, hi;
} wu_q4_0;

inline wu_q4_0 wload_q4_0(global const uchar* row, int u) {
	global const uchar* blk = row + u * 18;
	uchar16 q = vload16(0, blk + 2);
	wu_q4_0 w;
	w.d = vload_half(0, (global const half*)blk);
	w.lo = convert_short16(q & (uchar16)0xF) - (short16)8;
	w.hi = convert_short16(q >> (uchar16)4) - (short16)8;
	return w;
}

inline int idot_q4_0(wu_q4_0 w, char16 x0, char16 x1) {
	// The block sum is at most 32·8·127: shorts hold it all the way.
	short16 p = w.lo * convert_short16(x0) + w.hi * convert_short16(x1);
	short8 a = p.lo + p.hi;
	short4 b = a.lo + a.hi;
	short2 c = b.lo + b.hi;
	return (int)c.x + (int)c.y;
}

// ---- Q8_0 × Q8_0: Σ qw·qx per 32-element block.

#define QU_q8_0 32
#define ABLK_q8_0 32
#define XOFF_q8_0(u) ((u) * 32)
#define XBLK_q8_0(u) (u)
#define IDOT_q8_0(w, p) idot_q8_0(w, vload16(0, p), vload16(0, (p) + 16))

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

inline int idot_q8_0(wu_q8_0 w, char16 x0, char16 x1) {
	// A product is at most 128·127 and the sum of two fits a short; the
	// block sum needs an int.
	short16 pa = w.a * convert_short16(x0), pb = w.b * convert_short16(x1);
	int8 s = convert_int8(pa.lo + pa.hi) + convert_int8(pb.lo + pb.hi);
	int4 t = s.lo + s.hi;
	int2 u = t.lo + t.hi;
	return u.x + u.y;
}

// ---- Q6_K × Q8_K: per 256-element block, Σ_j sc[j]·Σ (q6-32)·q8 over its
// sixteen 16-element sub-blocks. Unit u is weights.cl's 64-element unit:
// l0 … l0+15 (l0 = 16·(u&1)) of half nh = (u>>1)&1 of super-block u/4, all
// four quarters, i.e. elements at p, p+32, p+64, p+96.

#define QU_q6_k 64
#define ABLK_q6_k 256
#define XOFF_q6_k(u) (((u) >> 2) * 256 + (((u) >> 1) & 1) * 128 + ((u) & 1) * 16)
#define XBLK_q6_k(u) ((u) >> 2)
#define IDOT_q6_k(w, p) \
	idot_q6_k(w, vload16(0, p), vload16(0, (p) + 32), vload16(0, (p) + 64), vload16(0, (p) + 96))

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

inline int idot_q6_k(wu_q6_k w, char16 x0, char16 x1, char16 x2, char16 x3) {
	// Each product ≤ 32·127 fits a short; scaled by an int8 sub-scale and
	// summed over four quarters it needs an int.
	int16 p = w.s1 * convert_int16(w.q1 * convert_short16(x0)) + w.s2 * convert_int16(w.q2 * convert_short16(x1)) +
			w.s3 * convert_int16(w.q3 * convert_short16(x2)) + w.s4 * convert_int16(w.q4 * convert_short16(x3));
	return isum16(p);
}

// The kernels mirror matmul.cl's mv_T, mm_T and mmc_T (the same launch
// shapes and work split), reading activations from xq/xd:
//
// mvq_T: R rows × S lanes per work-group, lanes stride the units of a row.
// Launch: global (ceil(M/R)·R·S), local (R·S); red holds R·S floats.
//
// mmq_T: MM_BN tokens × L rows per work-group; each chunk of MMQ_KC
// activation columns (whole Q8_K blocks) of the token tile is staged in
// local memory, quants as ints and scales as floats.
// Launch: global (roundUp(M, L), ceil(n/MM_BN)), local (L, 1); xs holds
// MM_BN·MMQ_KC/4 ints, ds MM_BN·MMQ_KC/32 floats.
//
// mmcq_T: mmq_T for CPU devices, reading the token tile from global memory
// (see mmc_T). Launch: global (roundUp(M, L), ceil(n/MM_BN)), local (L, 1).

#define MMQ_KC 256

#define DEFINE_QUANT_MATMUL_KERNELS(T)                                                         \
	kernel void mvq_##T(global const uchar* w, ulong rowBytes, global const char* xq,          \
			global const float* xd, global float* dst, int K, int M, int S, local float* red) { \
		int lid = get_local_id(0);                                                             \
		int r = lid / S, lane = lid - r * S;                                                   \
		int o = get_group_id(0) * (get_local_size(0) / S) + r;                                 \
		global const uchar* row = w + (ulong)min(o, M - 1) * rowBytes;                         \
		float acc = 0.0f;                                                                      \
		int units = K / QU_##T;                                                                \
		for (int u = lane; u < units; u += S) {                                                \
			wu_##T wu = wload_##T(row, u);                                                     \
			int s = IDOT_##T(wu, xq + XOFF_##T(u));                                            \
			acc += (wu.d * xd[XBLK_##T(u)]) * (float)s;                                        \
		}                                                                                      \
		acc = seg_sum(red, lid, lane, S, acc); \
		if (lane == 0 && o < M) \
			dst[o] = acc; \
	}                                                                                          \
	kernel void mmq_##T(global const uchar* w, ulong rowBytes, global const char* xq,          \
			global const float* xd, global float* dst, int K, int M, int n, local int* xs,     \
			local float* ds) {                                                                 \
		int lid = get_local_id(0), L = get_local_size(0);                                      \
		int o = get_global_id(0);                                                              \
		int i0 = get_group_id(1) * MM_BN;                                                      \
		int nt = min(MM_BN, n - i0);                                                           \
		global const uchar* row = w + (ulong)min(o, M - 1) * rowBytes;                         \
		local const char* xc = (local const char*)xs;                                          \
		const int nb = K / ABLK_##T, cb = MMQ_KC / ABLK_##T;                                   \
		float acc[MM_BN];                                                                      \
		for (int t = 0; t < MM_BN; t++)                                                        \
			acc[t] = 0.0f;                                                                     \
		for (int k0 = 0; k0 < K; k0 += MMQ_KC) {                                               \
			int kc = min(MMQ_KC, K - k0);                                                      \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
			for (int e = lid; e < MM_BN * MMQ_KC / 4; e += L) {                                \
				int t = e / (MMQ_KC / 4), c = e - t * (MMQ_KC / 4);                            \
				xs[e] = t < nt && 4 * c < kc                                                   \
						? ((global const int*)(xq + (ulong)(i0 + t) * K + k0))[c]              \
						: 0;                                                                   \
			}                                                                                  \
			for (int e = lid; e < MM_BN * cb; e += L) {                                        \
				int t = e / cb, c = e - t * cb;                                                \
				ds[e] = t < nt && c * ABLK_##T < kc                                            \
						? xd[(ulong)(i0 + t) * nb + k0 / ABLK_##T + c]                         \
						: 0.0f;                                                                \
			}                                                                                  \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
			int u0 = k0 / QU_##T;                                                              \
			for (int u = u0; u < u0 + kc / QU_##T; u++) {                                      \
				wu_##T wu = wload_##T(row, u);                                                 \
				int xo = XOFF_##T(u) - k0, xbk = XBLK_##T(u) - k0 / ABLK_##T;                  \
				_Pragma("unroll") for (int t = 0; t < MM_BN; t++) {                            \
					int s = IDOT_##T(wu, xc + t * MMQ_KC + xo);                                \
					acc[t] += (wu.d * ds[t * cb + xbk]) * (float)s;                            \
				}                                                                              \
			}                                                                                  \
		}                                                                                      \
		if (o >= M)                                                                            \
			return;                                                                            \
		for (int t = 0; t < nt; t++)                                                           \
			dst[(ulong)(i0 + t) * M + o] = acc[t];                                             \
	}                                                                                          \
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
		global const float* db = xd + (ulong)i0 * nb;                                          \
		float acc[MM_BN];                                                                      \
		for (int t = 0; t < MM_BN; t++)                                                        \
			acc[t] = 0.0f;                                                                     \
		int units = K / QU_##T;                                                                \
		if (nt == MM_BN) {                                                                     \
			for (int u = 0; u < units; u++) {                                                  \
				wu_##T wu = wload_##T(row, u);                                                 \
				int xo = XOFF_##T(u), xbk = XBLK_##T(u);                                       \
				_Pragma("unroll") for (int t = 0; t < MM_BN; t++) {                            \
					int s = IDOT_##T(wu, xb + (ulong)t * K + xo);                              \
					acc[t] += (wu.d * db[t * nb + xbk]) * (float)s;                            \
				}                                                                              \
			}                                                                                  \
		} else {                                                                               \
			for (int u = 0; u < units; u++) {                                                  \
				wu_##T wu = wload_##T(row, u);                                                 \
				int xo = XOFF_##T(u), xbk = XBLK_##T(u);                                       \
				for (int t = 0; t < nt; t++) {                                                 \
					int s = IDOT_##T(wu, xb + (ulong)t * K + xo);                              \
					acc[t] += (wu.d * db[t * nb + xbk]) * (float)s;                            \
				}                                                                              \
			}                                                                                  \
		}                                                                                      \
		for (int t = 0; t < nt; t++)                                                           \
			dst[(ulong)(i0 + t) * M + o] = acc[t];                                             \
	}

DEFINE_QUANT_MATMUL_KERNELS(q4_0)
DEFINE_QUANT_MATMUL_KERNELS(q8_0)
DEFINE_QUANT_MATMUL_KERNELS(q6_k)
