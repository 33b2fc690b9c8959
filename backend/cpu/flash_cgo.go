//go:build cgo && amd64

package cpu

// #cgo CFLAGS: -O3
// #cgo LDFLAGS: -lm
// #include "flash.h"
import "C"

import "unsafe"

// flashWeights is flash.c's glint_flash_weights over d (ms and vs as long).
func flashWeights(d, ms, vs []float32, scale, cap float32) float32 {
	if len(d) == 0 {
		return 0
	}
	_, _ = ms[len(d)-1], vs[len(d)-1]
	return float32(C.glint_flash_weights(C.int(len(d)), (*C.float)(unsafe.Pointer(&d[0])), C.float(scale), C.float(cap),
		(*C.float)(unsafe.Pointer(&ms[0])), (*C.float)(unsafe.Pointer(&vs[0]))))
}
