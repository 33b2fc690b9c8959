//go:build cgo && amd64

package cpu

// #cgo CFLAGS: -O3
// #cgo LDFLAGS: -lm
// #include <math.h>
// #include "ops.h"
import "C"

import "unsafe"

// The pointers passed below are to Go or mmap'd memory holding no Go
// pointers and are not kept after the call, as the cgo rules require.

// simdSiLUMul computes d[i] = silu(g[i])·u[i] with the C kernel of level.
func simdSiLUMul(level simdLevel, d, g, u []float32) {
	if len(d) == 0 {
		return
	}
	_, _ = g[len(d)-1], u[len(d)-1]
	C.glint_silu_mul(C.int(level), (*C.float)(unsafe.Pointer(&g[0])), (*C.float)(unsafe.Pointer(&u[0])),
		(*C.float)(unsafe.Pointer(&d[0])), C.size_t(len(d)))
}

// simdAttentionOK reports whether the C attention kernel takes heads of
// headDim.
func simdAttentionOK(headDim int) bool {
	return headDim > 0 && headDim <= C.GLINT_ATTENTION_MAX_HEAD_DIM
}

// attnScoreRows is how many heads' scores the C kernel holds at once: the
// scratch it needs is attnScoreRows times the longest row.
const attnScoreRows = 4

// attnAccFloats is the scratch for p·V lane sums the C kernels take.
const attnAccFloats = C.GLINT_ATTENTION_ACC_FLOATS

// simdAttention computes heads h0…h1-1 of t's row over the cells of runs
// with the C kernel; scores holds attnScoreRows times the row's range, acc
// attnAccFloats.
func simdAttention(t *task, scores, acc []float32, row, h0, h1 int, runs []int32) {
	k, v := unsafe.Pointer(unsafe.SliceData(t.kc)), unsafe.Pointer(unsafe.SliceData(t.vc))
	kf16, vf16 := 0, 0
	if t.kh != nil {
		k, kf16 = unsafe.Pointer(&t.kh[0]), 1
	}
	if t.vh != nil {
		v, vf16 = unsafe.Pointer(&t.vh[0]), 1
	}
	prefill := 0
	if t.prefill(row) {
		prefill = 1
	}
	qo := row * t.qStride
	C.glint_attention(C.int(t.simd), (*C.float)(unsafe.Pointer(&t.q[qo])), k, v, C.int(kf16), C.int(vf16),
		(*C.float)(unsafe.Pointer(&t.dst[qo])), (*C.float)(unsafe.Pointer(&scores[0])), (*C.float)(unsafe.Pointer(&acc[0])),
		C.int(t.heads), C.int(t.kvHeads), C.int(t.headDim), (*C.int32_t)(unsafe.Pointer(&runs[0])), C.int(len(runs)/2),
		C.int(t.rows[4*row+2]), C.int(prefill), C.float(t.scale), C.float(t.softCap), C.int(h0), C.int(h1))
}

// simdSiLUMul512 is siluMul512's expf512 part (every element of d) in C.
func simdSiLUMul512(d, g, u []float32) {
	if len(d) == 0 {
		return
	}
	_, _ = g[len(d)-1], u[len(d)-1]
	C.glint_silu_mul512((*C.float)(unsafe.Pointer(&g[0])), (*C.float)(unsafe.Pointer(&u[0])),
		(*C.float)(unsafe.Pointer(&d[0])), C.size_t(len(d)))
}

// simdAttention512 is attentionHeads512 in C; acc holds attnAccFloats.
func simdAttention512(t *task, scores, acc []float32, row, h0, h1 int, runs []int32) {
	k, v := unsafe.Pointer(unsafe.SliceData(t.kc)), unsafe.Pointer(unsafe.SliceData(t.vc))
	half := 0
	if t.kh != nil {
		k, v, half = unsafe.Pointer(&t.kh[0]), unsafe.Pointer(&t.vh[0]), 1
	}
	prefill := 0
	if t.prefill(row) {
		prefill = 1
	}
	base, hi := int(t.rows[4*row+2]), int(t.rows[4*row+3])
	nkv := max(32, (hi-base+31)&^31)
	qo := row * t.qStride
	C.glint_attention512((*C.float)(unsafe.Pointer(&t.q[qo])), k, v, C.int(half), (*C.float)(unsafe.Pointer(&t.dst[qo])),
		(*C.float)(unsafe.Pointer(&scores[0])), (*C.float)(unsafe.Pointer(&acc[0])), C.int(t.heads), C.int(t.kvHeads),
		C.int(t.headDim), (*C.int32_t)(unsafe.Pointer(&runs[0])), C.int(len(runs)/2), C.int(base), C.int(nkv), C.int(prefill),
		C.float(t.scale), C.float(t.softCap), C.int(h0), C.int(h1))
}

// simdRoPE rotates n rows of x as RoPE's Go loop does (see glint_rope);
// cs is scratch for dims floats.
func simdRoPE(x []float32, n, cols, heads, headDim int, pos []int32, dims int, thetaScale float32, freqs []float32,
	freqScale, mscale float32, neox bool, cs []float32) {
	if n == 0 {
		return
	}
	_, _, _ = x[n*cols-1], pos[n-1], cs[dims-1]
	var fp *C.float
	if freqs != nil {
		_ = freqs[dims/2-1]
		fp = (*C.float)(unsafe.Pointer(&freqs[0]))
	}
	nx := 0
	if neox {
		nx = 1
	}
	C.glint_rope((*C.float)(unsafe.Pointer(&x[0])), C.int(n), C.int(cols), C.int(heads), C.int(headDim),
		(*C.int32_t)(unsafe.Pointer(&pos[0])), C.int(dims), C.float(thetaScale), fp, C.float(freqScale),
		C.float(mscale), C.int(nx), (*C.float)(unsafe.Pointer(&cs[0])))
}

// simdAdd computes d[i] = x[i] + y[i] with the C kernel.
func simdAdd(d, x, y []float32) {
	if len(d) == 0 {
		return
	}
	_, _ = x[len(d)-1], y[len(d)-1]
	C.glint_add((*C.float)(unsafe.Pointer(&x[0])), (*C.float)(unsafe.Pointer(&y[0])), (*C.float)(unsafe.Pointer(&d[0])),
		C.size_t(len(d)))
}
