//go:build !cgo

package ggmlmath

import "math"

// Without a C library: the float64 functions rounded to float32 (which
// glibc's float functions differ from in the last bit for about 1% of
// arguments).

// Powf is x^y rounded to float32.
func Powf(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }

// CosSinf is cos and sin of x rounded to float32.
func CosSinf(x float32) (float32, float32) {
	return float32(math.Cos(float64(x))), float32(math.Sin(float64(x)))
}

// Expf is e^x rounded to float32.
func Expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// Tanhf is tanh of x rounded to float32.
func Tanhf(x float32) float32 { return float32(math.Tanh(float64(x))) }
