// Fused decode kernels: what a Llama layer runs for one token as a few
// launches instead of a score (see backend/opencl/fuse.go, which chains the
// ops). Each computes exactly what its ops compute one by one (the same
// functions in the same order), so fusing changes no bit.
//
// mvf_T is the decode matmul of up to three matrices of weight type T
// (their rows concatenated, as Q, K and V) with one activation row x, in
// three steps:
//   1. prologue: every work-group rounds x to T's activation type into local
//      memory (xq, xd: quant.cl's layout of one row), after RMSNorm when
//      MVF_NORM asks (norm.cl's rms_scale, then (x·scale)·g; group 0 also
//      stores the normalised row to xn, as RMSNorm would);
//   2. rows: R = J·L/S rows per group, each the dot product of quant.cl's
//      decode matmul (LANES_MV_ROW) over the local activations;
//   3. epilogue: each row's value to its matrix's output (d0, d1 or d2),
//      and with MVF_ADD also added to res (the residual, res += d0: Add), or
//      with MVF_SILU rows pair the first two matrices (gate and up, M0 = M1):
//      d1 = up, d0 = silu(gate)·up (SiLUMul into the gate's tensor, as
//      silu_mul computes it for the build of MVF_SILU16 ? 16 : 8 lanes); with
//      MVF_ROPE the rows of the matrices that ask are turned by RoPE (Q, K),
//      and any matrix's rows may also be stored into a KV cache (K, V: the
//      CopySlice append, rounded to f16 for an f16 cache).
// The prologue is repeated by every group: it reads K floats where the
// group reads R·K weights, and saves the launches (and the global round
// trip) of RMSNorm and the activation quantiser.
//
// Launch: global (G·L), local (L) with G = ceil(rows/R); L a power of two.
// Local memory: xq K bytes, xd (K/ABLK_T)·XDN_T floats, li the largest of
// 8·L bytes (the reductions) and the row macros' records.

#define MVF_NORM 1
#define MVF_ADD 2
#define MVF_SILU 4
#define MVF_ROPE 8
#define MVF_NEOX 16
#define MVF_SILU16 64
#define MF_ROPE 1
#define MF_STORE 2
#define MF_F16 4

// act16 is x[off…off+15] as the matmul sees it: normalised when norm
// (RMSNorm's (x·scale)·g, norm.cl).
inline float16 act16(global const float* x, global const float* g, float scale, int norm, int off) {
	float16 v = vload16(0, x + off);
	return norm ? (v * scale) * vload16(0, g + off) : v;
}

inline float act1(global const float* x, global const float* g, float scale, int norm, int k) {
	return norm ? (x[k] * scale) * g[k] : x[k];
}

// act_q8_32 rounds the activations to Q8_0 (xdn 1) or Q8_1 (xdn 2: the
// block sums too) in local memory, as quantize_q8_0 and quantize_q8_1; xn,
// when not null, gets the normalised row.
inline void act_q8_32(global const float* x, global const float* g, float scale, int norm, global float* xn,
		int K, local char* xq, local float* xd, int xdn) {
	for (int b = get_local_id(0); b < K / 32; b += get_local_size(0)) {
		float16 v0 = act16(x, g, scale, norm, 32 * b), v1 = act16(x, g, scale, norm, 32 * b + 16);
		if (xn) {
			vstore16(v0, 0, xn + 32 * b);
			vstore16(v1, 0, xn + 32 * b + 16);
		}
		char16 q0, q1;
		float dr;
		int sum;
		float d = quant_v32(v0, v1, &q0, &q1, &dr, &sum);
		vstore16(q0, 0, xq + 32 * b);
		vstore16(q1, 0, xq + 32 * b + 16);
		xd[xdn * b] = d;
		if (xdn == 2)
			xd[2 * b + 1] = f16_round(dr * (float)sum);
	}
}

#ifdef CPU_VARIANT
// act_q8_k rounds the activations to Q8_K in local memory, as
// quantize_q8_k. A CPU device runs a group's work-items one after another,
// so each rounds whole blocks, without the reductions and barriers of the
// GPU form below, which every group repeats (with 64 groups a PoCL Q4_K
// step took 1.3x the ops one by one).
// The block's scale comes from its first element of the largest magnitude,
// as ggml's strict > finds it. ra and ri are unused.
inline void act_q8_k(global const float* x, global const float* g, float scale, int norm, global float* xn,
		int K, local char* xq, local float* xd, local float* ra, local int* ri) {
	for (int b = get_local_id(0); b < K / 256; b += get_local_size(0)) {
		int off = 256 * b;
		float16 m = 0.0f;
		for (int c = off; c < off + 256; c += 16) {
			float16 v = act16(x, g, scale, norm, c);
			if (xn)
				vstore16(v, 0, xn + c);
			m = fmax(m, fabs(v));
		}
		float amax = fmax16(m), mx = 0.0f;
		for (int k = off; k < off + 256; k++) {
			float v = act1(x, g, scale, norm, k);
			if (fabs(v) == amax) {
				mx = v;
				break;
			}
		}
		local char* q = xq + off;
		local float* dd = xd + b * Q8K_F;
		if (amax == 0.0f) {
			for (int k = 0; k < 256; k += 16)
				vstore16((char16)0, 0, q + k);
			for (int k = 0; k < Q8K_F; k++)
				dd[k] = 0.0f;
			continue;
		}
		float iscale = div_rn(-127.0f, mx);
		for (int j = 0; j < 16; j++) {
			float16 qf = fmin(127.0f, rint(iscale * act16(x, g, scale, norm, off + 16 * j)));
			vstore16(convert_char16(qf), 0, q + 16 * j);
			dd[1 + j] = (float)isum16(convert_int16(qf));
		}
		dd[0] = div_rn(1.0f, iscale);
	}
}
#else
// act_q8_k rounds the activations to Q8_K in local memory, as
// quantize_q8_k, one 256-element block at a time by the whole group; ra and
// ri hold L floats and L ints.
inline void act_q8_k(global const float* x, global const float* g, float scale, int norm, global float* xn,
		int K, local char* xq, local float* xd, local float* ra, local int* ri) {
	int lid = get_local_id(0), L = get_local_size(0);
	if (xn)
		for (int k = lid; k < K; k += L)
			xn[k] = act1(x, g, scale, norm, k);
	for (int b = 0; b < K / 256; b++) {
		int off = 256 * b;
		float best = 0.0f;
		int at = 256;
		for (int k = lid; k < 256; k += L) {
			float v = fabs(act1(x, g, scale, norm, off + k));
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
		float m = ra[0];
		int mi = ri[0];
		barrier(CLK_LOCAL_MEM_FENCE);
		local char* q = xq + off;
		local float* dd = xd + b * Q8K_F;
		if (m == 0.0f) {
			for (int k = lid; k < 256; k += L)
				q[k] = 0;
			for (int k = lid; k < Q8K_F; k += L)
				dd[k] = 0.0f;
			continue;
		}
		float iscale = div_rn(-127.0f, act1(x, g, scale, norm, off + mi));
		for (int k = lid; k < 256; k += L)
			q[k] = (char)fmin(127.0f, rint(iscale * act1(x, g, scale, norm, off + k)));
		for (int j = lid; j < 16; j += L) {
			int sum = 0;
			for (int k = 16 * j; k < 16 * j + 16; k++)
				sum += (int)fmin(127.0f, rint(iscale * act1(x, g, scale, norm, off + k)));
			dd[1 + j] = (float)sum;
		}
		if (lid == 0)
			dd[0] = div_rn(1.0f, iscale);
	}
}
#endif

// mvf_out is a row's way out: to its matrix's output dst at oo and, where
// mf has MF_STORE, to the cache c at element co + oo, rounded to f16 where
// mf has MF_F16 (as CopySlice appends a row to the KV cache).
inline void mvf_out(global float* dst, global uchar* c, ulong co, int mf, int oo, float v) {
	dst[oo] = v;
	if (mf & MF_F16)
		vstore_half_rte(v, co + oo, (global half*)c);
	else if (mf & MF_STORE)
		((global float*)c)[co + oo] = v;
}

// mvf_T's arguments beyond the activations: per matrix m its weights wm
// (rows of rbm bytes), output dm, rows Mm, and how its rows leave (mfm:
// MF_ROPE, MF_STORE, MF_F16) with the cache cm and offset com for a store;
// then the common ones; with MVF_ROPE the rotation of the matrices whose mf
// says MF_ROPE, heads of hd rows, the first dims of them turned (rope.cl)
// at position pos[0] by the cos and sin of the table cs (row p − lo). A
// group then holds whole heads (the host makes R a multiple of hd and every
// matrix before a rotated one whole heads): it keeps its rows in ys until
// all are done, and turns them there.

#define DEFINE_MVF_KERNEL(T, ROW)                                                              \
	kernel void mvf_##T(global const float* x, global const float* g, global float* xn,        \
			float eps, global const uchar* w0, ulong rb0, global float* d0, int M0, int mf0,   \
			global uchar* c0, ulong co0, global const uchar* w1, ulong rb1, global float* d1,  \
			int M1, int mf1, global uchar* c1, ulong co1, global const uchar* w2, ulong rb2,   \
			global float* d2, int M2, int mf2, global uchar* c2, ulong co2, int K, int S,      \
			int J, int flags, global float* res, global const int* pos, int lo,                \
			global const float2* cs, int hd, int dims,                                         \
			local char* xq, local float* xd,                                                   \
			local int* li, local float* ys) {                                                  \
		int lid = get_local_id(0), L = get_local_size(0);                                      \
		int r = lid / S, lane = lid - r * S;                                                   \
		int norm = flags & MVF_NORM;                                                           \
		float scale = norm ? rms_scale((local RMS_RED*)li, x, K, eps) : 1.0f;                  \
		global float* xw = norm && get_group_id(0) == 0 ? xn : 0;                              \
		if (ABLK_##T == 256)                                                                   \
			act_q8_k(x, g, scale, norm, xw, K, xq, xd, (local float*)li, li + L);              \
		else                                                                                   \
			act_q8_32(x, g, scale, norm, xw, K, xq, xd, XDN_##T);                              \
		barrier(CLK_LOCAL_MEM_FENCE);                                                          \
		/* The row code's M (LK_q4_0) is M0 for every matrix: the host chains */            \
		/* only matrices that agree in it (fuse.go), and a value that varied by */          \
		/* work-item made PoCL branch on it block by block (Q4_0 1.5x slower). */            \
		/* One row per pass, so that the row's barriers are never inside a */             \
		/* branch (PoCL 3.1 miscompiled that): with MVF_SILU, passes alternate the */      \
		/* gate's row o and the up's. */                                                     \
		const int silu = flags & MVF_SILU, rope = flags & MVF_ROPE, rpp = L / S;               \
		const int m1 = M0, m2 = M0 + M1, mt = m2 + M2, base = get_group_id(0) * J * rpp;       \
		float vg = 0.0f;                                                                       \
		for (int p = 0; p < (silu ? 2 * J : J); p++) {                                         \
			int hf = silu ? p & 1 : 0;                                                         \
			int i = (silu ? p >> 1 : p) * rpp + r, o = base + i;                               \
			int oc = min(o, (silu ? M0 : mt) - 1);                                             \
			int mi = silu ? hf : oc < m1 ? 0 : oc < m2 ? 1 : 2;                                \
			int oo = silu ? oc : oc - (mi == 0 ? 0 : mi == 1 ? m1 : m2);                       \
			const int M = M0;                                                                  \
			global const uchar* row = (mi == 0 ? w0 : mi == 1 ? w1 : w2) +                     \
					(ulong)oo * (mi == 0 ? rb0 : mi == 1 ? rb1 : rb2);                         \
			float v;                                                                           \
			ROW(T, row, xq, xd, v)                                                             \
			if (silu) {                                                                        \
				if (!hf)                                                                       \
					vg = v;                                                                    \
				else if (lane == 0 && o < M0) {                                                \
					d1[o] = v;                                                                 \
					int sl = flags & MVF_SILU16 ? 16 : 8;                                      \
					float e = o < M0 - M0 % sl ? expf_lanes(-vg, sl) : expf_libm(-vg);         \
					d0[o] = div_rn(vg, 1.0f + e) * v;                                          \
				}                                                                              \
			} else if (lane == 0 && rope) {                                                    \
				ys[i] = v;                                                                     \
			} else if (lane == 0 && o < mt) {                                                  \
				if (mi == 0)                                                                   \
					mvf_out(d0, c0, co0, mf0, oo, v);                                          \
				else if (mi == 1)                                                              \
					mvf_out(d1, c1, co1, mf1, oo, v);                                          \
				else                                                                           \
					mvf_out(d2, c2, co2, mf2, oo, v);                                          \
				if (flags & MVF_ADD)                                                           \
					res[oo] = res[oo] + v;                                                     \
			}                                                                                  \
		}                                                                                      \
		/* RoPE of the group's whole heads, as rope.cl turns them (the barrier */          \
		/* unconditional: PoCL miscompiles a return before one). */                            \
		barrier(CLK_LOCAL_MEM_FENCE);                                                          \
		for (int i = lid; rope && i < J * rpp && base + i < mt; i += L) {                      \
			int o = base + i;                                                                  \
			int mi = o < m1 ? 0 : o < m2 ? 1 : 2;                                              \
			int oo = o - (mi == 0 ? 0 : mi == 1 ? m1 : m2);                                    \
			int mf = mi == 0 ? mf0 : mi == 1 ? mf1 : mf2;                                      \
			float v = ys[i];                                                                   \
			int d = oo % hd;                                                                   \
			if ((mf & MF_ROPE) && d < dims) {                                                  \
				int h2 = dims / 2, hs = i - d;                                                 \
				int j = flags & MVF_NEOX ? d % h2 : d / 2;                                     \
				int a = flags & MVF_NEOX ? j : 2 * j, b = flags & MVF_NEOX ? j + h2 : 2 * j + 1; \
				float2 t = rope_pair(ys[hs + a], ys[hs + b],                                   \
						rope_cs(cs, lo, dims, pos[0], j));                                     \
				v = d == a ? t.x : t.y;                                                        \
			}                                                                                  \
			if (mi == 0)                                                                       \
				mvf_out(d0, c0, co0, mf0, oo, v);                                              \
			else if (mi == 1)                                                                  \
				mvf_out(d1, c1, co1, mf1, oo, v);                                              \
			else                                                                               \
				mvf_out(d2, c2, co2, mf2, oo, v);                                              \
		}                                                                                      \
	}

DEFINE_MVF_KERNEL(q8_0, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q4_0, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q6_k, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q4_1, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q5_0, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q5_1, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q2_k, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q3_k, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q4_k, LANES_MV_ROW)
DEFINE_MVF_KERNEL(q5_k, LANES_MV_ROW)
DEFINE_MVF_KERNEL(iq4_nl, LANES_MV_ROW)
DEFINE_MVF_KERNEL(iq4_xs, LANES_MV_ROW)
