//go:build !cgo || !amd64

package cpu

import "math"

// Without cgo (or off amd64) the backend never selects a SIMD level; should
// these be reached anyway, they run the portable Go loops.

func simdSiLUMul(_ simdLevel, d, g, u []float32) { siluMulGo(d, g, u) }

func simdAttentionOK(int) bool { return false }

const attnScoreRows = 1

func simdAttention(*task, []float32, int, int, int, []int32) { panic("cpu: SIMD attention not built") }

// ggml512 is never set without cgo (hostSIMD is off), so these are not
// reached.
func simdSiLUMul512(d, g, u []float32) { panic("cpu: SIMD SiLU not built") }

func simdAttention512(*task, []float32, int, int, int, []int32) {
	panic("cpu: SIMD attention not built")
}

// Without a C library: powf, cosf, sinf and tanhf as the float64
// functions rounded (which glibc's differ from in about 1% of angles).
func libmPow(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }

func libmCosSin(x float32) (float32, float32) {
	return float32(math.Cos(float64(x))), float32(math.Sin(float64(x)))
}

func libmTanh(x float32) float32 { return float32(math.Tanh(float64(x))) }
