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
