package cpu

import (
	"math"
	"unsafe"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/ggmlmath"
)

// Attention implements backend.Backend.
func (b *Backend) Attention(out, q, k, v backend.Tensor, n int, kv backend.KVView, a backend.Attn) {
	const op = "Attention"
	if !b.ok(op) {
		return
	}
	o := b.tensor(op, "out", out, dtype.F32)
	qt := b.tensor(op, "q", q, dtype.F32)
	kt := b.cacheTensor(op, "k", k)
	vt := b.cacheTensor(op, "v", v)
	rt := b.tensor(op, "kv.Rows", kv.Rows, dtype.I32)
	ct := b.tensor(op, "kv.Cells", kv.Cells, dtype.I32)
	if o == nil || qt == nil || kt == nil || vt == nil || rt == nil || ct == nil ||
		!b.writable(op, "out", o) || !b.checkN(op, n, o, qt) {
		return
	}
	heads, kvHeads, headDim := a.Heads, a.KVHeads, a.HeadDim
	if heads <= 0 || kvHeads <= 0 || headDim <= 0 || heads%kvHeads != 0 {
		b.fail(backend.ShapeError("cpu: "+op, "%d heads, %d kv heads of %d: heads must be a positive multiple of kv heads", heads, kvHeads, headDim))
		return
	}
	if !(a.SoftCap >= 0) || a.Window < 0 {
		b.fail(backend.ShapeError("cpu: "+op, "soft cap %g, window %d: neither may be negative", a.SoftCap, a.Window))
		return
	}
	cols, kvCols := heads*headDim, kvHeads*headDim
	if backend.Cols(qt) != cols || backend.Cols(o) != cols {
		b.fail(backend.ShapeError("cpu: "+op, "q %v, out %v: want rows of %d×%d", qt.shape, o.shape, heads, headDim))
		return
	}
	ke, ve := backend.Elems(kt.shape), backend.Elems(vt.shape)
	cells := ke / kvCols
	if ke%kvCols != 0 || ve != ke {
		b.fail(backend.ShapeError("cpu: "+op, "k %v, v %v: want equal caches of [_, %d, %d]", kt.shape, vt.shape, kvHeads, headDim))
		return
	}
	if backend.Cols(rt) != 4 || backend.Rows(rt) < n || backend.Cols(ct) != 3 {
		b.fail(backend.ShapeError("cpu: "+op, "kv.Rows %v, kv.Cells %v: want [≥ %d, 4] and [_, 3]", rt.shape, ct.shape, n))
		return
	}
	if kv.Lo < 0 || kv.Lo > kv.Hi || kv.Hi > cells || kv.Hi > backend.Rows(ct) {
		b.fail(backend.ShapeError("cpu: "+op, "view [%d, %d) outside a cache of %d cells with %d cell entries", kv.Lo, kv.Hi, cells, backend.Rows(ct)))
		return
	}
	rows := rt.i32[:4*n]
	for i := range n {
		r := rows[4*i : 4*i+4]
		if r[1] < 0 || r[1] > 63 {
			b.fail(backend.ShapeError("cpu: "+op, "row %d: sequence id %d outside 0…63", i, r[1]))
			return
		}
		if int(r[2]) < kv.Lo || r[2] > r[3] || int(r[3]) > kv.Hi {
			b.fail(backend.ShapeError("cpu: "+op, "row %d: cell range [%d, %d) outside the view [%d, %d)", i, r[2], r[3], kv.Lo, kv.Hi))
			return
		}
	}
	if n == 0 {
		return
	}
	// The C kernel scores up to attnScoreRows heads of one kv head at once.
	simd, sRows := simdOff, 1
	if b.simd > simdOff && simdAttentionOK(headDim) {
		simd, sRows = b.simd, attnScoreRows
	}
	span := kv.Hi - kv.Lo // the longest row range
	for i := range b.scratch {
		sc := &b.scratch[i]
		// attentionHeads512 rounds a row up to whole 16-element blocks.
		if len(sc.scores) < sRows*(span+15) {
			sc.scores = make([]float32, sRows*(cells+15))
		}
		if cap(sc.runs) < span+2 {
			sc.runs = make([]int32, 0, cells+2)
		}
		sc.runsRow = -1
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
		if n*heads*span*headDim < 1<<18 {
			// A short context (most decode steps) takes the C kernel a few
			// microseconds on one thread, less than waking another costs.
			grain = total
		}
	}
	*t = task{kind: kAttention, total: total, grain: grain, dst: o.f32, q: qt.f32, kc: kt.f32, vc: vt.f32,
		n: n, heads: heads, kvHeads: kvHeads, headDim: headDim, qStride: cols, rows: rows, cells: ct.i32[:3*kv.Hi],
		window: a.Window, scale: a.Scale, softCap: a.SoftCap, simd: simd}
	if kt.dt == dtype.F16 {
		t.kh = halfs(kt)
	}
	if vt.dt == dtype.F16 {
		t.vh = halfs(vt)
	}
	b.pool.run()
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

// attentionItems handles (row, head) items lo…hi-1, a row's heads at a
// time: the cells the row sees (visible) are found once, then every
// kernel scans only those.
func (b *Backend) attentionItems(t *task, id, lo, hi int) {
	sc := &b.scratch[id]
	for it := lo; it < hi; {
		row := it / t.heads
		end := min(hi, (row+1)*t.heads)
		h0, h1 := it-row*t.heads, end-row*t.heads
		runs := sc.visible(t, row)
		switch {
		case len(runs) == 0:
			// No cell: llama.cpp would divide 0 by 0; the op's rule is zeros.
			clear(t.dst[row*t.qStride+h0*t.headDim : row*t.qStride+h1*t.headDim])
		case ggml512 && (t.kh != nil) == (t.vh != nil):
			b.attentionHeads512(t, sc, row, h0, h1, runs)
		case t.simd > simdOff:
			simdAttention(t, sc.scores, row, h0, h1, runs)
		default:
			attentionHeads(t, sc, row, h0, h1, runs)
		}
		it = end
	}
}

// visible returns the cells row sees as runs: pairs [a, b) in increasing
// order, inside the row's range (backend.KVView's rule). A thread keeps
// the last row's runs (an op resets runsRow), so the heads of a row, which
// threads claim in chunks, share one scan of the cells.
func (sc *scratch) visible(t *task, row int) []int32 {
	if sc.runsRow == row {
		return sc.runs
	}
	r := t.rows[4*row : 4*row+4]
	pos, lo, hi := int64(r[0]), int(r[2]), int(r[3])
	var mlo, mhi uint32
	if s := r[1]; s < 32 {
		mlo = 1 << s
	} else {
		mhi = 1 << (s - 32)
	}
	w := int64(t.window)
	runs := sc.runs[:0]
	open := false
	for j := lo; j < hi; j++ {
		c := t.cells[3*j : 3*j+3 : 3*j+3]
		p := int64(c[0])
		in := (uint32(c[1])&mlo|uint32(c[2])&mhi) != 0 && p <= pos && (w == 0 || pos-p < w)
		switch {
		case in && open:
			runs[len(runs)-1] = int32(j + 1)
		case in:
			runs = append(runs, int32(j), int32(j+1))
		}
		open = in
	}
	sc.runs, sc.runsRow = runs, row
	return runs
}

// score is a q·k dot product as llama.cpp's kq after ggml_soft_max_ext's
// scale: in float32, soft-capped first where the op asks (ggml_scale by the
// float32 1/cap, tanhf, ggml_scale by cap).
func (t *task) score(d float32) float32 {
	if t.softCap > 0 {
		d = ggmlmath.SoftCap(d, t.softCap)
	}
	return d * t.scale
}

// attentionHeads is heads h0…h1-1 of row over the cells of runs. This is
// the reference arithmetic, llama.cpp's (ggml_mul_mat of K and q,
// ggml_soft_max_ext, ggml_mul_mat of V and the probabilities), with its
// rounding points:
//
//   - over an F16 K cache the query is rounded to f16 first (F16's
//     vec_dot_type), and a score is the float64 dot product (its products
//     are exact) rounded to float32, then soft-capped and scaled (score);
//   - the softmax subtracts the maximum, exponentiates with ggml's exp
//     (expf), sums in float64 and multiplies by the float32 reciprocal, so
//     the probabilities are normalised before they weight V;
//   - over an F16 V cache each probability is rounded to f16, and every
//     output is a float64 sum of exact products, rounded once.
//
// The float64 sums run in fixed orders (four interleaved lanes for the dot
// products and the softmax sum, a cell's lane its offset from the row's
// range start; cell order for V) that the C kernel (ops.c, t.simd set)
// reproduces, so every SIMD level gives these bits. A cell the row does
// not see adds nothing, which is what llama.cpp's −∞ mask entry adds (an
// exp of 0) at its place.
func attentionHeads(t *task, sc *scratch, row, h0, h1 int, runs []int32) {
	hd, kvCols := t.headDim, t.kvHeads*t.headDim
	group := t.heads / t.kvHeads
	base := int(t.rows[4*row+2])
	qr, kr := sc.row[:hd], sc.row[hd:2*hd]
	acc := sc.acc[:hd]
	s := sc.scores[:int(runs[len(runs)-1])-base]
	for h := h0; h < h1; h++ {
		kvOff := h / group * hd
		qo := row*t.qStride + h*hd
		copy(qr, t.q[qo:qo+hd])
		if t.kh != nil {
			dtype.RoundActivations(dtype.F16, qr, qr)
		}
		mx := float32(math.Inf(-1))
		for r := 0; r < len(runs); r += 2 {
			for j := int(runs[r]); j < int(runs[r+1]); j++ {
				cacheRow(kr, t.kc, t.kh, j*kvCols+kvOff)
				x := t.score(float32(dot4(qr, kr)))
				s[j-base] = x
				mx = max(mx, x)
			}
		}
		var l [4]float64
		for r := 0; r < len(runs); r += 2 {
			for j := int(runs[r]) - base; j < int(runs[r+1])-base; j++ {
				e := expf(s[j] - mx)
				s[j] = e
				l[j&3] += float64(e)
			}
		}
		inv := float32(1 / ((l[0] + l[2]) + (l[1] + l[3])))
		for r := 0; r < len(runs); r += 2 {
			p := s[int(runs[r])-base : int(runs[r+1])-base]
			for j := range p {
				p[j] *= inv
			}
			if t.vh != nil {
				dtype.RoundActivations(dtype.F16, p, p)
			}
		}
		clear(acc)
		for r := 0; r < len(runs); r += 2 {
			for j := int(runs[r]); j < int(runs[r+1]); j++ {
				p := float64(s[j-base])
				cacheRow(kr, t.vc, t.vh, j*kvCols+kvOff)
				for d, x := range kr {
					acc[d] += p * float64(x)
				}
			}
		}
		out := t.dst[qo : qo+hd]
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
