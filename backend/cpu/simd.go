package cpu

import (
	"fmt"
	"os"
)

// simdLevel selects the matmul kernels: the portable Go ones, or the C ones
// in simd.c for an x86 instruction set.
type simdLevel int

const (
	simdOff    simdLevel = iota // portable Go
	simdAVX2                    // AVX2 + FMA + F16C
	simdAVX512                  // AVX-512 F/BW/VL/DQ as well
	simdVNNI                    // AVX-512 VNNI as well (int8 dot products)
	simdVBMI                    // AVX-512 VBMI as well (level 3's kernels)
)

func (l simdLevel) String() string {
	switch l {
	case simdAVX2:
		return "avx2"
	case simdAVX512:
		return "avx512"
	case simdVNNI:
		return "avx512vnni"
	case simdVBMI:
		return "avx512vbmi"
	}
	return "go"
}

// hostSIMD is the best level this CPU supports; defaultSIMD is what New uses:
// hostSIMD unless GLINT_CPU_SIMD (off, go, avx2, avx512, avx512vnni,
// avx512vbmi) asks for less, which is how the other paths are run and
// compared on a machine that has them all.
var (
	hostSIMD    = detectSIMD()
	hostBF16    = detectBF16() // AVX512_BF16 (vdpbf16ps), beside hostSIMD
	defaultSIMD = func() simdLevel {
		l, err := parseSIMD(os.Getenv("GLINT_CPU_SIMD"), hostSIMD)
		if err != nil {
			fmt.Fprintf(os.Stderr, "glint: %v; using %v\n", err, hostSIMD)
			return hostSIMD
		}
		return l
	}()
)

// parseSIMD reads a GLINT_CPU_SIMD value; a level above what the host
// supports is capped to it, since running those kernels would fault.
func parseSIMD(s string, host simdLevel) (simdLevel, error) {
	var l simdLevel
	switch s {
	case "":
		return host, nil
	case "off", "go":
		l = simdOff
	case "avx2":
		l = simdAVX2
	case "avx512":
		l = simdAVX512
	case "avx512vnni", "vnni":
		l = simdVNNI
	case "avx512vbmi", "vbmi":
		l = simdVBMI
	default:
		return host, fmt.Errorf("cpu: GLINT_CPU_SIMD=%q: want off, avx2, avx512, avx512vnni or avx512vbmi", s)
	}
	return min(l, host), nil
}
