// Tiled GEMM for prompts on GPUs: mmt_T computes dst[i, o] = Σ_k x[i, k]·w[o, k]
// for n > 1 tokens (decode is mv_T, mvq_T and mvf_T).
//
// A work-group of TX×TY work-items owns a tile of BM = TX·TR weight rows ×
// BN = TY·TC tokens; work-item (tx, ty) computes rows tx + TX·r (r < TR) for
// tokens ty + TY·c (c < TC). K is swept in chunks: the group copies the
// chunk of its BM rows, decoded, and the chunk of its BN tokens'
// activations into local memory (adjacent work-items read adjacent bytes),
// then each work-item takes its TR·TC dot products from local memory. So a
// weight is read and decoded once per BN tokens and an activation read once
// per BM rows. Row pitches in local memory are a chunk plus one word, so
// that the TX work-items reading TX rows at once hit different banks.
//
// A tile changes which work-item computes an output, never the order of
// its sum, so the results are the other matmul kernels' to the bit:
//   - block formats: block after block in order, each block's eight exact
//     integer lane sums (with its sub-block scales) and min terms, then
//     quant.cl's lanes_block, and lanes_value at the end: the CPU's bits
//     (mmcq_T's). The decoded chunk holds each element's quant as a char
//     (q in -128…127 for every format) and, where the format has them,
//     each 16-element group's sub-scale (sc) and min (mn) as chars; lane l
//     of a 32-element piece is its elements 4l … 4l+3, whose integer dot
//     product is one 4×8-bit dot (DOT4); with a sub-scale it is multiplied
//     by the group's (the four share one group), which is the same integer
//     as scaling each product.
//   - float weights: the CPU backend's order for the call (backend/cpu
//     kernels.go, floatSum: llama.cpp's tinyBLAS or vec_dot lanes, fused
//     multiply-adds), its lanes kept per output across chunks (fs_t in
//     weights.cl).
//
// Launch: global (ceil(M/BM)·TX, ceil(n/BN)·TY), local (TX, TY); the host
// picks TX and TY from the device (backend/opencl/gemm.go), and TR, TC are
// the kernel's (MMT_TR, MMT_TC below, per kind of sum).
// Local memory, block formats: wq BM·(MMT_KC/4+1) ints, wsc and wmn
// BM·MMT_KC/16 chars each, wds BM·MMT_KC/BW floats·2, xq BN·(MMT_KC/4+1)
// ints, xf BN·(MMT_KC/ABLK)·XDN floats. Float weights: wl BM·(MMTF_KC+1)
// and xl BN·(MMTF_KC+1) floats.

#define MMT_KC 256
#define MMTF_KC 64
#define MMT_P (MMT_KC / 4 + 1)
#define MMTF_P (MMTF_KC + 1)

// Work-item tiles: Q4_0's one-accumulator sums (LK_R8) keep one float per
// output and token; the other block formats keep eight lanes and four min
// terms, and the float weights up to 64 lanes (fs_t), so fewer.
#define MMT_TR(kind) ((kind) == LK_R8 ? 4 : 2)
#define MMT_TC 4
#define MMTF_TR 2
#define MMTF_TC 4

// DOT4(a, b) is the integer dot product of the four signed bytes packed in
// a and b: one instruction where the host builds with DOT4_KHR (a device
// with cl_khr_integer_dot_product), else four multiplies. Both are exact,
// so both give the same bits. The builtin is declared here as well: a
// compiler's header may declare it only under OpenCL C 3.0's feature macro
// (__opencl_c_integer_dot_product_input_4x8bit_packed), which an OpenCL
// C 1.2 build does not define.
#ifdef DOT4_KHR
int __attribute__((overloadable, const)) dot_4x8packed_ss_int(uint, uint);
#define DOT4(a, b) dot_4x8packed_ss_int((uint)(a), (uint)(b))
#else
inline int dot4_portable(int a, int b) {
	int4 p = convert_int4(as_char4(a)) * convert_int4(as_char4(b));
	return (p.x + p.y) + (p.z + p.w);
}
#define DOT4(a, b) dot4_portable(a, b)
#endif

// lanes32 is the eight lane sums of one 32-element piece: w and x hold its
// 32 weight and activation bytes.
inline int8 lanes32(int8 w, int8 x) {
	return (int8)(DOT4(w.s0, x.s0), DOT4(w.s1, x.s1), DOT4(w.s2, x.s2), DOT4(w.s3, x.s3), DOT4(w.s4, x.s4),
			DOT4(w.s5, x.s5), DOT4(w.s6, x.s6), DOT4(w.s7, x.s7));
}

// SC_T says whether format T has sub-scales per 16-element group.
#define SC_q8_0 0
#define SC_q4_0 0
#define SC_q5_0 0
#define SC_iq4_nl 0
#define SC_q4_1 0
#define SC_q5_1 0
#define SC_q6_k 1
#define SC_q3_k 1
#define SC_q2_k 1
#define SC_q4_k 1
#define SC_q5_k 1
#define SC_iq4_xs 1

// TST_T(w, u, q, sc, mn) stores unit u of the chunk (decoded by wload_T
// into w) at the chunk's element offsets in q, and its groups' sub-scales
// and mins in sc and mn (local memory, the row's chunk).
#define TST_A32(w, u, q)                                                      \
	{                                                                         \
		vstore16(convert_char16((w).a), 0, (q) + 32 * (u));                   \
		vstore16(convert_char16((w).b), 0, (q) + 32 * (u) + 16);              \
	}
#define TST_q8_0(w, u, q, sc, mn) TST_A32(w, u, q)
#define TST_q4_0(w, u, q, sc, mn) TST_A32(w, u, q)
#define TST_q5_0(w, u, q, sc, mn) TST_A32(w, u, q)
#define TST_iq4_nl(w, u, q, sc, mn) TST_A32(w, u, q)
#define TST_q4_1(w, u, q, sc, mn) TST_A32(w, u, q)
#define TST_q5_1(w, u, q, sc, mn) TST_A32(w, u, q)
#define TST_iq4_xs(w, u, q, sc, mn)                                           \
	{                                                                         \
		TST_A32(w, u, q);                                                     \
		(sc)[2 * (u)] = (sc)[2 * (u) + 1] = (char)(w).ls;                      \
	}
// Q6_K, Q3_K and Q2_K units: 16 elements at each of XOFF_q6_k(u) + 32j,
// group XOFF_q6_k(u)/16 + 2j, j < 4 (a chunk is one super-block).
#define TST_Q6(w, u, q, sc)                                                   \
	int e = XOFF_q6_k(u), g = e / 16;                                         \
	vstore16(convert_char16((w).q1), 0, (q) + e);                             \
	vstore16(convert_char16((w).q2), 0, (q) + e + 32);                        \
	vstore16(convert_char16((w).q3), 0, (q) + e + 64);                        \
	vstore16(convert_char16((w).q4), 0, (q) + e + 96);                        \
	(sc)[g] = (char)(w).s1;                                                   \
	(sc)[g + 2] = (char)(w).s2;                                               \
	(sc)[g + 4] = (char)(w).s3;                                               \
	(sc)[g + 6] = (char)(w).s4;
#define TST_q6_k(w, u, q, sc, mn) { TST_Q6(w, u, q, sc) }
#define TST_q3_k(w, u, q, sc, mn) { TST_Q6(w, u, q, sc) }
#define TST_q2_k(w, u, q, sc, mn)                                             \
	{                                                                         \
		TST_Q6(w, u, q, sc)                                                   \
		(mn)[g] = (char)(w).m1;                                               \
		(mn)[g + 2] = (char)(w).m2;                                           \
		(mn)[g + 4] = (char)(w).m3;                                           \
		(mn)[g + 6] = (char)(w).m4;                                           \
	}
// Q4_K and Q5_K units: 64 contiguous elements, sub-block 2c (groups 4c,
// 4c+1: q1, q2) and 2c+1 (groups 4c+2, 4c+3: q3, q4), c = u.
#define TST_Q4K(w, u, q, sc, mn)                                              \
	{                                                                         \
		int e = 64 * (u), g = 4 * (u);                                        \
		vstore16(convert_char16((w).q1), 0, (q) + e);                         \
		vstore16(convert_char16((w).q2), 0, (q) + e + 16);                    \
		vstore16(convert_char16((w).q3), 0, (q) + e + 32);                    \
		vstore16(convert_char16((w).q4), 0, (q) + e + 48);                    \
		(sc)[g] = (sc)[g + 1] = (char)(w).s1;                                 \
		(sc)[g + 2] = (sc)[g + 3] = (char)(w).s2;                             \
		(mn)[g] = (mn)[g + 1] = (char)(w).m1;                                 \
		(mn)[g + 2] = (mn)[g + 3] = (char)(w).m2;                             \
	}
#define TST_q4_k(w, u, q, sc, mn) TST_Q4K(w, u, q, sc, mn)
#define TST_q5_k(w, u, q, sc, mn) TST_Q4K(w, u, q, sc, mn)

// mmt_mins is the integer min terms P of a 256-element block (quant.cl's
// PDOT_T summed over its units) from its sixteen groups' mins mn and the
// activation block's group sums gs (exact integers held in floats): Q2_K
// lane l takes groups 2l and 2l+1, Q4_K lane l groups 4l … 4l+3, Q5_K all
// sixteen in lane 0.
inline int8 mmt_mins(int kind, local const char* mn, local const float* gs) {
	int P[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	if (kind == LK_Q2K)
		for (int l = 0; l < 8; l++)
			P[l] = mn[2 * l] * (int)gs[2 * l] + mn[2 * l + 1] * (int)gs[2 * l + 1];
	else if (kind == LK_Q4K || kind == LK_Q5K)
		for (int p = 0; p < 16; p++)
			P[kind == LK_Q4K ? p >> 2 : 0] += mn[p] * (int)gs[p];
	return vload8(0, P);
}

#define DEFINE_MMT_KERNEL(T, NAME, KIND)                                                       \
	kernel void NAME(global const uchar* w, ulong rowBytes, global const char* xq,             \
			global const float* xd, global float* dst, int K, int M, int n, local int* wq,     \
			local char* wsc, local char* wmn, local float* wds, local int* lx,                 \
			local float* xf) {                                                                 \
		const int TR = MMT_TR(KIND), TC = MMT_TC, BW = BW(T), NB = MMT_KC / BW;                \
		const int XF = NB * XDN_##T, G = MMT_KC / 16;                                          \
		int tx = get_local_id(0), ty = get_local_id(1), TX = get_local_size(0),                \
			TY = get_local_size(1);                                                            \
		int lid = ty * TX + tx, WG = TX * TY;                                                  \
		int BM = TX * TR, BN = TY * TC;                                                        \
		int o0 = get_group_id(0) * BM, i0 = get_group_id(1) * BN;                              \
		lacc acc[MMT_TR(KIND)][MMT_TC];                                                        \
		for (int r = 0; r < TR; r++)                                                           \
			for (int c = 0; c < TC; c++)                                                       \
				LACC_INIT(acc[r][c]);                                                          \
		const int nbk = K / ABLK_##T;                                                          \
		for (int k0 = 0; k0 < K; k0 += MMT_KC) {                                               \
			int kc = min(MMT_KC, K - k0), U = kc / QU_##T;                                     \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
			for (int e = lid; e < BM * U; e += WG) {                                           \
				int r = e / U, u = e - r * U;                                                  \
				global const uchar* row = w + (ulong)min(o0 + r, M - 1) * rowBytes;            \
				wu_##T wu = wload_##T(row, k0 / QU_##T + u);                                   \
				TST_##T(wu, u, (local char*)(wq + r * MMT_P), wsc + r * G, wmn + r * G);       \
				if (u % UPB_##T == 0)                                                          \
					vstore2(wdm(row, (k0 + u * QU_##T) / BW, HDR_##T), r * NB + u / UPB_##T,    \
							wds);                                                              \
			}                                                                                  \
			for (int e = lid; e < BN * (MMT_KC / 4); e += WG) {                                \
				int t = e / (MMT_KC / 4), c = e - t * (MMT_KC / 4);                            \
				lx[t * MMT_P + c] = i0 + t < n && 4 * c < kc                                   \
						? ((global const int*)(xq + (ulong)(i0 + t) * K + k0))[c]              \
						: 0;                                                                   \
			}                                                                                  \
			for (int e = lid; e < BN * XF; e += WG) {                                          \
				int t = e / XF, c = e - t * XF;                                                \
				xf[e] = i0 + t < n && c / XDN_##T * ABLK_##T < kc                              \
						? xd[((ulong)(i0 + t) * nbk + k0 / ABLK_##T) * XDN_##T + c]            \
						: 0.0f;                                                                \
			}                                                                                  \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
			for (int b = 0; b < kc / BW; b++) {                                                \
				for (int r = 0; r < TR; r++) {                                                 \
					int lr = tx + TX * r;                                                      \
					local const int* wr = wq + lr * MMT_P + b * (BW / 4);                      \
					local const char* sr = wsc + lr * G + b * (BW / 16);                       \
					float2 dm = vload2(lr * NB + b, wds);                                      \
					for (int c = 0; c < TC; c++) {                                             \
						int lt = ty + TY * c;                                                  \
						local const int* xr = lx + lt * MMT_P + b * (BW / 4);                  \
						local const float* xp = xf + lt * XF + b * XDN_##T;                    \
						int8 L = 0;                                                            \
						for (int p = 0; p < BW / 32; p++) {                                    \
							int8 l = lanes32(vload8(p, wr), vload8(p, xr));                    \
							if (SC_##T)                                                        \
								l *= (int8)((int4)sr[2 * p], (int4)sr[2 * p + 1]);             \
							L += l;                                                            \
						}                                                                      \
						int8 P = mmt_mins(KIND, wmn + lr * G + b * (BW / 16), xp + 1);         \
						lanes_block(KIND, &acc[r][c], L, P, xp[0],                             \
								KIND == LK_Q81 ? xp[1] : 0.0f, dm);                            \
					}                                                                          \
				}                                                                              \
			}                                                                                  \
		}                                                                                      \
		for (int r = 0; r < TR; r++) {                                                         \
			int o = o0 + tx + TX * r;                                                          \
			for (int c = 0; c < TC; c++) {                                                     \
				int i = i0 + ty + TY * c;                                                      \
				if (o < M && i < n)                                                            \
					dst[(ulong)i * M + o] = lanes_value(KIND, acc[r][c]);                      \
			}                                                                                  \
		}                                                                                      \
	}

#define DEFINE_MMT(T) DEFINE_MMT_KERNEL(T, mmt_##T, LK_PF(LK_##T))

DEFINE_MMT(q8_0)
DEFINE_MMT(q6_k)
DEFINE_MMT(q4_1)
DEFINE_MMT(q5_0)
DEFINE_MMT(q5_1)
DEFINE_MMT(q2_k)
DEFINE_MMT(q3_k)
DEFINE_MMT(q4_k)
DEFINE_MMT(q5_k)
DEFINE_MMT(iq4_nl)
DEFINE_MMT(iq4_xs)
// Q4_0's kind depends on the matrix (LK_q4_0): one kernel per kind, the
// host picks by M.
DEFINE_MMT_KERNEL(q4_0, mmt_q4_0, LK_32)
DEFINE_MMT_KERNEL(q4_0, mmt_r8_q4_0, LK_R8)

// mmt_T for the float weights (x already rounded to T's activation type,
// as mm_T reads it): the CPU backend's order for the call (mode, weights.cl's
// fs_t), each output's lanes kept in f[r][c] from chunk to chunk.
#define DEFINE_MMTF_KERNEL(T)                                                                  \
	kernel void mmt_##T(global const uchar* w, ulong rowBytes, global const float* x,          \
			global float* dst, int K, int M, int n, local float* wl, local float* xl,          \
			int mode) {                                                                        \
		int tx = get_local_id(0), ty = get_local_id(1), TX = get_local_size(0),                \
			TY = get_local_size(1);                                                            \
		int lid = ty * TX + tx, WG = TX * TY;                                                  \
		int BM = TX * MMTF_TR, BN = TY * MMTF_TC;                                              \
		int o0 = get_group_id(0) * BM, i0 = get_group_id(1) * BN;                              \
		const bool bf = FS_KIND_##T == 2;                                                      \
		int groups = fs_groups(mode, bf, K);                                                   \
		fs_t f[MMTF_TR][MMTF_TC];                                                              \
		for (int r = 0; r < MMTF_TR; r++)                                                      \
			for (int c = 0; c < MMTF_TC; c++)                                                  \
				fs_zero(&f[r][c]);                                                             \
		for (int k0 = 0; k0 < K; k0 += MMTF_KC) {                                              \
			int kc = min(MMTF_KC, K - k0);                                                     \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
			for (int e = lid; e < BM * MMTF_KC; e += WG) {                                     \
				int r = e / MMTF_KC, k = e - r * MMTF_KC;                                      \
				global const uchar* row = w + (ulong)min(o0 + r, M - 1) * rowBytes;            \
				wl[r * MMTF_P + k] = k < kc ? elem_##T(row, k0 + k) : 0.0f;                    \
			}                                                                                  \
			for (int e = lid; e < BN * MMTF_KC; e += WG) {                                     \
				int t = e / MMTF_KC, k = e - t * MMTF_KC;                                      \
				xl[t * MMTF_P + k] = i0 + t < n && k < kc ? x[(ulong)(i0 + t) * K + k0 + k]    \
						: 0.0f;                                                                \
			}                                                                                  \
			barrier(CLK_LOCAL_MEM_FENCE);                                                      \
			for (int gl = 0; gl < MMTF_KC / 16 && k0 / 16 + gl < groups; gl++) {               \
				float16 wv[MMTF_TR], xv[MMTF_TC];                                              \
				for (int r = 0; r < MMTF_TR; r++)                                              \
					wv[r] = vload16(0, wl + (tx + TX * r) * MMTF_P + 16 * gl);                 \
				for (int c = 0; c < MMTF_TC; c++)                                              \
					xv[c] = vload16(0, xl + (ty + TY * c) * MMTF_P + 16 * gl);                 \
				for (int r = 0; r < MMTF_TR; r++)                                              \
					for (int c = 0; c < MMTF_TC; c++)                                          \
						fs_add(&f[r][c], mode, FS_KIND_##T, k0 / 16 + gl, wv[r], xv[c]);                \
			}                                                                                  \
		}                                                                                      \
		for (int r = 0; r < MMTF_TR; r++) {                                                    \
			int o = o0 + tx + TX * r;                                                          \
			for (int c = 0; c < MMTF_TC; c++) {                                                \
				int i = i0 + ty + TY * c;                                                      \
				if (o < M && i < n)                                                            \
					dst[(ulong)i * M + o] = fs_finish_##T(&f[r][c], mode,                      \
							w + (ulong)o * rowBytes, x + (ulong)i * K, 16 * groups, K);        \
			}                                                                                  \
		}                                                                                      \
	}

DEFINE_MMTF_KERNEL(f32)
DEFINE_MMTF_KERNEL(f16)
DEFINE_MMTF_KERNEL(bf16)
