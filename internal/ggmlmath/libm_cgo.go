//go:build cgo

package ggmlmath

// #cgo LDFLAGS: -lm
// #include <math.h>
import "C"

// Powf is the C library's powf.
func Powf(x, y float32) float32 { return float32(C.powf(C.float(x), C.float(y))) }

// CosSinf is the C library's cosf and sinf of x.
func CosSinf(x float32) (float32, float32) {
	return float32(C.cosf(C.float(x))), float32(C.sinf(C.float(x)))
}

// Expf is the C library's expf, which ggml_silu_f32 calls.
func Expf(x float32) float32 { return float32(C.expf(C.float(x))) }

// Tanhf is the C library's tanhf.
func Tanhf(x float32) float32 { return float32(C.tanhf(C.float(x))) }
