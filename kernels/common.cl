// Shared helpers for every glint kernel. OpenCL C 1.2 with no extensions:
// halves are read with vload_half (no cl_khr_fp16), reductions go through
// local memory, so the same source runs on every device. Vendor fast paths
// are build options the host adds where the device offers them (SUBGROUPS
// below, DOT4_KHR in gemm.cl).
//
// Work-group reductions assume a power-of-two local size; the host picks one.

// SUBGROUPS: the device offers cl_khr_subgroups or cl_intel_subgroups
// (which has the same built-ins). They are declared here as well, since a
// compiler may declare them only for OpenCL C 2.0, and the programs are
// built as 1.2. A maximum is the same in any order, so the attention's
// maxima take the sub-group's built-in and local memory only across
// sub-groups; float sums keep the local-memory tree, whose order the
// CPU backend's bits depend on.
#ifdef SUBGROUPS
uint __attribute__((overloadable)) get_sub_group_id(void);
uint __attribute__((overloadable)) get_num_sub_groups(void);
uint __attribute__((overloadable)) get_sub_group_local_id(void);
float __attribute__((overloadable)) sub_group_reduce_max(float);
#endif

// wg_sum returns the sum of v over the work-group. Every work-item must call
// it (it has barriers); red holds get_local_size(0) floats.
inline float wg_sum(local float* red, float v) {
	int lid = get_local_id(0);
	red[lid] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
		if (lid < s)
			red[lid] += red[lid + s];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	float r = red[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}

// seg_sum reduces v over the S consecutive work-items (lanes) of one
// segment of the work-group (S a power of two dividing the local size):
// several matrix rows share a group, S lanes per row. Every work-item must
// call it; lane 0 of each segment gets the segment's sum.
inline float seg_sum(local float* red, int lid, int lane, int S, float v) {
	red[lid] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int h = S / 2; h > 0; h >>= 1) {
		if (lane < h)
			red[lid] += red[lid + h];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	return red[lid];
}

// The status word lets kernels report bad input (which only the device sees,
// such as token ids) without a read-back per op: the first report wins.
#define STATUS_BAD_ID 1
// An attention row's sequence id is outside 0…63 (detail: the row).
#define STATUS_BAD_SEQ 2
// An attention row's cell range is reversed or outside the view [Lo, Hi).
#define STATUS_BAD_RANGE 3

inline void report(volatile global int* status, int code, int detail) {
	if (atomic_cmpxchg(&status[0], 0, code) == 0)
		status[1] = detail;
}

// Rounding to llama.cpp's activation and KV-cache types, as float: a matmul
// with F16 (BF16) weights sees its activations rounded to F16 (BF16), and
// attention over an f16 cache rounds the query and the probabilities (ggml's
// vec_dot_type). Products of two such values are exact in float, so
// rounding the float operand is the whole difference.

// FP16: the device offers cl_khr_fp16. Then f16_round and f16_round16
// take its conversion to half (nearest even) and back, one instruction
// each way on a GPU. That is the whole of the half arithmetic glint takes:
// a rounding gives the same value whichever way it is done, while half
// products and sums would leave the CPU backend's bits.
#ifdef FP16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

inline float f16_round(float v) { return convert_float(convert_half_rte(v)); }

inline float16 f16_round16(float16 v) { return convert_float16(convert_half16_rte(v)); }
#else
// f16_round is v rounded to half precision, nearest with ties to even
// (ggml's GGML_FP32_TO_FP16 with F16C): no half arithmetic is needed (no
// cl_khr_fp16), only vstore_half_rte's conversion, which also gets
// subnormals, overflow to infinity and NaN right.
inline float f16_round(float v) {
	ushort h;
	vstore_half_rte(v, 0, (private half*)&h);
	return vload_half(0, (private const half*)&h);
}

// f16_round16 is f16_round for 16 values, in integer vector operations:
// a matrix-vector kernel rounds every activation it reads, and the round
// trip through vstore_half16_rte is scalar code on some devices (PoCL), 2×
// slower there. The normal range keeps 10 mantissa bits, nearest even (a
// carry into the exponent is right, and from 65520 on it reaches 2^16,
// which becomes infinity); below 2^-14 the halves are multiples of 2^-24,
// which rint finds exactly; a NaN stays a quiet NaN.
inline float16 f16_round16(float16 v) {
	uint16 u = as_uint16(v);
	uint16 a = u & (uint16)0x7fffffffu;
	uint16 r = (a + (uint16)0xfffu + ((a >> (uint16)13) & (uint16)1u)) & (uint16)0xffffe000u;
	r = select(r, (uint16)0x7f800000u, r >= (uint16)0x47800000u);
	uint16 sub = as_uint16(rint(as_float16(a) * 0x1p24f) * 0x1p-24f);
	r = select(r, sub, a < (uint16)0x38800000u);
	r = select(r, a | (uint16)0x00400000u, a > (uint16)0x7f800000u);
	return as_float16(r | (u & (uint16)0x80000000u));
}
#endif

// bf16_round is v rounded to bfloat16 as ggml's GGML_FP32_TO_BF16 does:
// nearest, ties to even, in the bits (no flush of subnormals), and a NaN
// stays a NaN, made quiet.
inline float bf16_round(float v) {
	uint u = as_uint(v);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return as_float((u & 0xffff0000u) | 0x00400000u);
	return as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

inline float16 bf16_round16(float16 v) {
	uint16 u = as_uint16(v);
	uint16 r = (u + (uint16)0x7fffu + ((u >> (uint16)16) & (uint16)1u)) & (uint16)0xffff0000u;
	uint16 nan = (u & (uint16)0xffff0000u) | (uint16)0x00400000u;
	return as_float16(select(r, nan, (u & (uint16)0x7fffffffu) > (uint16)0x7f800000u));
}

// expf_ggml is e^x as llama.cpp's vectorised ggml_v_expf computes it (ARM's
// optimized-routines algorithm: 2^n by exponent arithmetic, a degree-5
// polynomial on the remainder, every a·b+c a fused multiply-add), operation
// for operation as the CPU backend's expf: OpenCL's fma is correctly
// rounded, so SiLU and the softmax get the CPU's and llama.cpp's bits.
inline float expf_ggml(float x) {
	const float r = 0x1.8p23f, l2e = 0x1.715476p+0f, ln1 = 0x1.62e4p-1f, ln2 = 0x1.7f7d1cp-20f;
	const float c0 = 0x1.0e4020p-7f, c1 = 0x1.573e2ep-5f, c2 = 0x1.555e66p-3f, c3 = 0x1.fffdb6p-2f,
			c4 = 0x1.ffffecp-1f;
	float z = fma(x, l2e, r);
	float n = z - r;
	float b = fma(-n, ln2, fma(-n, ln1, x));
	uint e = as_uint(z) << 23;
	float k = as_float(e + as_uint(1.0f));
	float u = b * b;
	float j = fma(fma(fma(c0, b, c1), u, fma(c2, b, c3)), u, c4 * b);
	float an = fabs(n);
	if (!(an > 126.0f))
		return fma(j, k, k);
	uint g = n <= 0.0f ? 0x82000000u : 0u;
	float s1 = as_float(g + 0x7f000000u);
	float s2 = as_float(e - g);
	if (an > 192.0f)
		return s1 * s1;
	return fma(s2, j, s2) * s1;
}

// expf512_ggml is e^x as llama.cpp's AVX-512 build's ggml_v_expf computes it
// (the CPU backend's expf512): expf_ggml's reduction and polynomial with its
// last term fused, scaled by 2^n exactly (vscalefps; ldexp is exact but for
// overflow and underflow).
inline float expf512_ggml(float x) {
	const float r = 0x1.8p23f, l2e = 0x1.715476p+0f, ln1 = 0x1.62e4p-1f, ln2 = 0x1.7f7d1cp-20f;
	const float c0 = 0x1.0e4020p-7f, c1 = 0x1.573e2ep-5f, c2 = 0x1.555e66p-3f, c3 = 0x1.fffdb6p-2f,
			c4 = 0x1.ffffecp-1f;
	float z = fma(x, l2e, r);
	float n = z - r;
	float b = fma(-n, ln2, fma(-n, ln1, x));
	float u = b * b;
	float j = fma(fma(fma(c0, b, c1), u, fma(c2, b, c3)), u, fma(c4, b, 1.0f));
	if (isnan(n))
		return n;
	if (n > 192.0f)
		return INFINITY;
	if (n < -192.0f)
		return 0.0f;
	return ldexp(j, (int)n);
}

// expf_lanes is ggml's vectorised exp of the build whose vectors hold lanes
// floats: expf512_ggml for 16 (AVX-512), expf_ggml otherwise.
inline float expf_lanes(float x, int lanes) { return lanes == 16 ? expf512_ggml(x) : expf_ggml(x); }

// att_acc is ggml's ggml_float sum (attention, float-weight matmuls):
// float64 where the device has it, else a float pair (hi, lo) kept as
// Knuth's two-sum leaves it.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double att_acc;
inline att_acc att_acc_of(float x) { return x; }
inline att_acc att_add(att_acc s, float x) { return s + (double)x; }
inline float att_round(att_acc s) { return (float)s; }
#else
typedef float2 att_acc;
inline att_acc att_acc_of(float x) { return (float2)(x, 0.0f); }
inline att_acc att_add(att_acc s, float x) {
	float h = s.x + x, v = h - s.x;
	float lo = s.y + ((s.x - (h - v)) + (x - v));
	float hi = h + lo;
	return (float2)(hi, lo - (hi - h));
}
inline float att_round(att_acc s) { return s.x + s.y; }
#endif
