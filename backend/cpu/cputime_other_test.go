//go:build !linux

package cpu

// threadCPU is unavailable here: benchmarks report wall time alone.
func threadCPU() (int64, bool) { return 0, false }
