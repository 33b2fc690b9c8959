package numerics

import "fmt"

// Flavour is a llama.cpp CPU build whose arithmetic glint reproduces.
// llama.cpp's CPU results depend on the instruction set it was built for:
// its AVX-512 build sums F16 and F32 dot products in 16-lane vectors and
// computes exp (softmax, SiLU) with another polynomial tail, where its AVX2
// build uses 8 lanes, and the two disagree in the last bits. A build for a
// CPU with AVX512_BF16 (Zen 4, Sapphire Rapids: what GGML_NATIVE makes
// there) also sums BF16 dot products by vdpbf16ps, in pairs of elements.
// Quantised matmuls need no flavour: ggml's x86 kernels for them are AVX2
// in every build.
type Flavour uint8

const (
	FlavourAVX2       Flavour = iota // 8-lane vectors
	FlavourAVX512                    // 16-lane vectors
	FlavourAVX512BF16                // FlavourAVX512, BF16 summed by vdpbf16ps
)

func (f Flavour) String() string {
	switch f {
	case FlavourAVX512:
		return "avx512"
	case FlavourAVX512BF16:
		return "avx512bf16"
	}
	return "avx2"
}

// ParseFlavour reads a flavour's name; "" is the build native to h (as
// llama.cpp's build-llama.sh cpu makes it there).
func ParseFlavour(s string, h Host) (Flavour, error) {
	switch s {
	case "":
		return h.Flavour(), nil
	case "avx2":
		return FlavourAVX2, nil
	case "avx512":
		return FlavourAVX512, nil
	case "avx512bf16":
		return FlavourAVX512BF16, nil
	}
	return h.Flavour(), fmt.Errorf("numerics: ggml flavour %q: want avx2, avx512 or avx512bf16", s)
}

// Flavour is the flavour of the build native to h.
func (h Host) Flavour() Flavour {
	switch {
	case h.Level >= AVX512 && h.BF16:
		return FlavourAVX512BF16
	case h.Level >= AVX512:
		return FlavourAVX512
	}
	return FlavourAVX2
}

// Wide reports the AVX-512 arithmetic (16-lane vectors, ggml_v_expf's
// AVX-512 tail).
func (f Flavour) Wide() bool { return f != FlavourAVX2 }

// BF16 reports BF16 dot products summed by vdpbf16ps.
func (f Flavour) BF16() bool { return f == FlavourAVX512BF16 }

// Lanes is the flavour's vector width in floats: the lanes of its
// vectorised exp (softmax, SiLU) and of tinyBLAS's float sums.
func (f Flavour) Lanes() int {
	if f.Wide() {
		return 16
	}
	return 8
}
