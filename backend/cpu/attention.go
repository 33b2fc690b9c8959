package cpu

import (
	"math"
	"unsafe"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// AttentionGen implements backend.Backend.
func (b *Backend) AttentionGen(out, q, k, v backend.Tensor, kvLen, heads, kvHeads, headDim int, scale float32) {
	b.attention("AttentionGen", out, q, k, v, 1, 0, kvLen, heads, kvHeads, headDim, scale)
}

// Attention implements backend.Backend.
func (b *Backend) Attention(out, q, k, v backend.Tensor, n, pos0, heads, kvHeads, headDim int, scale float32) {
	b.attention("Attention", out, q, k, v, n, pos0, 0, heads, kvHeads, headDim, scale)
}

// cacheTensor resolves a K or V cache, which is F32 or F16.
func (b *Backend) cacheTensor(op, arg string, t backend.Tensor) *Tensor {
	ct, err := b.own(op, arg, t)
	if err != nil {
		b.fail(err)
		return nil
	}
	if ct.dt != dtype.F32 && ct.dt != dtype.F16 {
		b.fail(backend.ShapeError("cpu: "+op, "%s is %v, want F32 or F16", arg, ct.dt))
		return nil
	}
	return ct
}

// halfs views an F16 tensor's bytes as its 16-bit values.
func halfs(t *Tensor) []uint16 {
	if len(t.data) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&t.data[0])), len(t.data)/2)
}

// attention is both ops: kvLen > 0 is decode (every row sees kvLen
// positions), kvLen == 0 is causal prefill (row i sees pos0+i+1 positions).
func (b *Backend) attention(op string, out, q, k, v backend.Tensor, n, pos0, kvLen, heads, kvHeads, headDim int, scale float32) {
	if !b.ok(op) {
		return
	}
	o := b.tensor(op, "out", out, dtype.F32)
	qt := b.tensor(op, "q", q, dtype.F32)
	kt := b.cacheTensor(op, "k", k)
	vt := b.cacheTensor(op, "v", v)
	if o == nil || qt == nil || kt == nil || vt == nil || !b.writable(op, "out", o) || !b.checkN(op, n, o, qt) {
		return
	}
	if heads <= 0 || kvHeads <= 0 || headDim <= 0 || heads%kvHeads != 0 {
		b.fail(backend.ShapeError("cpu: "+op, "%d heads, %d kv heads of %d: heads must be a positive multiple of kv heads", heads, kvHeads, headDim))
		return
	}
	cols, kvCols := heads*headDim, kvHeads*headDim
	if backend.Cols(qt) != cols || backend.Cols(o) != cols {
		b.fail(backend.ShapeError("cpu: "+op, "q %v, out %v: want rows of %d×%d", qt.shape, o.shape, heads, headDim))
		return
	}
	ke, ve := backend.Elems(kt.shape), backend.Elems(vt.shape)
	maxSeq := ke / kvCols
	if ke%kvCols != 0 || ve != ke {
		b.fail(backend.ShapeError("cpu: "+op, "k %v, v %v: want equal caches of [_, %d, %d]", kt.shape, vt.shape, kvHeads, headDim))
		return
	}
	last := kvLen // positions the longest row attends to
	if kvLen == 0 {
		last = pos0 + n
	}
	if op == "AttentionGen" && kvLen <= 0 || pos0 < 0 || last > maxSeq {
		b.fail(backend.ShapeError("cpu: "+op, "kvLen %d, pos0 %d, n %d: cache holds %d positions", kvLen, pos0, n, maxSeq))
		return
	}
	if n == 0 {
		return
	}
	// The C kernel scores up to attnScoreRows heads of one kv head at once.
	simd, rows := simdOff, 1
	if b.simd > simdOff && simdAttentionOK(headDim) {
		simd, rows = b.simd, attnScoreRows
	}
	for i := range b.scratch {
		sc := &b.scratch[i]
		// attentionItems512 rounds a row up to whole 16-element blocks.
		if len(sc.scores) < rows*(last+15) {
			sc.scores = make([]float32, rows*(maxSeq+15))
		}

		if len(sc.row) < 2*headDim {
			sc.row = make([]float32, 2*headDim)
			sc.acc = make([]float64, headDim)
		}
	}
	t := &b.pool.task
	total := n * heads
	grain := b.grainFor(total)
	if simd > simdOff {
		// Chunks of whole kv-head groups let the kernel share every
		// cache row it loads among the group's heads; items are
		// row·heads + head, so multiples of the group stay aligned.
		group := heads / kvHeads
		grain = (grain + group - 1) / group * group
		if n*heads*last*headDim < 1<<18 {
			// A short context (most decode steps) takes the C kernel a few
			// microseconds on one thread, less than waking another costs.
			grain = total
		}
	}
	*t = task{kind: kAttention, total: total, grain: grain, dst: o.f32, q: qt.f32, kc: kt.f32, vc: vt.f32,
		n: n, heads: heads, kvHeads: kvHeads, headDim: headDim, qStride: cols, pos0: pos0, kvLen: kvLen, scale: scale,
		simd: simd}
	if kt.dt == dtype.F16 {
		t.kh = halfs(kt)
	}
	if vt.dt == dtype.F16 {
		t.vh = halfs(vt)
	}
	b.pool.run()
}

// attentionItems handles (row, head) items lo…hi-1. This is the reference
// arithmetic, llama.cpp's (ggml_mul_mat of K and q, ggml_soft_max_ext,
// ggml_mul_mat of V and the probabilities), with its rounding points:
//
//   - over an F16 K cache the query is rounded to f16 first (F16's
//     vec_dot_type), and a score is the float64 dot product (its products
//     are exact) rounded to float32, times scale;
//   - the softmax subtracts the maximum, exponentiates with ggml's exp
//     (expf), sums in float64 and multiplies by the float32 reciprocal, so
//     the probabilities are normalised before they weight V;
//   - over an F16 V cache each probability is rounded to f16, and every
//     output is a float64 sum of exact products, rounded once.
//
// The float64 sums run in fixed orders (four interleaved lanes for the dot
// products and the softmax sum; position order for V) that the C kernel
// (ops.c, t.simd set) reproduces, so every SIMD level gives these bits.
func (b *Backend) attentionItems(t *task, id, lo, hi int) {
	if ggml512 && (t.kh != nil) == (t.vh != nil) {
		b.attentionItems512(t, id, lo, hi)
		return
	}
	sc := &b.scratch[id]
	if t.simd > simdOff {
		simdAttention(t, sc.scores, lo, hi)
		return
	}
	hd, kvCols := t.headDim, t.kvHeads*t.headDim
	group := t.heads / t.kvHeads
	qr, kr := sc.row[:hd], sc.row[hd:2*hd]
	acc := sc.acc[:hd]
	for it := lo; it < hi; it++ {
		row, h := it/t.heads, it%t.heads
		L := t.kvLen
		if L == 0 {
			L = t.pos0 + row + 1
		}
		kvOff := h / group * hd
		copy(qr, t.q[row*t.qStride+h*hd:row*t.qStride+(h+1)*hd])
		if t.kh != nil {
			dtype.RoundActivations(dtype.F16, qr, qr)
		}
		s := sc.scores[:L]
		mx := float32(math.Inf(-1))
		for j := range s {
			cacheRow(kr, t.kc, t.kh, j*kvCols+kvOff)
			s[j] = float32(dot4(qr, kr)) * t.scale
			mx = max(mx, s[j])
		}
		var l [4]float64
		for j, x := range s {
			e := expf(x - mx)
			s[j] = e
			l[j&3] += float64(e)
		}
		inv := float32(1 / ((l[0] + l[2]) + (l[1] + l[3])))
		for j := range s {
			s[j] *= inv
		}
		if t.vh != nil {
			dtype.RoundActivations(dtype.F16, s, s)
		}
		clear(acc)
		for j, p := range s {
			cacheRow(kr, t.vc, t.vh, j*kvCols+kvOff)
			for d, x := range kr {
				acc[d] += float64(p) * float64(x)
			}
		}
		out := t.dst[row*t.qStride+h*hd : row*t.qStride+(h+1)*hd]
		for d, a := range acc {
			out[d] = float32(a)
		}
	}
}

// cacheRow copies len(dst) cache values from element off of an F32 (f32)
// or F16 (h, when not nil) cache.
func cacheRow(dst, f32 []float32, h []uint16, off int) {
	if h == nil {
		copy(dst, f32[off:off+len(dst)])
		return
	}
	for i, v := range h[off : off+len(dst)] {
		dst[i] = dtype.F16ToF32(v)
	}
}

// dot4 is Σ a[i]·b[i] in float64 in four interleaved lanes (lane i%4),
// reduced as (l0+l2)+(l1+l3): the order of the C kernel's __m256d
// accumulator. Each product of two float32 values is exact in float64.
func dot4(a, b []float32) float64 {
	b = b[:len(a)]
	var l [4]float64
	for i, x := range a {
		l[i&3] += float64(x) * float64(b[i])
	}
	return (l[0] + l[2]) + (l[1] + l[3])
}
