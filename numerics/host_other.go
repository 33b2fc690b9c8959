//go:build !cgo || !amd64

package numerics

// Without cgo (or off amd64) only the portable Go kernels exist.
func detectLevel() Level { return Go }

func detectBF16() bool { return false }
