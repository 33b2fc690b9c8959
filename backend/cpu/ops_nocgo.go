//go:build !cgo || !amd64

package cpu

// Without cgo (or off amd64) the backend never selects a SIMD level; should
// these be reached anyway, they run the portable Go loops.

func simdSiLUMul(_ simdLevel, d, g, u []float32) { siluMulGo(d, g, u) }

func simdAttentionOK(int) bool { return false }

const attnScoreRows = 1

const attnAccFloats = 0

func simdAttention(*task, []float32, []float32, int, int, int, []int32) {
	panic("cpu: SIMD attention not built")
}

// Without cgo hostSIMD is off, so simd512 never lets these run.
func simdSiLUMul512(d, g, u []float32) { panic("cpu: SIMD SiLU not built") }

func simdAttention512(*task, []float32, []float32, int, int, int, []int32) {
	panic("cpu: SIMD attention not built")
}

func simdRoPE([]float32, int, int, int, int, []int32, int, float32, []float32, float32, float32, bool, []float32) {
	panic("cpu: SIMD RoPE not built")
}

func simdAdd(d, x, y []float32) { addGo(d, x, y) }
