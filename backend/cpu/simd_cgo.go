//go:build cgo && amd64

package cpu

// #cgo CFLAGS: -O3
// #include "simd.h"
import "C"

import (
	"unsafe"

	"github.com/glint-llm/glint/dtype"
)

func detectSIMD() simdLevel { return simdLevel(C.glint_simd_level()) }

// simdMatVec computes t.dst[o] for rows lo…hi-1 of a one-token matmul. The
// pointers are to Go or mmap'd memory holding no Go pointers and are not kept
// after the call, as the cgo rules require.
func simdMatVec(level simdLevel, t *task, rowBytes, lo, hi int) {
	C.glint_matvec(C.int(level), C.int(t.wt), (*C.float)(unsafe.Pointer(&t.x[0])),
		(*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), C.int(t.k), C.int(lo), C.int(hi),
		(*C.float)(unsafe.Pointer(&t.dst[0])))
}

// simdMatMat computes rows lo…hi-1 of every token of a prefill matmul.
func simdMatMat(level simdLevel, t *task, rowBytes, lo, hi int) {
	C.glint_matmat(C.int(level), C.int(t.wt), (*C.float)(unsafe.Pointer(&t.x[0])), C.int(t.n), C.int(t.k),
		(*C.uint8_t)(unsafe.Pointer(&t.w[0])), C.size_t(rowBytes), C.int(lo), C.int(hi),
		(*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m))
}

// simdTypes are the weight types the C kernels implement.
func simdType(dt dtype.Type) bool {
	switch dt {
	case dtype.F32, dtype.F16, dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q6_K:
		return true
	}
	return false
}
