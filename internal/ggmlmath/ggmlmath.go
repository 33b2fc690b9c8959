// Package ggmlmath holds the scalar float32 math that llama.cpp's CPU build
// computes with the C library (powf, cosf, sinf, expf, tanhf) and the tables ggml
// builds from it (the F16 GELU table), shared by every glint backend so that
// each reproduces the same bits: glibc's float functions are not correctly
// rounded, and a last-bit difference can round an activation the other way.
package ggmlmath

import (
	"math"
	"sync"

	"github.com/glint-llm/glint/dtype"
)

// ggml's GELU constants (ggml-cpu.c).
const (
	geluCoefA    float32 = 0.044715
	sqrt2OverPi  float32 = 0.79788456080286535587989211986876
	geluTableMin float32 = -10 // at or below: 0
	geluTableMax float32 = 10  // at or above: x
)

// GELUF32 is ggml_gelu_f32, the tanh approximation
// 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))) in float32, its inner
// a·b + 1 fused as gcc contracts it on an FMA host.
func GELUF32(x float32) float32 {
	inner := fmaf(geluCoefA*x, x, 1)
	return 0.5 * x * (1 + Tanhf(sqrt2OverPi*x*inner))
}

var (
	geluOnce  sync.Once
	geluTable []uint16
)

// GELUTable is ggml_table_gelu_f16: for every F16 bit pattern h, the F16
// bits of GELUF32(h). The table has 65536 entries and must not be modified.
func GELUTable() []uint16 {
	geluOnce.Do(func() {
		t := make([]uint16, 1<<16)
		for i := range t {
			t[i] = dtype.F32ToF16(GELUF32(dtype.F16ToF32(uint16(i))))
		}
		geluTable = t
	})
	return geluTable
}

// GELU is ggml_vec_gelu_f32 as llama.cpp's CPU build computes it
// (GGML_GELU_FP16): 0 at or below −10, x at or above 10, otherwise x
// rounded to F16 (ties to even) and looked up in GELUTable. Its results are
// F16 values.
func GELU(x float32) float32 {
	switch {
	case x <= geluTableMin:
		return 0
	case x >= geluTableMax:
		return x
	}
	return dtype.F16ToF32(GELUTable()[dtype.F32ToF16(x)])
}

// SoftCap is c·tanh(x/c) as ggml's graph computes it: x scaled by the
// float32 reciprocal 1/c (ggml_scale), tanhf, then scaled by c.
func SoftCap(x, c float32) float32 {
	return Tanhf(x*(1/c)) * c
}

func fmaf(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// RoPECosSin fills cs[2i], cs[2i+1] with the cos and sin of pair i's angle
// at position p, for len(cs)/2 pairs, as ggml's rope computes them: the
// angle is p·thetaScaleⁱ, the power taken by repeated float32
// multiplication, divided by freqs[i] (Llama 3's frequency factors) when
// freqs is not nil, then multiplied by freqScale (linear scaling); cos and
// sin are the C library's (CosSinf), multiplied by mscale (LongRoPE's
// attention factor). Backends that turn keys with these values agree with
// llama.cpp to the bit, so an f16 cache rounds the keys alike.
func RoPECosSin(cs []float32, p int32, thetaScale float32, freqs []float32, freqScale, mscale float32) {
	theta := float32(p)
	for i := range len(cs) / 2 {
		t := theta
		if freqs != nil {
			t = theta / freqs[i]
		}
		c, s := CosSinf(freqScale * t)
		cs[2*i], cs[2*i+1] = c*mscale, s*mscale
		theta *= thetaScale
	}
}
