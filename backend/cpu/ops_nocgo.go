//go:build !cgo || !amd64

package cpu

// Without cgo (or off amd64) the backend never selects a SIMD level; should
// these be reached anyway, they run the portable Go loops.

func simdSiLUMul(_ simdLevel, d, g, u []float32) { siluMulGo(d, g, u) }

func simdAttentionOK(int) bool { return false }

const attnScoreRows = 1

func simdAttention(*task, []float32, int, int) { panic("cpu: SIMD attention not built") }
