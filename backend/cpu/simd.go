package cpu

import "github.com/glint-llm/glint/numerics"

// simdLevel selects the matmul kernels: the portable Go ones, or the C ones
// in simd.c for an x86 instruction set (numerics.Level).
type simdLevel = numerics.Level

const (
	simdOff    = numerics.Go
	simdAVX2   = numerics.AVX2
	simdAVX512 = numerics.AVX512
	simdVNNI   = numerics.VNNI
	simdVBMI   = numerics.VBMI
)

// hostSIMD is the best level this CPU supports, hostBF16 whether it has
// AVX512_BF16 (vdpbf16ps) beside it: what the C kernels may run, whatever
// the options choose.
var (
	hostSIMD = func() simdLevel {
		l := numerics.HostCPU().Level
		if l > simdOff {
			initSIMD()
		}
		return l
	}()
	hostBF16 = numerics.HostCPU().BF16
)
