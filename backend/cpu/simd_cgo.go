//go:build cgo && amd64

package cpu

// #cgo CFLAGS: -O3
// #include "simd.h"
import "C"

import (
	"unsafe"

	"github.com/glint-llm/glint/dtype"
)

// The pointers passed below are to Go or mmap'd memory holding no Go
// pointers and are not kept after the call, as the cgo rules require.

func detectSIMD() simdLevel {
	l := simdLevel(C.glint_simd_level())
	if l == simdVBMI && hostAMX() {
		l = simdAMX
	}
	return l
}

// simdMatMat computes rows lo…hi-1 of every token of a matmul with float
// weights, decode included, in the order t.sum.
func simdMatMat(t *task, rowBytes, lo, hi int) {
	var xh *C.uint16_t
	if len(t.xh) > 0 {
		xh = (*C.uint16_t)(unsafe.Pointer(&t.xh[0]))
	}
	C.glint_matmat(C.int(t.simd), C.int(t.sum), C.int(t.wt), (*C.float)(unsafe.Pointer(&t.x[0])), xh, C.int(t.n), C.int(t.k),
		(*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), C.int(lo), C.int(hi),
		(*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m))
}

// simdMatMatQ computes rows lo…hi-1 of every token of a matmul with
// quantised weights from the quantised activations in t.act.
func simdMatMatQ(level simdLevel, t *task, rowBytes, lo, hi int) {
	if level >= simdAMX && !t.x8 && amxMatMat(t, rowBytes, lo, hi) {
		return
	}
	a := t.act
	var c *C.int32_t
	var s *C.float
	var bs *C.int16_t
	if len(a.c) > 0 {
		c = (*C.int32_t)(unsafe.Pointer(&a.c[0]))
	}
	if len(a.s) > 0 {
		s = (*C.float)(unsafe.Pointer(&a.s[0]))
	}
	if len(a.bs) > 0 {
		bs = (*C.int16_t)(unsafe.Pointer(&a.bs[0]))
	}
	if t.x8 {
		C.glint_matmat_q4_0_x8(C.int(level), (*C.int8_t)(unsafe.Pointer(&a.q[0])), (*C.float)(unsafe.Pointer(&a.d[0])), c,
			C.int(t.n), C.int(t.k), (*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), C.int(lo), C.int(hi),
			(*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m))
		return
	}
	C.glint_matmat_q(C.int(level), C.int(t.wt), (*C.int8_t)(unsafe.Pointer(&a.q[0])),
		(*C.float)(unsafe.Pointer(&a.d[0])), c, s, bs, C.int(t.n), C.int(t.k),
		(*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), C.int(lo), C.int(hi),
		(*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m))
}

// simdQuantize quantises rows lo…hi-1 of x (k wide) into a, as
// quantizeRowsGo does, bit for bit.
func simdQuantize(at dtype.Type, off int32, a *acts, x []float32, k, lo, hi int) {
	if at == dtype.F16 || at == dtype.BF16 {
		if hi > lo && k > 0 {
			var bits *C.uint16_t
			if at == dtype.F16 && len(a.h) >= hi*k {
				bits = (*C.uint16_t)(unsafe.Pointer(&a.h[lo*k]))
			}
			C.glint_round_act(C.int(at), (*C.float)(unsafe.Pointer(&x[lo*k])), (*C.float)(unsafe.Pointer(&a.f[lo*k])), bits,
				C.size_t((hi-lo)*k))
		}
		return
	}
	for i := lo; i < hi; i++ {
		xp := (*C.float)(unsafe.Pointer(&x[i*k]))
		qp := (*C.int8_t)(unsafe.Pointer(&a.q[i*k]))
		switch at {
		case dtype.Q8_0:
			nb := k / dtype.QK8_0
			C.glint_quantize_q8_0(xp, C.int(k), C.int(off), qp, (*C.float)(unsafe.Pointer(&a.d[i*nb])),
				(*C.int32_t)(unsafe.Pointer(&a.c[i*nb])))
		case dtype.Q8_1:
			nb := k / dtype.QK8_0
			C.glint_quantize_q8_1(xp, C.int(k), qp, (*C.float)(unsafe.Pointer(&a.d[i*nb])),
				(*C.float)(unsafe.Pointer(&a.s[i*nb])))

		case dtype.Q8_K:
			C.glint_quantize_q8_k(xp, C.int(k), qp, (*C.float)(unsafe.Pointer(&a.d[i*k/dtype.QK_K])),
				(*C.int16_t)(unsafe.Pointer(&a.bs[i*k/16])))
		}
	}
}

// simdType reports whether the C kernels implement weight type dt.
func simdType(dt dtype.Type) bool {
	switch dt {
	case dtype.F32, dtype.F16, dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q6_K,
		dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.IQ4_NL,
		dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.IQ4_XS:
		return true
	}
	return false
}
