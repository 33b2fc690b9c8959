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

// simdAttention computes the (row, head) items lo…hi-1 of t with the C
// kernel; scores holds attnScoreRows·L floats for the longest L.
func simdAttention(t *task, scores []float32, lo, hi int) {
	k, v := unsafe.Pointer(unsafe.SliceData(t.kc)), unsafe.Pointer(unsafe.SliceData(t.vc))
	kf16, vf16 := 0, 0
	if t.kh != nil {
		k, kf16 = unsafe.Pointer(&t.kh[0]), 1
	}
	if t.vh != nil {
		v, vf16 = unsafe.Pointer(&t.vh[0]), 1
	}
	C.glint_attention(C.int(t.simd), (*C.float)(unsafe.Pointer(&t.q[0])), k, v, C.int(kf16), C.int(vf16),
		(*C.float)(unsafe.Pointer(&t.dst[0])), (*C.float)(unsafe.Pointer(&scores[0])), C.int(t.heads),
		C.int(t.kvHeads), C.int(t.headDim), C.int(t.qStride), C.int(t.pos0), C.int(t.kvLen), C.float(t.scale),
		C.int(lo), C.int(hi))
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

// simdAttention512 is attentionItems512 in C.
func simdAttention512(t *task, scores []float32, lo, hi int) {
	k, v := unsafe.Pointer(unsafe.SliceData(t.kc)), unsafe.Pointer(unsafe.SliceData(t.vc))
	half := 0
	if t.kh != nil {
		k, v, half = unsafe.Pointer(&t.kh[0]), unsafe.Pointer(&t.vh[0]), 1
	}
	C.glint_attention512((*C.float)(unsafe.Pointer(&t.q[0])), k, v, C.int(half), (*C.float)(unsafe.Pointer(&t.dst[0])),
		(*C.float)(unsafe.Pointer(&scores[0])), C.int(t.heads), C.int(t.kvHeads), C.int(t.headDim), C.int(t.qStride),
		C.int(t.pos0), C.int(t.kvLen), C.int(t.n), C.float(t.scale), C.int(lo), C.int(hi))
}

// libmPow is the C library's powf.
func libmPow(x, y float32) float32 { return float32(C.powf(C.float(x), C.float(y))) }

// libmCosSin is the C library's cosf and sinf of x.
func libmCosSin(x float32) (float32, float32) {
	return float32(C.cosf(C.float(x))), float32(C.sinf(C.float(x)))
}
