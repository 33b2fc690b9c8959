//go:build cgo && amd64

package cpu

// #cgo CFLAGS: -O3
// #include "amx.h"
import "C"

import (
	"unsafe"

	"github.com/glint-llm/glint/dtype"
)

// hostAMX reports whether the AMX kernels may run: the CPU has them and the
// OS granted the tile state (which glint_amx_init requests once).
func hostAMX() bool { return C.glint_amx_init() != 0 }

// amxMatMat runs rows lo…hi-1 of a prefill matmul on the AMX kernel, and
// reports false (having done nothing) where that kernel does not apply or
// could not get its working memory.
func amxMatMat(t *task, rowBytes, lo, hi int) bool {
	if !amxApplies(t) {
		return false
	}
	a := t.act
	return C.glint_matmat_amx(C.int(t.wt), (*C.int8_t)(unsafe.Pointer(&a.q[0])), (*C.float)(unsafe.Pointer(&a.d[0])),
		(*C.int32_t)(unsafe.Pointer(&a.c[0])), C.int(t.n), C.int(t.k), (*C.uint8_t)(unsafe.Pointer(&t.w[0])),
		C.size_t(rowBytes), C.int(lo), C.int(hi), (*C.float)(unsafe.Pointer(&t.dst[0])), C.int(t.m)) != 0
}

// amxApplies reports whether the AMX kernel takes matmul t.
func amxApplies(t *task) bool {
	return t.n >= amxMinTokens && t.k%32 == 0 && amxOrder(t.wt)
}

// amxOrder reports whether amx.c sums weight type dt in the portable path's
// order. It adds each block's float32 term in double, and no type's
// reference does that any more: Q4_0 and Q8_0 follow ggml's x86 order (one
// fused multiply-add per block into one float, or into eight lanes;
// quant.go), so the AMX level runs the VNNI/VBMI kernels of simd.c until
// amx.c's float part is converted, on a host with AMX to test it.
func amxOrder(dtype.Type) bool { return false }
