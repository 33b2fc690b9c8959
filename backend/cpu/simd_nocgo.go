//go:build !cgo || !amd64

package cpu

import "github.com/glint-llm/glint/dtype"

// Without cgo (or off amd64) only the portable Go kernels exist; the
// backend never selects a SIMD level, so these are never called.

func initSIMD() {}

func simdRows(*task) bool { return false }

func simdQuantize(dtype.Type, int32, *acts, []float32, int, int, int) {
	panic("cpu: SIMD kernels not built")
}

func simdType(dtype.Type) bool { return false }

func simdToHalf([]uint16, []float32) { panic("cpu: SIMD kernels not built") }
