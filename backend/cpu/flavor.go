package cpu

import (
	"math"
	"os"

	"github.com/glint-llm/glint/dtype"
)

// llama.cpp's CPU results depend on the instruction set it was built for:
// its AVX-512 build sums F16 dot products in 16-lane vectors, and computes
// exp (softmax, SiLU) with another polynomial tail, than its AVX2 build, and
// the two disagree in the last bits. glint reproduces the build that is
// native to the host, as `build-llama.sh cpu` makes it: on a CPU with
// AVX-512 (F, BW, VL, DQ) the attention (over K and V caches of one type)
// and SiLU follow ggml's AVX-512 arithmetic below, at every kernel level, so
// that the levels still agree with each other. Elsewhere they keep the
// arithmetic of attentionItems and siluMulGo. Quantised matmuls need no
// flavour: ggml's x86 kernels for them are AVX2 in both builds
// (quant_lanes.go).

// With the AVX-512 flavour glint's logits equal llama.cpp's to the bit on
// Llama-3.2-1B-shaped K-quant files (internal/peer). GLINT_GGML_FLAVOR=avx2
// selects the other arithmetic on an AVX-512 host (to compare with an AVX2
// build, or to test what AVX2-only hosts run).
var ggml512 = hostSIMD >= simdAVX512 && os.Getenv("GLINT_GGML_FLAVOR") != "avx2"

// expf512 is ggml's AVX-512 ggml_v_expf: the AVX2 version's polynomial
// with its last term fused, scaled by 2^n (vscalefps, exact but for
// overflow and underflow).
func expf512(x float32) float32 {
	_, n, b, u, p := expfReduce(x)
	j := fmaf(p, u, fmaf(expC4, b, 1))

	switch {
	case n > 192:
		return float32(math.Inf(1))
	case n < -192:
		return 0
	case math.IsNaN(float64(n)):
		return float32(math.NaN())
	}
	// scalef rounds once, to nearest even, in the subnormal range too.
	return float32(math.Ldexp(float64(j), int(n)))
}

// reduce16 is gcc's _mm512_reduce_add_ps: halves added lane-wise down to
// one value.
func reduce16(v *[16]float32) float32 {
	var h [8]float32
	for i := range h {
		h[i] = v[i] + v[i+8]
	}
	q0, q1, q2, q3 := h[0]+h[4], h[1]+h[5], h[2]+h[6], h[3]+h[7]
	return (q0 + q2) + (q1 + q3)
}

// dotVec512 is ggml_vec_dot_f16 (half: x and y hold f16 values) or
// ggml_vec_dot_f32 on AVX-512: four 16-lane accumulators over 64-element
// steps, folded 0+2, 1+3, 0+1 and reduced; then the remaining elements,
// added in float64 (f16) or by fused multiply-adds in float32 (f32, as gcc
// contracts ggml's sumf += x·y).
func dotVec512(x, y []float32, half bool) float32 {
	y = y[:len(x)]
	np := len(x) &^ 63
	var s [4][16]float32
	for i := 0; i < np; i += 64 {
		for j := range 4 {
			for l := range 16 {
				s[j][l] = fmaf(x[i+16*j+l], y[i+16*j+l], s[j][l])
			}
		}
	}
	return tail512(&s, x[np:], y[np:], half)
}

// tail512 folds and reduces vec_dot's four accumulators and adds the
// elements past the last 64-element step.
func tail512(s *[4][16]float32, x, y []float32, half bool) float32 {
	r := reduce16Fold(s)
	if !half {
		for i, v := range x {
			r = fmaf(v, y[i], r)
		}
		return r
	}
	sum := float64(r)
	for i, v := range x {
		sum += float64(v * y[i])
	}
	return float32(sum)
}

// dotTiny is llamafile's tinyBLAS dot on AVX-512 (F16 or F32), which ggml's
// prefill runs (at least two tokens, len(x) a multiple of 16): one 16-lane
// accumulator, reduced.
func dotTiny(x, y []float32) float32 {
	y = y[:len(x)]
	var s [16]float32
	for i := 0; i < len(x); i += 16 {
		for l := range 16 {
			s[l] = fmaf(x[i+l], y[i+l], s[l])
		}
	}
	return reduce16(&s)
}

// attentionItems512 is attentionItems in ggml's AVX-512 arithmetic, for K
// and V caches both f16 or both f32 (ggml_mul_mat(k, q), ggml_soft_max_ext,
// ggml_mul_mat(v, kq) without flash attention):
//
//   - llama.cpp's cache view holds nkv = max(32, roundup32(positions))
//     cells, the ones past a row's L masked; the masked ones add nothing
//     anywhere but decide where vec_dot's 64-element steps end;
//   - scores: the query (rounded to f16 over an f16 K) dotted with each key,
//     dotTiny in a prefill (heads whose size is a multiple of 16) and
//     dotVec512 otherwise, then × scale;
//   - softmax: exp(x−max) by expf512 in 16-element blocks, each block
//     reduce16'd and added to a float64 sum; × float32(1/sum), then f16
//     over an f16 V;
//   - out[d] = the probabilities' dot with V's column d over the nkv
//     cells, the same two dot products by the same rule.
func (b *Backend) attentionItems512(t *task, id, lo, hi int) {
	sc := &b.scratch[id]
	if t.simd > simdOff && simdAttentionOK(t.headDim) {
		simdAttention512(t, sc.scores, lo, hi)
		return
	}
	hd, kvCols := t.headDim, t.kvHeads*t.headDim
	group := t.heads / t.kvHeads
	half := t.kh != nil
	qr, kr := sc.row[:hd], sc.row[hd:2*hd]
	cells := t.kvLen
	if cells == 0 {
		cells = t.pos0 + t.n
	}
	nkv := max(32, (cells+31)&^31)
	prefill := t.n > 1
	for it := lo; it < hi; it++ {
		row, h := it/t.heads, it%t.heads
		L := t.kvLen
		if L == 0 {
			L = t.pos0 + row + 1
		}
		kvOff := h / group * hd
		copy(qr, t.q[row*t.qStride+h*hd:row*t.qStride+(h+1)*hd])
		if half {
			dtype.RoundActivations(dtype.F16, qr, qr)
		}
		s := sc.scores[:(L+15)&^15]
		mx := float32(math.Inf(-1))
		for j := range L {
			cacheRow(kr, t.kc, t.kh, j*kvCols+kvOff)
			if prefill && hd%16 == 0 {
				s[j] = dotTiny(kr, qr) * t.scale
			} else {
				s[j] = dotVec512(kr, qr, half) * t.scale
			}
			mx = max(mx, s[j])
		}
		var sum float64
		for j0 := 0; j0 < L; j0 += 16 {
			blk := (*[16]float32)(s[j0:])
			for l := range blk {
				if j0+l < L {
					blk[l] = expf512(blk[l] - mx)
				} else {
					blk[l] = 0
				}
			}
			sum += float64(reduce16(blk))
		}
		inv := float32(1 / sum)
		for j := range s {
			s[j] *= inv
		}
		if half {
			dtype.RoundActivations(dtype.F16, s, s)
		}
		out := t.dst[row*t.qStride+h*hd : row*t.qStride+(h+1)*hd]
		for d := range out {
			out[d] = vColumnDot(t, s[:L], kvOff+d, kvCols, nkv, prefill)
		}
	}
}

// vColumnDot is Σ_j p[j]·V[j][col] in ggml's order for a row of nkv cells
// (p holds the unmasked ones): tinyBLAS's 16 lanes in a prefill,
// vec_dot's 64-element steps and its tail in decode.
func vColumnDot(t *task, p []float32, col, kvCols, nkv int, prefill bool) float32 {
	v := func(j int) float32 {
		if t.vh != nil {
			return f16Table[t.vh[j*kvCols+col]]
		}
		return t.vc[j*kvCols+col]
	}
	if prefill {
		var s [16]float32
		for j, pj := range p {
			s[j%16] = fmaf(v(j), pj, s[j%16])
		}
		return reduce16(&s)
	}
	np := min(nkv&^63, len(p))
	var s [4][16]float32
	for j := range np {
		s[j%64/16][j%16] = fmaf(v(j), p[j], s[j%64/16][j%16])
	}
	r := reduce16Fold(&s)
	if t.vh == nil {
		for j := np; j < len(p); j++ {
			r = fmaf(v(j), p[j], r)
		}
		return r
	}
	sum := float64(r)
	for j := np; j < len(p); j++ {
		sum += float64(v(j) * p[j])
	}
	return float32(sum)
}

// reduce16Fold folds vec_dot's four accumulators (0+2, 1+3, 0+1) and
// reduces the result.
func reduce16Fold(s *[4][16]float32) float32 {
	for l := range 16 {
		s[0][l] += s[2][l]
		s[1][l] += s[3][l]
		s[0][l] += s[1][l]
	}
	return reduce16(&s[0])
}

// siluMul512 is siluMulGo in ggml's AVX-512 arithmetic for elements lo…hi-1
// of t's rows of t.k: ggml_vec_silu_f32 runs expf512 over each row's first
// 16·⌊cols/16⌋ elements (the C kernel, at SIMD levels) and libm's expf over
// the rest (here the float64 exp rounded, which glibc's expf equals but in
// rare ties).
func siluMul512(t *task, lo, hi int) {
	cols := t.k
	for lo < hi {
		rowEnd := (lo/cols + 1) * cols
		vecEnd := min(hi, rowEnd-cols%16)
		if lo < vecEnd {
			d, g, u := t.dst[lo:vecEnd], t.x[lo:vecEnd], t.y[lo:vecEnd]
			if t.simd > simdOff {
				simdSiLUMul512(d, g, u)
			} else {
				for i, x := range g {
					d[i] = x / (1 + expf512(-x)) * u[i]
				}
			}
			lo = vecEnd
		}
		for ; lo < min(hi, rowEnd); lo++ {
			x := t.x[lo]
			t.dst[lo] = x / (1 + float32(math.Exp(float64(-x)))) * t.y[lo]
		}
	}
}
