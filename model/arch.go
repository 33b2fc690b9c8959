package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrArch is wrapped by the error for an architecture glint does not run.
var ErrArch = fmt.Errorf("unsupported architecture")

// archError names the architecture and lists those supported.
func archError(arch string) error {
	return fmt.Errorf("%w %q (supported: %s)", ErrArch, arch, strings.Join(Archs, ", "))
}

// CheckArch returns an error naming arch and the supported architectures
// unless glint runs it.
func CheckArch(arch string) error {
	if !slices.Contains(Archs, arch) {
		return archError(arch)
	}
	return nil
}

// WithArch returns c with what its architecture fixes set, as llama.cpp's
// graph for that architecture computes it; the sizes must already be set.
// Fields a file gives (soft caps, windows, scales) keep their values where
// set. Every architecture but llama stores Q and K unpermuted (NeoX RoPE).
func (c Config) WithArch() (Config, error) {
	if err := CheckArch(c.Arch); err != nil {
		return c, err
	}
	// 1/sqrtf(d) as llama.cpp computes it (float32 sqrt and division).
	invSqrt := func(d int) float32 { return 1 / float32(math.Sqrt(float64(d))) }
	if c.Arch != "llama" {
		c.RopeNeoX = true
	}
	switch c.Arch {
	case "qwen2":
		c.AttnBias = true
	case "qwen3":
		c.QKNorm = true
	case "gemma2", "gemma3":
		c.PostNorms, c.GELU, c.TiedEmbeddings = true, true, true
		if c.EmbedScale == 0 {
			c.EmbedScale = float32(math.Sqrt(float64(c.NEmbd)))
		}
		if c.QueryScale == 0 {
			// llama.cpp scales q by 1/√headDim, but by 1/√(embd/heads)
			// for the 27B models (Gemma 2: 46 layers, Gemma 3: 62), whose
			// query_pre_attn_scalar is that.
			c.QueryScale = invSqrt(c.HeadDim)
			if c.Arch == "gemma2" && c.NLayer == 46 || c.Arch == "gemma3" && c.NLayer == 62 {
				c.QueryScale = invSqrt(c.NEmbd / c.NHead)
			}
		}
		if c.Arch == "gemma2" {
			c.SWAPattern = 2
			if c.SlidingWindow == 0 {
				c.SlidingWindow = 4096
			}
		} else {
			c.QKNorm = true
			c.SWAPattern = 6
			if c.RopeThetaSWA == 0 {
				c.RopeThetaSWA = 10000
			}
		}
	case "phi3":
		c.FusedQKV, c.FusedGateUp = true, true
		c.SWAPattern = 0
		if c.QueryScale == 0 {
			c.QueryScale = invSqrt(c.HeadDim)
		}
	case "gpt2":
		c.LayerNorm, c.GELU, c.NoGate, c.NoRoPE = true, true, true, true
		c.FusedQKV, c.AttnBias, c.OutBias = true, true, true
		c.RopeNeoX, c.RopeDims = false, 0
	}
	return c, nil
}
