//go:build cgo && amd64

package cpu

// #cgo CFLAGS: -O3
// #cgo LDFLAGS: -lm
// #include "flash.h"
// #include "simd.h"
import "C"

import (
	"unsafe"

	"github.com/glint-llm/glint/dtype"
)

// flashWeights is flash.c's glint_flash_weights over d (ms and vs as long).
func flashWeights(d, ms, vs []float32, scale, cap float32) float32 {
	if len(d) == 0 {
		return 0
	}
	_, _ = ms[len(d)-1], vs[len(d)-1]
	return float32(C.glint_flash_weights(C.int(len(d)), (*C.float)(unsafe.Pointer(&d[0])), C.float(scale), C.float(cap),
		(*C.float)(unsafe.Pointer(&ms[0])), (*C.float)(unsafe.Pointer(&vs[0]))))
}

// simdFlashF16Dots is flashGroup's scores over an F16 K (k at the KV
// head's row of cell 0, cells cellBytes apart) by flash.c's
// glint_flash_f16_dots: d[g·nv + i] for the group's query heads q.
func simdFlashF16Dots(wide bool, hd, group int, q []float32, k []byte, cellBytes int, cells []int32, kf, d []float32) {
	if len(cells) == 0 {
		return
	}
	wideC := C.int(0)
	if wide {
		wideC = 1
	}
	_, _, _ = q[group*hd-1], kf[hd-1], d[group*len(cells)-1]
	C.glint_flash_f16_dots(wideC, C.int(hd), C.int(group), (*C.float)(unsafe.Pointer(&q[0])),
		(*C.uint8_t)(unsafe.Pointer(&k[0])), C.size_t(cellBytes), (*C.int32_t)(unsafe.Pointer(&cells[0])),
		C.int(len(cells)), (*C.float)(unsafe.Pointer(&kf[0])), (*C.float)(unsafe.Pointer(&d[0])))
}

// simdFlashQDots is flashGroup's scores over a quantised K by simd.c's
// glint_flash_qdots, the group's query rows quantised in a.
func simdFlashQDots(l simdLevel, kt dtype.Type, a *acts, hd, group int, k []byte, cellBytes int, cells []int32, d []float32) {
	if len(cells) == 0 {
		return
	}
	_ = d[group*len(cells)-1]
	var s *C.float
	if len(a.s) > 0 {
		s = (*C.float)(unsafe.Pointer(&a.s[0]))
	}
	C.glint_flash_qdots(C.glint_level(l), C.int(kt), (*C.int8_t)(unsafe.Pointer(&a.q[0])), (*C.float)(unsafe.Pointer(&a.d[0])),
		s, C.int(hd), C.int(group), (*C.uint8_t)(unsafe.Pointer(&k[0])), C.size_t(cellBytes),
		(*C.int32_t)(unsafe.Pointer(&cells[0])), C.int(len(cells)), (*C.float)(unsafe.Pointer(&d[0])))
}

// simdFlashValues is flashGroup's value loop by flash.c's
// glint_flash_values (v at the KV head's row of cell 0); it reports false,
// having done nothing, for a V type that file does not dequantise.
func simdFlashValues(vt dtype.Type, hd, group int, v []byte, cellBytes int, cells []int32, ms, vs, acc []float32, acc16 []uint16, vrow []float32) bool {
	if len(cells) == 0 {
		return true
	}
	nv := len(cells)
	_, _, _, _, _ = ms[group*nv-1], vs[group*nv-1], acc[group*hd-1], acc16[group*hd-1], vrow[hd-1]
	return C.glint_flash_values(C.int(vt), C.int(hd), C.int(group), (*C.uint8_t)(unsafe.Pointer(&v[0])), C.size_t(cellBytes),
		(*C.int32_t)(unsafe.Pointer(&cells[0])), C.int(nv), (*C.float)(unsafe.Pointer(&ms[0])), (*C.float)(unsafe.Pointer(&vs[0])),
		(*C.float)(unsafe.Pointer(&acc[0])), (*C.uint16_t)(unsafe.Pointer(&acc16[0])), (*C.float)(unsafe.Pointer(&vrow[0]))) != 0
}
