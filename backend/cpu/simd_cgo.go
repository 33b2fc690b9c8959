//go:build cgo && amd64

package cpu

// #cgo CFLAGS: -O3
// #include "simd.h"
import "C"

import (
	"sync/atomic"
	"unsafe"

	"github.com/glint-llm/glint/dtype"
)

// The C kernels split decode from prompt at GLINT_DECODE_TOKENS: these two
// constants fail to compile unless it is decodeTokens.
const (
	_ = uint(decodeTokens - C.GLINT_DECODE_TOKENS)
	_ = uint(C.GLINT_DECODE_TOKENS - decodeTokens)
)

// The C kernels take numerics.Level as glint_level (simd.h): these fail to
// compile unless each level has the same number on both sides.
const (
	_ = uint(C.GLINT_GO - int(simdOff))
	_ = uint(int(simdOff) - C.GLINT_GO)
	_ = uint(C.GLINT_AVX2 - int(simdAVX2))
	_ = uint(int(simdAVX2) - C.GLINT_AVX2)
	_ = uint(C.GLINT_AVX512 - int(simdAVX512))
	_ = uint(int(simdAVX512) - C.GLINT_AVX512)
	_ = uint(C.GLINT_VNNI - int(simdVNNI))
	_ = uint(int(simdVNNI) - C.GLINT_VNNI)
	_ = uint(C.GLINT_VBMI - int(simdVBMI))
	_ = uint(int(simdVBMI) - C.GLINT_VBMI)
	_ = uint(C.GLINT_LEVELS - 1 - int(simdVBMI)) // and no level past VBMI in C
)

// The pointers passed below are to Go or mmap'd memory holding no Go
// pointers and are not kept after the call, as the cgo rules require.

// initSIMD fills the C kernels' tables (on a host with AVX2).
func initSIMD() { C.glint_simd_init() }

// simdRows runs this thread's share of the SIMD matmul t: the kernels
// claim the task's chunks from t.next themselves (glint_rows in simd.h), a
// prompt's all in one cgo call, a decode's (decodeTokens) one a call. It
// reports false, having done nothing, where the chunks go one by one
// through matMulRows instead: the portable kernels.
func simdRows(t *task) bool {
	if t.simd == simdOff {
		return false
	}
	if t.sum.Paired() && (!simdBF16(t.simd) || len(t.xh) < t.n*t.k) {
		return false // the portable kernels emulate vdpbf16ps
	}
	rowBytes, _ := t.wt.RowBytes(t.k)
	claims, perCall := t.claims(), t.claims()
	if t.n <= decodeTokens {
		perCall = 1
	}
	r := cRows(&t.next, t.grain, 0, t.total, perCall)
	for {
		if t.act != nil {
			matMatQ(t.simd, t, rowBytes, r)
		} else {
			matMat(t, rowBytes, r)
		}
		if t.next.Load() >= int64(claims) {
			return true
		}
	}
}

// cRows is glint_rows: chunks of grain rows from lo up to hi, each claimed
// from next, at most perCall of them a cgo call.
func cRows(next *atomic.Int64, grain, lo, hi, perCall int) C.glint_rows {
	// An atomic.Int64 is its int64 alone, which the C side adds to
	// atomically.
	return C.glint_rows{next: (*C.int64_t)(unsafe.Pointer(next)), grain: C.int(grain), lo: C.int(lo), hi: C.int(hi),
		max_claims: C.int(perCall)}
}

// matMat computes the rows r names of every token of a matmul with float
// weights, decode included, in the order t.sum.
func matMat(t *task, rowBytes int, r C.glint_rows) {
	var xh *C.uint16_t
	if len(t.xh) > 0 {
		xh = (*C.uint16_t)(unsafe.Pointer(&t.xh[0]))
	}
	C.glint_matmat(C.glint_level(t.simd), C.int(t.sum), C.int(t.wt), (*C.float)(unsafe.Pointer(&t.x[0])), xh, C.int(t.n), C.int(t.k),
		(*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), r, (*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m))
}

// matMatQ computes the rows r names of every token of a matmul with
// quantised weights from the quantised activations in t.act.
func matMatQ(level simdLevel, t *task, rowBytes int, r C.glint_rows) {
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
		C.glint_matmat_q4_0_x8(C.glint_level(level), (*C.int8_t)(unsafe.Pointer(&a.q[0])), (*C.float)(unsafe.Pointer(&a.d[0])), c,
			C.int(t.n), C.int(t.k), (*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), r,
			(*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m))
		return
	}
	C.glint_matmat_q(C.glint_level(level), C.int(t.wt), (*C.int8_t)(unsafe.Pointer(&a.q[0])),
		(*C.float)(unsafe.Pointer(&a.d[0])), c, s, bs, C.int(t.n), C.int(t.k),
		(*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), r, (*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m))
}

// simdQuantize quantises rows lo…hi-1 of x (k wide) into a, as
// quantizeRowsGo does, bit for bit.
func simdQuantize(at dtype.Type, off int32, a *acts, x []float32, k, lo, hi int) {
	if at == dtype.F16 || at == dtype.BF16 {
		if hi > lo && k > 0 {
			var bits *C.uint16_t
			if len(a.h) >= hi*k {
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

// simdToHalf stores the F16 bits of src in dst (as long), as
// dtype.F32ToF16 does, bit for bit.
func simdToHalf(dst []uint16, src []float32) {
	if len(src) > 0 {
		C.glint_to_f16((*C.float)(unsafe.Pointer(&src[0])), (*C.uint16_t)(unsafe.Pointer(&dst[0])), C.size_t(len(src)))
	}
}
