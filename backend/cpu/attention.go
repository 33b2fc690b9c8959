package cpu

import (
	"math"

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

// attention is both ops: kvLen > 0 is decode (every row sees kvLen
// positions), kvLen == 0 is causal prefill (row i sees pos0+i+1 positions).
func (b *Backend) attention(op string, out, q, k, v backend.Tensor, n, pos0, kvLen, heads, kvHeads, headDim int, scale float32) {
	if !b.ok(op) {
		return
	}
	o := b.tensor(op, "out", out, dtype.F32)
	qt := b.tensor(op, "q", q, dtype.F32)
	kt := b.tensor(op, "k", k, dtype.F32)
	vt := b.tensor(op, "v", v, dtype.F32)
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
		if len(b.scratch[i].scores) < rows*last {
			b.scratch[i].scores = make([]float32, rows*maxSeq)
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
		if n*heads*last*headDim < 1<<19 {
			// A short context (most decode steps) takes the C kernel a few
			// microseconds on one thread, less than waking another costs.
			grain = total
		}
	}
	*t = task{kind: kAttention, total: total, grain: grain, dst: o.f32, q: qt.f32, kc: kt.f32, vc: vt.f32,
		n: n, heads: heads, kvHeads: kvHeads, headDim: headDim, qStride: cols, pos0: pos0, kvLen: kvLen, scale: scale,
		simd: simd}
	b.pool.run()
}

// attentionItems handles (row, head) items lo…hi-1: scores, a softmax that
// subtracts the maximum, and the probability-weighted sum of values. With
// t.simd set it is the C kernel in ops.c, which computes the same in float32
// (the softmax sum in double, as here) and differs only in rounding.
func (b *Backend) attentionItems(t *task, id, lo, hi int) {
	if t.simd > simdOff {
		simdAttention(t, b.scratch[id].scores, lo, hi)
		return
	}
	hd, kvCols := t.headDim, t.kvHeads*t.headDim
	group := t.heads / t.kvHeads
	for it := lo; it < hi; it++ {
		row, h := it/t.heads, it%t.heads
		L := t.kvLen
		if L == 0 {
			L = t.pos0 + row + 1
		}
		kvOff := h / group * hd
		qh := t.q[row*t.qStride+h*hd : row*t.qStride+(h+1)*hd]
		s := b.scratch[id].scores[:L]
		mx := float32(math.Inf(-1))
		for j := range s {
			kj := t.kc[j*kvCols+kvOff : j*kvCols+kvOff+hd]
			s[j] = dotF32(qh, kj) * t.scale
			mx = max(mx, s[j])
		}
		var sum float64
		for j, x := range s {
			e := math.Exp(float64(x) - float64(mx))
			s[j] = float32(e)
			sum += e
		}
		out := t.dst[row*t.qStride+h*hd : row*t.qStride+(h+1)*hd]
		clear(out)
		for j, p := range s {
			vj := t.vc[j*kvCols+kvOff : j*kvCols+kvOff+hd]
			for d, x := range vj {
				out[d] += p * x
			}
		}
		inv := float32(1 / sum)
		for d := range out {
			out[d] *= inv
		}
	}
}
