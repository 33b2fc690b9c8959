package cpu

import (
	"github.com/glint-llm/glint/dtype"
)

// Quantised matmuls follow llama.cpp: the activations are rounded to the
// weight type's activation type (dtype.ActivationType, dtype.RoundActivations)
// and each block's dot product is an exact integer, scaled by the weight's
// and the activation's block scales in float32.
//
// The float sums follow ggml's x86 kernels (quant_lanes.go), which the
// AVX-512 builds of llama.cpp run too, so that the result is llama.cpp's to
// the bit: eight float lanes, each fed one exact integer per block by a
// fused multiply-add, and reduced as ggml reduces them; Q4_0 matrices of
// rows a multiple of 8, which ggml repacks, one such accumulator. Every
// kernel level keeps those accumulators (TestMatMulLevelsBitExact checks
// it), and internal/peer's teacher-forced test finds the logits of the
// K-quant and Q4_0 files identical to llama.cpp's.
//
// Q8_0 does not yet: there each block's contribution,
// (d_w·d_x)·Σ q_w·q_x rounded to float32, is added in float64 and the total
// rounded to float32 once. A float32 value has 24 significant bits, so a
// float64 sum of them is exact, in any order, as long as the contributions
// of a row span less than 2^(29-log2 blocks) in magnitude (2^23 for a
// 2048-wide row); beyond that only bits far below the float32 result are
// lost, which changes its rounding with a probability of about 2^-29. So
// its kernels keep accumulators of their own (tiles, VNNI and AMX ones)
// and still give the portable path's bits, but not ggml's.

// acts holds rounded activation rows. Quantised: q holds k int8 values per
// row; for Q8_0, d and c hold one scale and one correction per 32 (see
// simd.h: the correction -off·Σq lets the SIMD kernels treat weights as
// unsigned); Q8_1 holds d and s, one block sum per 32 (dtype.Q8_1Sum), and
// no correction, which the kernels of its weights (Q4_1, Q5_1) do not need; for
// Q8_K, d holds one scale per 256 and bs one sum per 16. F16 and BF16: f
// holds the rounded values as float32, which the float kernels read in place
// of x.
type acts struct {
	q  []int8
	d  []float32
	c  []int32
	s  []float32
	bs []int16
	f  []float32
	n  int // rows: more than one is a prefill, which ggml sums in another order
}

// actKey says what acts currently holds, so that consecutive matmuls
// reading the same activations (Q, K and V from one normalised x; gate and
// up) quantise them once. A tensor's version changes whenever an op or a
// host write may have changed it (Backend.wrote), which is what makes the
// reuse safe.
type actKey struct {
	x       *Tensor
	version uint64
	at      dtype.Type
	off     int32
	n, k    int
}

// actOffset is the correction offset the SIMD kernels of weight type dt
// expect (see simd.c): Q4_0 nibbles are stored as q+8, and Q8_0 bytes are
// made unsigned by adding 128.
func actOffset(dt dtype.Type) int32 {
	switch dt {
	case dtype.Q4_0:
		return 8
	case dtype.Q8_0:

		return 128
	}
	return 0
}

// grow makes room for n rows of k elements of activation type at.
func (a *acts) grow(at dtype.Type, n, k int) {
	if at == dtype.F16 || at == dtype.BF16 {
		if len(a.f) < n*k {
			a.f = make([]float32, n*k)
		}
		return
	}
	if len(a.q) < n*k {
		a.q = make([]int8, n*k)
	}
	switch at {
	case dtype.Q8_0, dtype.Q8_1:
		if len(a.d) < n*k/dtype.QK8_0 {
			a.d = make([]float32, n*k/dtype.QK8_0)
		}
		if at == dtype.Q8_0 && len(a.c) < n*k/dtype.QK8_0 {
			a.c = make([]int32, n*k/dtype.QK8_0)
		}
		if at == dtype.Q8_1 && len(a.s) < n*k/dtype.QK8_0 {
			a.s = make([]float32, n*k/dtype.QK8_0)
		}
	case dtype.Q8_K:
		if len(a.d) < n*k/dtype.QK_K {
			a.d = make([]float32, n*k/dtype.QK_K)
		}
		if len(a.bs) < n*k/16 {
			a.bs = make([]int16, n*k/16)
		}
	}
}

// quantizeRowsGo is the portable quantiser: the reference's own scale
// functions and rounding, so it agrees with dtype.RoundActivations by
// construction. F16 and BF16 rows are rounded by the reference itself.
func quantizeRowsGo(at dtype.Type, off int32, a *acts, x []float32, k, lo, hi int) {
	if at == dtype.F16 || at == dtype.BF16 {
		dtype.RoundActivations(at, a.f[lo*k:hi*k], x[lo*k:hi*k])
		return
	}
	for i := lo; i < hi; i++ {
		xr, qr := x[i*k:(i+1)*k], a.q[i*k:(i+1)*k]
		switch at {
		case dtype.Q8_0, dtype.Q8_1:
			nb := k / dtype.QK8_0
			for b := range nb {
				xb := xr[b*dtype.QK8_0 : (b+1)*dtype.QK8_0]
				d, id := dtype.Q8_0Scale(xb)
				var s int32
				for j := b * dtype.QK8_0; j < (b+1)*dtype.QK8_0; j++ {
					qr[j] = int8(dtype.RoundEven(xr[j] * id))
					s += int32(qr[j])
				}
				a.d[i*nb+b] = d
				if at == dtype.Q8_0 {
					a.c[i*nb+b] = -off * s
				} else {
					a.s[i*nb+b] = dtype.Q8_1Sum(xb)
				}
			}

		case dtype.Q8_K:
			nb := k / dtype.QK_K
			for b := range nb {
				d, iscale := dtype.Q8_KScale(xr[b*dtype.QK_K : (b+1)*dtype.QK_K])
				for g := range dtype.QK_K / 16 {
					var s int32
					for j := b*dtype.QK_K + 16*g; j < b*dtype.QK_K+16*g+16; j++ {
						qr[j] = int8(min(127, dtype.RoundEven(iscale*xr[j])))
						s += int32(qr[j])
					}
					a.bs[i*k/16+b*16+g] = int16(s)
				}
				a.d[i*nb+b] = d
			}
		}
	}
}

// dotQ8_0 is Σ_b f16(dw)·dx·Σ qw·qx.
func dotQ8_0(q []int8, xd []float32, w []byte) float32 {
	nb := len(q) / dtype.QK8_0
	w = w[:nb*dtype.BlockBytesQ8_0]
	var sum float64
	for b := range nb {
		blk := (*[dtype.BlockBytesQ8_0]byte)(w[b*dtype.BlockBytesQ8_0:])
		qb := (*[dtype.QK8_0]int8)(q[b*dtype.QK8_0:])
		var s int32
		for j := range dtype.QK8_0 {
			s += int32(int8(blk[2+j])) * int32(qb[j])
		}
		c := f16Table[uint16(blk[0])|uint16(blk[1])<<8] * xd[b] * float32(s)
		sum += float64(c)
	}
	return float32(sum)
}

// dotQ dispatches a quantised dot on the weight type: row i of a against
// one weight row of a matrix of rows rows.
func dotQ(dt dtype.Type, a *acts, i, k int, w []byte, rows int) float32 {
	q := a.q[i*k : (i+1)*k]
	switch {
	case dt == dtype.Q4_0 && rows%8 == 0:
		return dotQ4_0Repacked(q, a.d[i*k/dtype.QK4_0:], w)
	case dt == dtype.Q8_0:
		return dotQ8_0(q, a.d[i*k/dtype.QK8_0:], w)
	}

	if dt.ActivationType() == dtype.Q8_K {
		return dotKLanes(dt, a, i, k, w)
	}
	return dot32Lanes(dt, a, i, k, w, a.n > 1)
}
