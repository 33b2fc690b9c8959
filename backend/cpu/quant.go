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
// K-quant, Q4_0 and Q8_0 files identical to llama.cpp's.

// acts holds rounded activation rows. Quantised: q holds k int8 values per
// row; for Q8_0, d and c hold one scale and one correction per 32 (see
// simd.h: the correction -off·Σq lets the SIMD kernels of Q4_0 treat
// weights as unsigned); Q8_1 holds d and s, one block sum per 32 (dtype.Q8_1Sum), and
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
	h  []uint16 // F16 or BF16 rows' bits as well, for the SIMD kernels that read those
	n  int      // rows: more than one is a prefill, which ggml sums in another order
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
// expect (see simd.c): Q4_0 nibbles are stored as q+8. (The kernels in
// lanes take their offsets off per lane themselves.)
func actOffset(dt dtype.Type) int32 {
	if dt == dtype.Q4_0 {
		return 8
	}
	return 0
}

// grow makes room for n rows of k elements of activation type at (with
// bits, a prompt's F16 bits too, and with pairs, BF16's for vdpbf16ps: acts.h).
func (a *acts) grow(at dtype.Type, n, k int, bits, pairs bool) {
	if at == dtype.F16 || at == dtype.BF16 {
		if len(a.f) < n*k {
			a.f = make([]float32, n*k)
		}
		// The SIMD prefill tiles for F16 read its bits, and the vdpbf16ps
		// kernels BF16's.
		if bits && (at == dtype.F16 && n > 1 || at == dtype.BF16 && pairs) && len(a.h) < n*k {
			a.h = make([]uint16, n*k)
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

// dotQ dispatches a quantised dot on the weight type: row i of a against
// one weight row of a matrix of rows rows.
func dotQ(dt dtype.Type, a *acts, i, k int, w []byte, rows int, prefill bool) float32 {
	switch {
	case dt == dtype.Q4_0 && rows%8 == 0:
		return dotQ4_0Repacked(a.q[i*k:(i+1)*k], a.d[i*k/dtype.QK4_0:], w)
	case dt.ActivationType() == dtype.Q8_K:
		return dotKLanes(dt, a, i, k, w)
	}
	return dot32Lanes(dt, a, i, k, w, prefill)
}
