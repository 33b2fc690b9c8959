//go:build !cgo || !amd64

package cpu

// flashWeights is flashWeightsGo where flash.c is not built.
func flashWeights(d, ms, vs []float32, scale, cap float32) float32 {
	return flashWeightsGo(d, ms, vs, scale, cap)
}
