//go:build !cgo || !amd64

package cpu

import "github.com/glint-llm/glint/dtype"

// flashWeights is flashWeightsGo where flash.c is not built.
func flashWeights(d, ms, vs []float32, scale, cap float32) float32 {
	return flashWeightsGo(d, ms, vs, scale, cap)
}

// Without cgo (or off amd64) no SIMD level is selected, so flashGroup
// never calls these.

func simdFlashF16Dots(bool, int, int, []float32, []byte, int, []int32, []float32, []float32) {
	panic("cpu: SIMD flash attention not built")
}

func simdFlashQDots(simdLevel, dtype.Type, *acts, int, int, []byte, int, []int32, []float32) {
	panic("cpu: SIMD flash attention not built")
}

func simdFlashValues(dtype.Type, int, int, []byte, int, []int32, []float32, []float32, []float32, []uint16, []float32) bool {
	return false
}
