// Shared helpers for every glint kernel. OpenCL C 1.2 with no extensions:
// halves are read with vload_half (no cl_khr_fp16), reductions go through
// local memory (no subgroups), so the same source runs on every device.
//
// Work-group reductions assume a power-of-two local size; the host picks one.

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

// wg_max is wg_sum for the maximum.
inline float wg_max(local float* red, float v) {
	int lid = get_local_id(0);
	red[lid] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
		if (lid < s)
			red[lid] = fmax(red[lid], red[lid + s]);
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

inline void report(volatile global int* status, int code, int detail) {
	if (atomic_cmpxchg(&status[0], 0, code) == 0)
		status[1] = detail;
}
