package numerics

import "github.com/glint-llm/glint/dtype"

// Order is a float summation order: how llama.cpp's CPU build sums a
// matmul's float weights (F32, F16, BF16) against its activations, which
// every backend reproduces to give its bits. Its choice, per call:
// llamafile's tinyBLAS when it takes the call (at least two tokens, k a
// multiple of its vector's floats, the rows a multiple of 4:
// llamafile_sgemm), else ggml_vec_dot_* for every output. Each is a fixed
// assignment of elements to float lanes, summed by fused multiply-adds, and
// a fixed reduction (backend/cpu's kernels.go). The numbers are the
// backends' too: simd.c's S_* and kernels/weights.cl's fs_t take them.
type Order uint8

const (
	// SumVec8 is ggml_vec_dot_f16/f32/bf16 on AVX2: four 8-lane
	// accumulators over 32-element steps (element i in lane i%32), folded
	// and reduced, then the elements past the last step.
	SumVec8 Order = iota
	// SumVec16 is the same on AVX-512: four 16-lane accumulators over
	// 64-element steps (BF16: two over 32-element steps, each reduced and
	// added in float64).
	SumVec16
	// SumTiny8 is tinyBLAS on AVX2: one 8-lane accumulator over k, hsum8'd.
	SumTiny8
	// SumTiny16 is tinyBLAS on AVX-512: one 16-lane accumulator, reduce16'd.
	SumTiny16
	// SumVecBF16 is ggml_vec_dot_bf16 by vdpbf16ps (FlavourAVX512BF16): two
	// 16-lane accumulators over 64-element steps, the first taking each
	// step's elements 0…31 and the second 32…63, a pair of elements a lane;
	// each reduced and added in float64, then the elements past the last
	// step.
	SumVecBF16
	// SumTinyBF16 is tinyBLAS by vdpbf16ps: one such 16-lane accumulator over
	// 32-element steps, reduce16'd.
	SumTinyBF16
)

// FloatOrder is the order f's build takes for a matmul of n tokens by m
// rows of k elements of float type dt.
func (f Flavour) FloatOrder(dt dtype.Type, n, k, m int) Order {
	if dt == dtype.BF16 && f.BF16() {
		if n >= 2 && k%32 == 0 && m%4 == 0 {
			return SumTinyBF16
		}
		return SumVecBF16
	}
	kn, tiny, vec := 8, SumTiny8, SumVec8
	if f.Wide() {
		kn, tiny, vec = 16, SumTiny16, SumVec16
	}
	if n >= 2 && k%kn == 0 && m%4 == 0 {
		return tiny
	}
	return vec
}

// Paired reports whether the order sums by vdpbf16ps, in pairs of elements.
func (s Order) Paired() bool { return s == SumVecBF16 || s == SumTinyBF16 }

// Lanes is how many float lanes the order keeps for weight type dt: element
// i of a row goes to lane i%lanes, up to the last whole step (the vdpbf16ps
// orders: the elements of a step, which go to half as many lanes in pairs).
func (s Order) Lanes(dt dtype.Type) int {
	switch s {
	case SumTiny8:
		return 8
	case SumTiny16:
		return 16
	case SumTinyBF16:
		return 32
	case SumVecBF16:
		return 64
	case SumVec16:
		if dt == dtype.BF16 {
			return 32
		}
		return 64
	}
	return 32
}
