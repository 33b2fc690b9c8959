package opencl

import (
	"math"
)

// ropeThetaScale is ggml's theta_scale = theta^(-2/dims), the ratio of
// consecutive pairs' angles (see rope.cl), rounded as the CPU backend and
// llama.cpp round it: the exponent in float32, the power in float64.
func ropeThetaScale(theta float32, dims int) float32 {
	return float32(math.Pow(float64(theta), float64(float32(-2)/float32(dims))))
}
