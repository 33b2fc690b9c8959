// flash: flash attention (backend.Attn.Flash), llama.cpp's CPU
// ggml_compute_forward_flash_attn_ext_f16 (c392e509) over the cells each
// query row sees (backend.KVView, attention.cl's att_row and att_sees).
// For one query row and head, in cell order, a cell it does not see
// skipped:
//   - the query is converted to K's vec_dot_type once: F32 stays, F16 and
//     BF16 round to nearest even, the quantised types to Q8_0 or Q8_1 (the
//     host's quantize_q8_0/_1 into the activation scratch, matmul's);
//   - s = vec_dot(k_c, q) as ggml's vec_dot for the pair (att_dotw for F32
//     and F16, weights.cl's float sums for BF16, quant.cl's integer lanes
//     for the quantised types: the matmuls' bits), s·scale' where scale' =
//     scale/cap with a soft cap (the host's float division), then
//     cap·tanh(s);
//   - online softmax: if s > M, M = s, ms = e^(M_old − M) and the
//     accumulator is scaled by ms, vs = 1; else vs = e^(s − M). Then
//     acc += v_c·vs (fused) and S = S·ms + vs (FA_SUM: not fused). Over an
//     F16 V the accumulator is f16, rounded after every scale and every mad
//     (ggml_vec_scale_f16, ggml_vec_mad_f16); over any other V it is f32
//     and v_c is dequantised first (to_float);
//   - out = float(acc)·(1/S), zeros for a row that sees nothing.
// A row's arithmetic is its own: batched rows, lone rows and Decode views
// give the same bits. e^x is fa_expf: glibc's expf (its FMA build) in
// double, its bits (OpenCL's exp without cl_khr_fp64); tanh is OpenCL's,
// within a few ulp of the C library's.
//
// A work-group takes hq query heads of one KV head (h0 = hq·group 0) of one
// query row (group 1) and, for a split, one partition of the view (group
// 2). It walks its cells in tiles of FA_TILE: each key is scored for all hq
// queries by one work-item (ls), work-item j < hq runs query j's online
// softmax over the tile in order (the factors ms, vs in lf), then every
// work-item updates its units (U values: 16 where D allows, else 1) of the
// accumulators (lacc, hq·D), each value of V read once for the hq queries'
// updates. Launch: global (L·heads/hq, n, P), local (L, 1, 1).
//
// Flash-decoding: a single query row over a long view is split into P
// partitions of partLen cells from Lo; each writes its (M_p, S_p, acc_p)
// to part[(h·P + p)·(D+2) …] and flash_merge combines them: out =
// Σ_p acc_p·e^(M_p−M) / Σ_p S_p·e^(M_p−M), M = max M_p. That reorders the
// online softmax (and, over an F16 V, skips its f16 roundings between
// partitions), so a split result is the sequential one within a few ulp of
// float (f32 V) or of f16 (F16 V): not its bits.

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define FA_TILE 64

// The cache types, the host's faType.
#define FA_F32 0
#define FA_F16 1
#define FA_BF16 2
#define FA_Q8_0 3
#define FA_Q4_0 4
#define FA_Q4_1 5
#define FA_Q5_0 6
#define FA_Q5_1 7
#define FA_IQ4_NL 8

// fa_expf is e^x as glibc's expf gives it on a host with FMA (its
// __expf_fma, which ggml's expf calls resolve to on every AVX2 build):
// glibc's sysdeps/ieee754/flt-32/e_expf.c in double, with the fused
// operations gcc made of it (read from Debian's libm.so.6, glibc 2.36).
// float64's exp rounded to float is not that: glibc's expf is within
// 0.502 ulp, not correctly rounded, and a misrounded weight changes the
// row's bits (about 6 in 10^4 arguments). Without cl_khr_fp64 it is
// OpenCL's exp.
#ifdef cl_khr_fp64
// fa_exp2t is e_exp2f_data.c's tab: 2^(i/32)'s bits less i << 47.
constant ulong fa_exp2t[32] = {
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
	0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
	0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
	0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
	0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
	0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
#endif

inline float fa_expf(float x) {
#ifdef cl_khr_fp64
#pragma OPENCL FP_CONTRACT OFF
	uint ax = (as_uint(x) >> 20) & 0x7ff;
	if (ax > 0x42a) { // |x| ≥ 88, inf, nan: glibc's special cases
		if (x == -INFINITY)
			return 0.0f;
		if (ax >= 0x7f8)
			return x + x;
		if (x > 0x1.62e42ep6f)
			return INFINITY;
		if (x < -0x1.9fe368p6f) // __math_uflowf: 0x1p-95f squared
			return 0.0f;
		if (x < -0x1.9d1d9ep6f) // __math_may_uflowf: 0x1.4p-75f squared
			return 0x1p-149f;
	}
	const double invln2n = 0x1.71547652b82fep+5, shift = 0x1.8p+52;
	double xd = x;
	// x·32/ln2 = k + r, |r| ≤ 1/2: the rounding by the shift, fused.
	double kd = fma(invln2n, xd, shift);
	ulong ki = as_ulong(kd);
	kd -= shift;
	double r = fma(invln2n, xd, -kd);
	// e^x = 2^(k/32)·2^(r/32) ≈ s·(C0·r³ + C1·r² + C2·r + 1).
	double s = as_double(fa_exp2t[ki % 32] + (ki << 47));
	double z = fma(0x1.c6af84b912394p-20, r, 0x1.ebfce50fac4f3p-13);
	double r2 = r * r;
	double y = fma(r, 0x1.62e42ff0c52d6p-6, 1.0);
	y = fma(z, r2, y);
	return (float)(y * s);
#else
	return exp(x);
#endif
}

// FA_SUM is the softmax sum's step S·ms + vs, rounded twice: ggml-cpu.c's
// build does not fuse it (gcc computes S·ms apart from the + vs, across the
// expf call and the V update; the peer's objdump shows vmulss then vaddss).
// Fused, S differs in its last bit after some new maxima, and so does every
// value of the row's head.
#define FA_SUM(S, ms, vs) ((float)((S) * (ms)) + (vs))

// fa_qdot_T is ggml_vec_dot_T_q8_0 (or _q8_1) of a cache row with a query
// head quantised at xq, xd (XDN_T floats a block): quant.cl's lanes as
// mvq_T's one-work-item decode takes them, Q4_0 unrepacked (LK_32).
#define FAK_q8_0 LK_32
#define FAK_q4_0 LK_32
#define FAK_q5_0 LK_32
#define FAK_q4_1 LK_Q81
#define FAK_q5_1 LK_Q81
#define FAK_iq4_nl LK_NL
#define DEFINE_FA_QDOT(T)                                                      \
	inline float fa_qdot_##T(global const uchar* row, global const char* xq,  \
			global const float* xd, int D) {                                   \
		_Pragma("OPENCL FP_CONTRACT OFF");                                     \
		const int nb = D / QU_##T;                                             \
		lacc c, c2;                                                            \
		LACC_INIT(c);                                                          \
		LACC_INIT(c2);                                                         \
		for (int b = 0; b < nb; b++) {                                         \
			wu_##T wu = wload_##T(row, b);                                     \
			int8 L = LDOT_##T(wu, xq + XOFF_##T(b), b);                        \
			lanes_mv_block(FAK_##T, &c, &c2, b, nb, L, (int8)0,                \
					xd[b * XDN_##T], X1(T, xd, b), wdm(row, b, HDR_##T));      \
		}                                                                      \
		return lanes_mv_value(FAK_##T, c, c2);                                 \
	}

DEFINE_FA_QDOT(q8_0)
DEFINE_FA_QDOT(q4_0)
DEFINE_FA_QDOT(q4_1)
DEFINE_FA_QDOT(q5_0)
DEFINE_FA_QDOT(q5_1)
DEFINE_FA_QDOT(iq4_nl)

// fa_bf16dot is ggml_vec_dot_bf16 of a cache row with a rounded query at x
// in the flavour's order bf (weights.cl's fs_ sums, numerics.FloatOrder).
inline float fa_bf16dot(global const uchar* row, global const float* x, int D, int bf) {
	fs_t f;
	fs_zero(&f);
	int G = fs_groups(bf, true, D);
	for (int g = 0; g < G; g++)
		fs_add(&f, bf, FS_KIND_bf16, g, deq16_bf16(row, g), vload16(g, x));
	return fs_finish_bf16(&f, bf, row, x, 16 * G, D);
}

// fa_args are what scoring needs besides the key: the converted query of
// the row's head j (lq: F32 and F16 in local memory; xf: BF16's floats;
// xq, xd: the quantised types'), the geometry and the scoring.
typedef struct {
	int kt, D, bf;
	bool wide;
	float scale, cap;
} fa_args;

// fa_score is the score of key row kr for a query (see the header).
inline float fa_score(fa_args a, global const uchar* kr, local const float* lq,
		global const float* xf, global const char* xq, global const float* xd) {
#pragma OPENCL FP_CONTRACT OFF
	float s;
	switch (a.kt) {
	case FA_F32:
		s = a.wide ? att_dotw16_f32(lq, (global const float*)kr, a.D, false)
				: att_dotw8_f32(lq, (global const float*)kr, a.D, false);
		break;
	case FA_F16:
		s = a.wide ? att_dotw16_f16(lq, (global const half*)kr, a.D, false)
				: att_dotw8_f16(lq, (global const half*)kr, a.D, false);
		break;
	case FA_BF16: s = fa_bf16dot(kr, xf, a.D, a.bf); break;
	case FA_Q8_0: s = fa_qdot_q8_0(kr, xq, xd, a.D); break;
	case FA_Q4_0: s = fa_qdot_q4_0(kr, xq, xd, a.D); break;
	case FA_Q4_1: s = fa_qdot_q4_1(kr, xq, xd, a.D); break;
	case FA_Q5_0: s = fa_qdot_q5_0(kr, xq, xd, a.D); break;
	case FA_Q5_1: s = fa_qdot_q5_1(kr, xq, xd, a.D); break;
	default: s = fa_qdot_iq4_nl(kr, xq, xd, a.D); break;
	}
	s = s * a.scale;
	if (a.cap > 0.0f)
		s = a.cap * tanh(s);
	return s;
}

// fa_v16 is the 16 values of group g of V row vr as floats (to_float).
inline float16 fa_v16(int vt, global const uchar* vr, int g) {
	switch (vt) {
	case FA_F32: return deq16_f32(vr, g);
	case FA_F16: return deq16_f16(vr, g);
	case FA_BF16: return deq16_bf16(vr, g);
	case FA_Q8_0: return deq16_q8_0(vr, g);
	case FA_Q4_0: return deq16_q4_0(vr, g);
	case FA_Q4_1: return deq16_q4_1(vr, g);
	case FA_Q5_0: return deq16_q5_0(vr, g);
	case FA_Q5_1: return deq16_q5_1(vr, g);
	default: return deq16_iq4_nl(vr, g);
	}
}

// fa_v1 is element d of a float V row (F32, F16, BF16: the types a head
// size that is not a multiple of 16 allows).
inline float fa_v1(int vt, global const uchar* vr, int d) {
	return vt == FA_F32 ? elem_f32(vr, d) : vt == FA_F16 ? elem_f16(vr, d) : elem_bf16(vr, d);
}

// flash_attn: see the header. kRow and vRow are a cell's bytes in each
// cache (all KV heads), xq and xd the activation scratch (the converted
// query rows, heads·D each), part the split's partials.
kernel void flash_attn(global float* out, global float* part, global const float* q,
		global const char* xq, global const float* xd, global const uchar* k,
		global const uchar* v, ulong kRow, ulong vRow, global const int* rows,
		global const int* cells, int Lo, int Hi, int window, int partLen, int heads,
		int kvHeads, int D, int kt, int vt, float scale, float cap,
		volatile global int* status, int wide, int bf, int hq, int U, local float* lq,
		local float* ls, local float* lf, local float* lacc) {
#pragma OPENCL FP_CONTRACT OFF
	int h0 = get_group_id(0) * hq, i = get_group_id(1), p = get_group_id(2);
	int P = get_num_groups(2), lid = get_local_id(0), L = get_local_size(0);
	int kvh = h0 / (heads / kvHeads);
	att_view w;
	int lo, hi;
	if (!att_row(rows, i, cells, window, Lo, Hi, status, &w, &lo, &hi))
		hi = lo;
	int c0 = lo, c1 = hi;
	if (P > 1) {
		c0 = max(lo, Lo + p * partLen);
		c1 = max(c0, min(hi, Lo + (p + 1) * partLen));
	}
	global const uchar* kb = k + (ulong)kvh * (kRow / kvHeads);
	global const uchar* vb = v + (ulong)kvh * (vRow / kvHeads);
	ulong q0 = ((ulong)i * heads + h0) * D; // the first query head's element
	int xdn = kt == FA_Q4_1 || kt == FA_Q5_1 ? 2 : 1;
	fa_args a = {kt, D, bf, wide != 0, scale, cap};
	bool f16v = vt == FA_F16;
	for (int e = lid; e < hq * D; e += L) {
		if (kt == FA_F32)
			lq[e] = q[q0 + e];
		else if (kt == FA_F16)
			lq[e] = f16_round(q[q0 + e]);
		lacc[e] = 0.0f;
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	float M = -INFINITY, S = 0.0f; // query lid's, for lid < hq
	int GU = D / U;
	for (int t0 = c0; t0 < c1; t0 += FA_TILE) {
		int tn = min(FA_TILE, c1 - t0);
		for (int c = lid; c < tn; c += L) {
			bool seen = att_sees(w, t0 + c);
			global const uchar* kr = kb + (ulong)(t0 + c) * kRow;
			for (int j = 0; j < hq; j++) {
				ulong qj = q0 + (ulong)j * D;
				ls[j * FA_TILE + c] = seen ? fa_score(a, kr, lq + j * D,
						(global const float*)xq + qj, xq + qj, xd + qj / 32 * xdn)
						: -INFINITY;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		if (lid < hq) {
			for (int c = 0; c < tn; c++) {
				float s = ls[lid * FA_TILE + c], ms = 1.0f, vs = 1.0f;
				if (s == -INFINITY)
					continue;
				if (s > M) {
					float mo = M;
					M = s;
					ms = fa_expf(mo - M);
				} else {
					vs = fa_expf(s - M);
				}
				S = FA_SUM(S, ms, vs);
				lf[2 * (lid * FA_TILE + c)] = ms;
				lf[2 * (lid * FA_TILE + c) + 1] = vs;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		for (int e = lid; e < hq * GU; e += L) {
			int j = e / GU, u = e - j * GU;
			local float* acc = lacc + j * D + u * U;
			if (U == 16) {
				float16 r = vload16(0, acc);
				for (int c = 0; c < tn; c++) {
					if (ls[j * FA_TILE + c] == -INFINITY)
						continue;
					float ms = lf[2 * (j * FA_TILE + c)], vs = lf[2 * (j * FA_TILE + c) + 1];
					if (ms != 1.0f) {
						r = r * ms;
						if (f16v)
							r = f16_round16(r);
					}
					r = fma(fa_v16(vt, vb + (ulong)(t0 + c) * vRow, u), (float16)vs, r);
					if (f16v)
						r = f16_round16(r);
				}
				vstore16(r, 0, acc);
			} else {
				float r = acc[0];
				for (int c = 0; c < tn; c++) {
					if (ls[j * FA_TILE + c] == -INFINITY)
						continue;
					float ms = lf[2 * (j * FA_TILE + c)], vs = lf[2 * (j * FA_TILE + c) + 1];
					if (ms != 1.0f) {
						r = r * ms;
						if (f16v)
							r = f16_round(r);
					}
					r = fma(fa_v1(vt, vb + (ulong)(t0 + c) * vRow, u), vs, r);
					if (f16v)
						r = f16_round(r);
				}
				acc[0] = r;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (lid < hq) {
		lf[2 * lid] = M;
		lf[2 * lid + 1] = S;
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int e = lid; e < hq * D; e += L) {
		int j = e / D, d = e - j * D;
		float sj = lf[2 * j + 1];
		if (P == 1) {
			out[q0 + e] = sj == 0.0f ? 0.0f : lacc[e] * div_rn(1.0f, sj);
			continue;
		}
		global float* pr = part + ((ulong)(h0 + j) * P + p) * (D + 2);
		if (d == 0) {
			pr[0] = lf[2 * j];
			pr[1] = sj;
		}
		pr[2 + d] = lacc[e];
	}
}

// flash_merge combines the P partitions of each head (see the header).
// Launch: global (roundUp(D, L), heads), one output element per work-item.
kernel void flash_merge(global float* out, global const float* part, int P, int D) {
	int d = get_global_id(0), h = get_global_id(1);
	if (d >= D)
		return;
	global const float* ph = part + (ulong)h * P * (D + 2);
	float m = -INFINITY;
	for (int p = 0; p < P; p++)
		if (ph[(ulong)p * (D + 2) + 1] != 0.0f)
			m = fmax(m, ph[(ulong)p * (D + 2)]);
	float s = 0.0f, r = 0.0f;
	for (int p = 0; p < P; p++) {
		global const float* pr = ph + (ulong)p * (D + 2);
		if (pr[1] == 0.0f)
			continue;
		float f = fa_expf(pr[0] - m);
		s = fma(pr[1], f, s);
		r = fma(pr[2 + d], f, r);
	}
	out[(ulong)h * D + d] = s == 0.0f ? 0.0f : r * div_rn(1.0f, s);
}
