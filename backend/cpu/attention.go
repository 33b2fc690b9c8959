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
	kt := b.cacheTensor(op, "k", k, a.Flash)
	vt := b.cacheTensor(op, "v", v, a.Flash)
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
	if ke%kvCols != 0 || ve != ke || headDim%kt.dt.BlockSize() != 0 || headDim%vt.dt.BlockSize() != 0 {
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
	if a.Flash {
		b.flashAttention(o, qt, kt, vt, n, a, rows, ct.i32[:3*kv.Hi])
		return
	}
	var batched uint64 // kv.Decode: every row a decode step's
	if !kv.Decode {
		batched = batchedSeqs(rows, n)
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
		}
		if simd > simdOff && len(sc.acc) < attnAccFloats {
			sc.acc = make([]float32, attnAccFloats)
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
		window: a.Window, scale: a.Scale, softCap: a.SoftCap, simd: simd, batched: batched}
	if kt.dt == dtype.F16 {
		t.kh = halfs(kt)
	}
	if vt.dt == dtype.F16 {
		t.vh = halfs(vt)
	}
	b.pool.run()
}

// cacheTensor resolves a K or V cache: F32 or F16, or with flash attention
// a cache type (dtype.CacheTypes), which the mul_mat graph does not take.
func (b *Backend) cacheTensor(op, arg string, t backend.Tensor, flash bool) *Tensor {
	ct, err := b.own(op, arg, t)
	if err != nil {
		b.fail(err)
		return nil
	}
	if ct.dt != dtype.F32 && ct.dt != dtype.F16 && !(flash && cacheType(ct.dt)) {
		if cacheType(ct.dt) {
			b.fail(backend.ShapeError("cpu: "+op, "%s is %v: a %v cache needs flash attention (Attn.Flash)", arg, ct.dt, ct.dt))
		} else {
			b.fail(backend.ShapeError("cpu: "+op, "%s is %v, want F32, F16 or, with flash attention, a cache type", arg, ct.dt))
		}
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
		case b.flavour.Wide() && (t.kh != nil) == (t.vh != nil):
			b.attentionHeads512(t, sc, row, h0, h1, runs)
		case t.simd > simdOff:
			simdAttention(t, sc.scores, sc.acc, row, h0, h1, runs)
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

// attentionHeads is heads h0…h1-1 of row over the cells of runs, in the
// arithmetic of llama.cpp's AVX2 build (ggml_mul_mat of K and q,
// ggml_soft_max_ext, ggml_mul_mat of V and the probabilities, without flash
// attention), its rounding points and its float sums in their order:
//
//   - llama.cpp's cache view starts at cell 0 and is n_kv = max(32,
//     roundup32(cells)) long, the cells a row does not see masked; here a
//     row's view is its range [lo, hi), and a cell's place in it (which
//     decides its lane in every float sum) is its offset from lo. A masked
//     cell adds nothing anywhere (its exp is 0), so only the runs are read;
//   - scores: over an F16 K the query is rounded to f16 first (F16's
//     vec_dot_type); a score is the query's dot product with the key
//     (kqDot), soft-capped and scaled (task.score);
//   - softmax: exp(x−max) by ggml's exp (expf) in 8-element blocks of the
//     view, each block's sum (hsum8) added to a float64 sum; the
//     probabilities × float32(1/sum), then rounded to f16 over an F16 V;
//   - out[d] = the probabilities' dot product with V's column d over the
//     view (vColumn8).
//
// The C kernel (ops.c, t.simd set) performs the same operations, so every
// SIMD level gives these bits.
func attentionHeads(t *task, sc *scratch, row, h0, h1 int, runs []int32) {
	hd, kvCols := t.headDim, t.kvHeads*t.headDim
	group := t.heads / t.kvHeads
	qr, kr := sc.row[:hd], sc.row[hd:2*hd]
	base := int(t.rows[4*row+2])
	L := int(runs[len(runs)-1]) - base // the view up to the last cell seen
	j0 := (int(runs[0]) - base) &^ 7   // the block of the first
	s := sc.scores[:(L+7)&^7]
	prefill := t.prefill(row)
	for h := h0; h < h1; h++ {
		kvOff := h / group * hd
		qo := row*t.qStride + h*hd
		copy(qr, t.q[qo:qo+hd])
		if t.kh != nil {
			dtype.RoundActivations(dtype.F16, qr, qr)
		}
		masked(s, runs, base, j0)
		mx := float32(math.Inf(-1))
		for r := 0; r < len(runs); r += 2 {
			for j := int(runs[r]); j < int(runs[r+1]); j++ {
				cacheRow(kr, t.kc, t.kh, j*kvCols+kvOff)
				x := t.score(kqDot(kr, qr, t.kh != nil, prefill))
				s[j-base] = x
				mx = max(mx, x)
			}
		}
		var sum float64
		for b0 := j0; b0 < L; b0 += 8 {
			blk := (*[8]float32)(s[b0:])
			for l := range blk {
				if b0+l < L {
					blk[l] = expf(blk[l] - mx)
				} else {
					blk[l] = 0
				}
			}
			sum += float64(hsum8(*blk))
		}
		inv := float32(1 / sum)
		p := s[j0:]
		for j := range p {
			p[j] *= inv
		}
		if t.vh != nil {
			dtype.RoundActivations(dtype.F16, p, p)
		}
		out := t.dst[qo : qo+hd]
		tiny := prefill && hd%4 == 0
		for d := range out {
			out[d] = vColumn8(t, s, runs, base, kvOff+d, kvCols, tiny)
		}
	}
}

// kqDot is a key's dot product with the query as ggml_mul_mat(k, q)
// computes it on AVX2: in a prefill over an F16 K (q converted to F16, so
// llamafile's sgemm takes it) with a head size a multiple of 8, tinyBLAS's
// dot product (dot8); otherwise ggml_vec_dot_f16 or ggml_vec_dot_f32
// (dotVec8). A prefill over an F32 K takes vec_dot too: its permuted q is
// not contiguous, which sgemm wants of an F32 operand.
func kqDot(k, q []float32, half, prefill bool) float32 {
	if prefill && half && len(k)%8 == 0 {
		return dot8(k, q)
	}
	return dotVec8(k, q, half)
}

// reduce8Fold is GGML_F32x8_REDUCE: vec_dot's four accumulators folded
// (0+2, 1+3, 0+1), the halves added lane-wise, then two horizontal adds,
// (0+1)+(2+3).
func reduce8Fold(s *[4][8]float32) float32 {
	for l := range 8 {
		s[0][l] += s[2][l]
		s[1][l] += s[3][l]
		s[0][l] += s[1][l]
	}
	v := &s[0]
	t0, t1, t2, t3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	return (t0 + t1) + (t2 + t3)
}

// dotVec8 is ggml_vec_dot_f16 (half: x and y hold f16 values) or
// ggml_vec_dot_f32 on AVX2: four 8-lane accumulators over 32-element steps
// (element i in accumulator i%32/8, lane i%8, by fused multiply-adds),
// reduced (reduce8Fold); then the remaining elements, for F16 their (exact)
// products added in float64, for F32 as gcc compiles ggml's sumf += x·y
// there: the products of whole 8- and 4-element chunks rounded and added
// in order, the last len%4 by fused multiply-adds.
func dotVec8(x, y []float32, half bool) float32 {
	y = y[:len(x)]
	np := len(x) &^ 31
	var s [4][8]float32
	for i := 0; i < np; i += 32 {
		for j := range 4 {
			for l := range 8 {
				s[j][l] = fmaf(x[i+8*j+l], y[i+8*j+l], s[j][l])
			}
		}
	}
	r := reduce8Fold(&s)
	if half {
		sum := float64(r)
		for i := np; i < len(x); i++ {
			sum += float64(x[i] * y[i])
		}
		return float32(sum)
	}
	return tailF32(r, x[np:], y[np:], 4)
}

// dot8 is llamafile's tinyBLAS dot product on AVX2 (len(x) a multiple of
// 8): one 8-lane accumulator of fused multiply-adds, hsum8'd.
func dot8(x, y []float32) float32 {
	y = y[:len(x)]
	var s [8]float32
	for i := 0; i < len(x); i += 8 {
		for l := range 8 {
			s[l] = fmaf(x[i+l], y[i+l], s[l])
		}
	}
	return hsum8(s)
}

// vColumn8 is Σ_j p[j]·V[j][col] over the cells of runs (p indexed from
// base, the row's view) as ggml_mul_mat(v, kq) sums it on AVX2: with tiny
// (a prefill, the head size a multiple of 4, so that sgemm takes it)
// tinyBLAS's one 8-lane accumulator (dot8), else vec_dot's four over
// 32-cell steps (dotVec8; the view is a multiple of 32 cells, so there is
// no remainder). A masked cell's product would be 0: it is left out.
func vColumn8(t *task, p []float32, runs []int32, base, col, kvCols int, tiny bool) float32 {
	v := func(j int) float32 {
		if t.vh != nil {
			return f16Table[t.vh[j*kvCols+col]]
		}
		return t.vc[j*kvCols+col]
	}
	if tiny {
		var s [8]float32
		for r := 0; r < len(runs); r += 2 {
			for j := int(runs[r]); j < int(runs[r+1]); j++ {
				i := j - base
				s[i%8] = fmaf(v(j), p[i], s[i%8])
			}
		}
		return hsum8(s)
	}
	var s [4][8]float32
	for r := 0; r < len(runs); r += 2 {
		for j := int(runs[r]); j < int(runs[r+1]); j++ {
			i := j - base
			s[i%32/8][i%8] = fmaf(v(j), p[i], s[i%32/8][i%8])
		}
	}
	return reduce8Fold(&s)
}

// batchedSeqs is the set of sequences with more than one of the n rows
// (row i's sequence is rows[4i+1]): theirs are prefill rows (task.prefill).
func batchedSeqs(rows []int32, n int) uint64 {
	var seen, batched uint64
	for i := range n {
		bit := uint64(1) << uint(rows[4*i+1])
		batched |= seen & bit
		seen |= bit
	}
	return batched
}

// prefill reports whether row takes llama.cpp's prefill arithmetic, which
// it takes when its sequence has more than one row in this call: a row's
// bits are then those of its sequence decoded alone (a decode step's row is
// the same whatever other sequences share its batch), and with one
// sequence this is llama.cpp's own rule (n > 1).
func (t *task) prefill(row int) bool {
	return t.batched>>uint(t.rows[4*row+1])&1 != 0
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
