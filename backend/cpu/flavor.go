package cpu

import (
	"math"

	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/numerics"
)

// The backend reproduces the arithmetic of one llama.cpp CPU build, its
// flavour (numerics.Flavour, from Options; by default the build native to
// the host, as `build-llama.sh cpu` makes it): with the AVX-512 flavour the
// attention (over K and V caches of one type) and SiLU follow ggml's
// AVX-512 arithmetic below; otherwise, and for mixed cache types, its AVX2
// arithmetic (attentionHeads, siluMul8). Float-weight matmuls take the
// flavour's tinyBLAS and vec_dot lanes (numerics.Order, kernels.go). Either
// runs at every kernel level, so that the levels still agree with each
// other; without AVX-512 the AVX-512 arithmetic runs in Go at every level.
// With its build's flavour glint's logits equal llama.cpp's to the bit on
// the staged K-quant files and on Llama-3.2-1B-shaped K-quant files
// (internal/peer).

// Flavour is the llama.cpp CPU build whose arithmetic the backend's
// attention, SiLU and float-weight matmuls reproduce.
func (b *Backend) Flavour() numerics.Flavour { return b.flavour }

// simd512 reports whether the AVX-512 flavour's C kernels may run at level l.
func simd512(l simdLevel) bool { return l > simdOff && hostSIMD >= simdAVX512 }

// simdBF16 reports whether the C kernels that sum by vdpbf16ps may run at
// level l.
func simdBF16(l simdLevel) bool { return simd512(l) && hostBF16 }

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
// added in float64 (f16) or in float32 as tail512 does.
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
// elements past the last 64-element step: for f16 their (exact) products
// in float64; for f32 as the AVX-512 build adds them (tailF32, groups of 8).
func tail512(s *[4][16]float32, x, y []float32, half bool) float32 {
	r := reduce16Fold(s)
	if !half {
		return tailF32(r, x, y, 8)
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

// attentionHeads512 is attentionHeads in ggml's AVX-512 arithmetic, for K
// and V caches both f16 or both f32 (ggml_mul_mat(k, q), ggml_soft_max_ext,
// ggml_mul_mat(v, kq) without flash attention):
//
//   - llama.cpp's cache view holds nkv = max(32, roundup32(cells)) cells,
//     those a row does not see masked; here a row's view is its range
//     [lo, hi), so nkv = max(32, roundup32(hi−lo)), and a cell's place in
//     it (its lane) is its offset from lo. The masked cells add nothing
//     anywhere but decide where vec_dot's 64-element steps end;
//   - scores: the query (rounded to f16 over an f16 K) dotted with each key,
//     dotTiny in a prefill (heads whose size is a multiple of 16) and
//     dotVec512 otherwise, then soft-capped and scaled (task.score);
//   - softmax: exp(x−max) by expf512 in 16-element blocks of the view, each
//     block reduce16'd and added to a float64 sum (a masked cell is −∞
//     there, so its exp is 0, as llama.cpp's mask makes it); × float32(1/sum),
//     then f16 over an f16 V;
//   - out[d] = the probabilities' dot with V's column d over the view, the
//     same two dot products by the same rule.
func (b *Backend) attentionHeads512(t *task, sc *scratch, row, h0, h1 int, runs []int32) {
	if simd512(t.simd) && simdAttentionOK(t.headDim) {
		simdAttention512(t, sc.scores, sc.acc, row, h0, h1, runs)
		return
	}
	hd, kvCols := t.headDim, t.kvHeads*t.headDim
	group := t.heads / t.kvHeads
	half := t.kh != nil
	qr, kr := sc.row[:hd], sc.row[hd:2*hd]
	base, hi := int(t.rows[4*row+2]), int(t.rows[4*row+3])
	nkv := max(32, (hi-base+31)&^31)
	L := int(runs[len(runs)-1]) - base // the view up to the last cell seen
	j0 := (int(runs[0]) - base) &^ 15  // the block of the first
	s := sc.scores[:(L+15)&^15]
	prefill := t.prefill(row)
	for h := h0; h < h1; h++ {
		kvOff := h / group * hd
		qo := row*t.qStride + h*hd
		copy(qr, t.q[qo:qo+hd])
		if half {
			dtype.RoundActivations(dtype.F16, qr, qr)
		}
		masked(s, runs, base, j0)
		mx := float32(math.Inf(-1))
		for r := 0; r < len(runs); r += 2 {
			for j := int(runs[r]); j < int(runs[r+1]); j++ {
				cacheRow(kr, t.kc, t.kh, j*kvCols+kvOff)
				var x float32
				if prefill && hd%16 == 0 {
					x = t.score(dotTiny(kr, qr))
				} else {
					x = t.score(dotVec512(kr, qr, half))
				}
				s[j-base] = x
				mx = max(mx, x)
			}
		}
		var sum float64
		for b0 := j0; b0 < L; b0 += 16 {
			blk := (*[16]float32)(s[b0:])
			for l := range blk {
				if b0+l < L {
					blk[l] = expf512(blk[l] - mx)
				} else {
					blk[l] = 0
				}
			}
			sum += float64(reduce16(blk))
		}
		inv := float32(1 / sum)
		p := s[j0:]
		for j := range p {
			p[j] *= inv
		}
		if half {
			dtype.RoundActivations(dtype.F16, p, p)
		}
		out := t.dst[qo : qo+hd]
		for d := range out {
			out[d] = vColumnDot(t, s, runs, base, kvOff+d, kvCols, nkv, prefill)
		}
	}
}

// masked sets the scores of the cells in [base+j0, last seen) that the row
// does not see (those between and before runs) to −∞.
func masked(s []float32, runs []int32, base, j0 int) {
	inf := float32(math.Inf(-1))
	from := j0
	for r := 0; r < len(runs); r += 2 {
		for j := from; j < int(runs[r])-base; j++ {
			s[j] = inf
		}
		from = int(runs[r+1]) - base
	}
}

// vColumnDot is Σ_j p[j]·V[j][col] in ggml's order over the cells of runs
// (p indexed from base, the row's view): tinyBLAS's 16 lanes in a prefill,
// vec_dot's 64-element steps up to nkv&^63 and its tail in decode. A
// masked cell's product would be 0: it is left out.
func vColumnDot(t *task, p []float32, runs []int32, base, col, kvCols, nkv int, prefill bool) float32 {
	v := func(j int) float32 {
		if t.vh != nil {
			return f16Table[t.vh[j*kvCols+col]]
		}
		return t.vc[j*kvCols+col]
	}
	if prefill {
		var s [16]float32
		for r := 0; r < len(runs); r += 2 {
			for j := int(runs[r]); j < int(runs[r+1]); j++ {
				i := j - base
				s[i%16] = fmaf(v(j), p[i], s[i%16])
			}
		}
		return reduce16(&s)
	}
	np := nkv &^ 63
	var s [4][16]float32
	for r := 0; r < len(runs); r += 2 {
		for j := int(runs[r]); j < min(int(runs[r+1]), base+np); j++ {
			i := j - base
			s[i%64/16][i%16] = fmaf(v(j), p[i], s[i%64/16][i%16])
		}
	}
	res := reduce16Fold(&s)
	sum := float64(res)
	// The view's remainder, 0 or 32 cells, is whole 8-element chunks, so an
	// F32 V adds its every product rounded (tail512).
	for r := 0; r < len(runs); r += 2 {
		for j := max(int(runs[r]), base+np); j < int(runs[r+1]); j++ {
			if t.vh == nil {
				res += float32(v(j) * p[j-base])
			} else {
				sum += float64(v(j) * p[j-base])
			}
		}
	}
	if t.vh == nil {
		return res
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

// siluMul16 is ggml's AVX-512 ggml_v_silu followed by the product with up
// (siluMulRows runs it over each row's first 16·⌊cols/16⌋ elements): the C
// kernel at a SIMD level, else expf512 in Go.
func siluMul16(l simdLevel, d, g, u []float32) {
	if simd512(l) {
		simdSiLUMul512(d, g, u)
		return
	}
	for i, x := range g {
		d[i] = x / (1 + expf512(-x)) * u[i]
	}
}
