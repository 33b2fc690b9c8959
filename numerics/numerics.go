// Package numerics owns the choices that decide a result's bits beyond the
// model and its input, so that the CPU and OpenCL backends agree on them
// without importing each other: the CPU kernel level (which x86 kernels
// run; every level gives the same bits), the ggml flavour (which llama.cpp
// CPU build's arithmetic the attention, SiLU and float-weight matmuls
// reproduce), and the float summation orders and lane widths that the
// flavour implies. The host's capabilities are detected here; the choice
// comes in through Options (glint.Options.Numerics, cpu.Options,
// opencl.Options), the host's best where unset. Only the command line and
// test setup read the environment (FromEnv); the backends never do.
package numerics

import (
	"fmt"
	"os"
	"sync"
)

// Options are the numerics choices as a user names them; the zero value is
// the host's best level and the build native to the host.
type Options struct {
	// Level caps the CPU backend's kernel level: "" (the host's best), off
	// (or go), avx2, avx512, avx512vnni (vnni) or avx512vbmi (vbmi). A level
	// above the host's is capped to it, since its kernels would fault.
	Level string `json:"level,omitempty"`
	// Flavour names the llama.cpp CPU build whose arithmetic both backends
	// reproduce: "" (the build native to the host), avx2, avx512 or
	// avx512bf16. Any flavour runs on any host (the AVX-512 ones in Go where
	// the CPU lacks AVX-512).
	Flavour string `json:"flavour,omitempty"`
}

// Env names the environment variables FromEnv reads.
const (
	LevelEnv   = "GLINT_CPU_SIMD"
	FlavourEnv = "GLINT_GGML_FLAVOR"
)

// FromEnv is Options from GLINT_CPU_SIMD and GLINT_GGML_FLAVOR: for the
// command line and for test setup, which compare levels and flavours on one
// machine without flags of their own.
func FromEnv() Options {
	return Options{Level: os.Getenv(LevelEnv), Flavour: os.Getenv(FlavourEnv)}
}

// Settings are resolved Options.
type Settings struct {
	Level   Level
	Flavour Flavour
}

// Resolve is o on host h: Level capped to h's, Flavour the build native to
// h where unset.
func (o Options) Resolve(h Host) (Settings, error) {
	l, err := ParseLevel(o.Level, h)
	if err != nil {
		return Settings{}, err
	}
	f, err := ParseFlavour(o.Flavour, h)
	if err != nil {
		return Settings{}, err
	}
	return Settings{Level: l, Flavour: f}, nil
}

// Host is what this CPU runs.
type Host struct {
	Level Level // the best kernel level
	BF16  bool  // AVX512_BF16 (vdpbf16ps), with Level ≥ AVX512
}

// HostCPU is this machine's Host, detected once.
func HostCPU() Host { return hostCPU() }

var hostCPU = sync.OnceValue(func() Host {
	l := detectLevel()
	return Host{Level: l, BF16: l >= AVX512 && detectBF16()}
})

// Level is a CPU kernel level: the portable Go kernels, or the C ones for an
// x86 instruction set. Each level includes the ones below it.
type Level uint8

const (
	Go     Level = iota // portable Go
	AVX2                // AVX2 + FMA + F16C
	AVX512              // AVX-512 F/BW/VL/DQ as well
	VNNI                // AVX-512 VNNI as well (int8 dot products)
	VBMI                // AVX-512 VBMI as well
)

func (l Level) String() string {
	switch l {
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	case VNNI:
		return "avx512vnni"
	case VBMI:
		return "avx512vbmi"
	}
	return "go"
}

// ParseLevel reads a level's name ("": h's best), capped to h's level.
func ParseLevel(s string, h Host) (Level, error) {
	var l Level
	switch s {
	case "":
		return h.Level, nil
	case "off", "go":
		l = Go
	case "avx2":
		l = AVX2
	case "avx512":
		l = AVX512
	case "avx512vnni", "vnni":
		l = VNNI
	case "avx512vbmi", "vbmi":
		l = VBMI
	default:
		return h.Level, fmt.Errorf("numerics: CPU kernel level %q: want off, avx2, avx512, avx512vnni or avx512vbmi", s)
	}
	return min(l, h.Level), nil
}
