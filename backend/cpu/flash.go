package cpu

import (
	"math"
	"unsafe"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/ggmlmath"
)

// Flash attention (backend.Attn.Flash) is llama.cpp's CPU
// ggml_compute_forward_flash_attn_ext_f16 (ggml-cpu.c at c392e509), one
// query row and head at a time over the cells in order, with no tiling and
// no split of the cells among threads, so that a row's bits are the same in
// a decode step, in a prefill and beside other sequences (KVView.Decode
// changes nothing here):
//
//   - the query head is converted to K's vec_dot_type by that type's
//     from_float (F16 for F16 K, BF16 for BF16 K, Q8_0 for Q8_0, Q4_0, Q5_0
//     and IQ4_NL K, Q8_1 for Q4_1 and Q5_1 K; F32 K, which llama.cpp's
//     kernel refuses, keeps f32), and a score is K's vec_dot of the key row
//     and that query (dot32Lanes, or the float kernels in the flavour's
//     ggml_vec_dot order);
//   - s = score·scale', scale' = Scale/SoftCap with a soft cap, then
//     SoftCap·tanhf(s) (so the cap applies to the scaled score: the same as
//     the mul_mat graph's at Scale 1, which is how llama.cpp's graphs use a
//     cap); a cell the row does not see is skipped (its −∞ mask);
//   - the online softmax: on a new maximum M the accumulator is scaled by
//     ms = expf(Mold − M) and the cell weighs 1, else it weighs
//     vs = expf(s − M); S = S·ms + vs, rounded twice (ggml-cpu.c's build
//     does not fuse it); expf is the C library's, as ggml calls it;
//   - over an F16 V the accumulator is f16: ggml_vec_scale_f16 and
//     ggml_vec_mad_f16 widen, multiply (or multiply-add, fused) in float32
//     and round back to f16 per element; over any other V, V's row is
//     dequantised to f32 (to_float) and accumulated in f32 by fused
//     multiply-adds (ggml_vec_mad_f32), scaled by ggml_vec_scale_f32;
//   - out = the accumulator (widened from f16) times the float32 1/S.
//
// Every step is per element or per dot product, so no other lane order
// enters; a row that sees no cell gets zeros (the op's rule; ggml's 0/0).
// Checked bit for bit against ggml_flash_attn_ext of the peer's libggml on
// every cache type, head sizes 32, 64 and 96, decode and prefill rows.

// flashTask is one flash attention call's operands.
type flashTask struct {
	q, out          []float32
	k, v            []byte
	kt, vt          dtype.Type
	qt              dtype.Type // K's vec_dot_type
	kRow, vRow      int        // bytes of one head row of K, of V
	kvCols          int        // elements of one cell: kvHeads·headDim
	scale, softCap  float32
	kOrder          floatSum // the float vec_dot order of a BF16 or F32 K
	wide            bool     // F16 K: ggml_vec_dot_f16 of the AVX-512 build
	heads, kvHeads  int
	headDim, stride int
	rows, cells     []int32
	window          int
	simd            simdLevel // the C parts run from AVX2 on (flash.c)
}

// flashScratch is one thread's working memory: the query heads of one KV
// head group converted to K's vec_dot_type, their accumulators and
// running maxima and sums, and one dequantised V row.
type flashScratch struct {
	qa    acts
	qf    []float32
	acc   []float32
	acc16 []uint16
	s     []float32
	vrow  []float32
	krow  []float32 // an F16 key row widened
	// row is the query row cells holds the cells of (-1: none yet): a
	// thread takes a row's KV heads one after another.
	row int
	// cells are the cells the row sees; d, ms and vs hold per head (group
	// rows of len(cells)) the dot products and the softmax's weights.
	cells     []int32
	d, ms, vs []float32
	_         [48]byte
}

// flashAttention runs Attention's flash arithmetic; Attention has checked
// the arguments. Items are (row, KV head): each thread reads a cell's K and
// V rows once for all the query heads that share them.
func (b *Backend) flashAttention(o, qt, kt, vt *Tensor, n int, a backend.Attn, rows, cells []int32) {
	hd := a.HeadDim
	kRow, _ := kt.dt.RowBytes(hd)
	vRow, _ := vt.dt.RowBytes(hd)
	f := &flashTask{q: qt.f32, out: o.f32, k: kt.data, v: vt.data, kt: kt.dt, vt: vt.dt, qt: kt.dt.ActivationType(),
		kRow: kRow, vRow: vRow, kvCols: a.KVHeads * hd, scale: a.Scale, softCap: a.SoftCap,
		heads: a.Heads, kvHeads: a.KVHeads, headDim: hd, stride: a.Heads * hd, rows: rows, cells: cells, window: a.Window}
	if f.softCap > 0 {
		f.scale = a.Scale / a.SoftCap
	}
	if !kt.dt.Quantized() {
		f.kOrder = b.flavour.FloatOrder(kt.dt, 1, hd, 1)
	}
	f.wide = b.flavour.Wide()
	f.simd = b.simd
	group := a.Heads / a.KVHeads
	if len(b.flash) < len(b.scratch) {
		b.flash = make([]flashScratch, len(b.scratch))
	}
	for i := range b.flash {
		sc := &b.flash[i]
		sc.row = -1
		if len(sc.qf) < group*hd || len(sc.s) < group {
			sc.qf = make([]float32, group*hd)
			sc.acc = make([]float32, group*hd)
			sc.acc16 = make([]uint16, group*hd)
			sc.s = make([]float32, group)
		}
		if span := kvSpan(rows, n); cap(sc.cells) < span || len(sc.d) < group*span {
			sc.cells = make([]int32, 0, span)
			sc.d = make([]float32, group*span)
			sc.ms = make([]float32, group*span)
			sc.vs = make([]float32, group*span)
		}
		if len(sc.vrow) < hd {
			sc.vrow = make([]float32, hd)
			sc.krow = make([]float32, hd)
		}
		if f.kt.Quantized() {
			sc.qa.grow(f.qt, group, hd, false, false)
		}
	}
	total := n * a.KVHeads
	t := &b.pool.task
	*t = task{kind: kFunc, fn: flashItems, fa: f, total: total, grain: b.grainFor(total)}
	b.pool.run()
}

// flashItems handles items lo…hi-1: item = row·kvHeads + KV head.
func flashItems(b *Backend, t *task, id, lo, hi int) {
	f := t.fa
	sc := &b.flash[id]
	for it := lo; it < hi; it++ {
		flashGroup(f, sc, it/f.kvHeads, it%f.kvHeads)
	}
}

// flashGroup is query row row's heads of KV head kvh. From AVX2 on the key
// dots of F16 and quantised keys and the value loop run in C (flash.c,
// glint_flash_qdots), with the same arithmetic.
func flashGroup(f *flashTask, sc *flashScratch, row, kvh int) {
	hd := f.headDim
	group := f.heads / f.kvHeads
	h0 := kvh * group
	qo := row*f.stride + h0*hd
	q := f.q[qo : qo+group*hd]
	out := f.out[qo : qo+group*hd]
	qf := sc.qf[:group*hd]
	switch {
	case f.kt.Quantized():
		sc.qa.n = 1
		quantizeRowsGo(f.qt, 0, &sc.qa, q, hd, 0, group)
	case f.qt == dtype.F32:
		copy(qf, q)
	default:
		dtype.RoundActivations(f.qt, qf, q)
	}
	acc, acc16 := sc.acc[:group*hd], sc.acc16[:group*hd]
	clear(acc)
	clear(acc16)
	if sc.row != row {
		sc.cells, sc.row = visibleCells(f, sc.cells[:0], row), row
	}
	cells := sc.cells
	nv := len(cells)
	if nv == 0 {
		clear(out)
		return
	}
	kh, vh := f.k[kvh*f.kRow:], f.v[kvh*f.vRow:]
	cellK, cellV := f.kvHeads*f.kRow, f.kvHeads*f.vRow
	switch {
	case f.simd > simdOff && f.kt == dtype.F16:
		simdFlashF16Dots(f.wide, hd, group, qf, kh, cellK, cells, sc.krow[:hd], sc.d)
	case f.simd > simdOff && f.kt.Quantized():
		simdFlashQDots(f.simd, f.kt, &sc.qa, hd, group, kh, cellK, cells, sc.d)
	default:
		flashScores(f, sc, qf, cells, kvh)
	}
	s := sc.s[:group]
	for g := range group {
		s[g] = flashWeights(sc.d[g*nv:(g+1)*nv], sc.ms[g*nv:(g+1)*nv], sc.vs[g*nv:(g+1)*nv], f.scale, f.softCap)
	}
	if f.simd == simdOff || !simdFlashValues(f.vt, hd, group, vh, cellV, cells, sc.ms, sc.vs, acc, acc16, sc.vrow) {
		flashValues(f, sc, cells, kvh)
	}
	for g := range group {
		a := acc[g*hd : (g+1)*hd]
		if f.vt == dtype.F16 {
			for i, h := range acc16[g*hd : (g+1)*hd] {
				a[i] = f16Table[h]
			}
		}
		inv := 1 / s[g]
		for i, v := range a {
			out[g*hd+i] = v * inv
		}
	}
}

// flashScores is the dot products of the query heads qf (K's vec_dot_type)
// with each key row of cells, into sc.d (per head, len(cells) each): each
// key row read once for the group's heads.
func flashScores(f *flashTask, sc *flashScratch, qf []float32, cells []int32, kvh int) {
	hd := f.headDim
	group := f.heads / f.kvHeads
	nv := len(cells)
	kf := sc.krow[:hd]
	for i, j := range cells {
		cell := int(j)*f.kvHeads + kvh
		krow := f.k[cell*f.kRow : (cell+1)*f.kRow]
		if f.kt == dtype.F16 {
			for e, h := range halfsOf(krow) {
				kf[e] = f16Table[h]
			}
		}
		for g := range group {
			var d float32
			switch {
			case f.kt.Quantized():
				d = dot32Lanes(f.kt, &sc.qa, g, hd, krow, false)
			case f.kt == dtype.F16 && f.wide:
				d = dotVec512(kf, qf[g*hd:(g+1)*hd], true)
			case f.kt == dtype.F16:
				d = dotVec8(kf, qf[g*hd:(g+1)*hd], true)
			default:
				d = floatDot(f.kt, f.kOrder, qf[g*hd:(g+1)*hd], krow)
			}
			sc.d[g*nv+i] = d
		}
	}
}

// flashValues is the value loop: each row read once for the group's heads.
// A weight ms of 1 is no rescale (ggml rescales only on a new maximum, and
// a rescale by 1 changes nothing, in f32 or f16).
func flashValues(f *flashTask, sc *flashScratch, cells []int32, kvh int) {
	hd := f.headDim
	group := f.heads / f.kvHeads
	nv := len(cells)
	halfV := f.vt == dtype.F16
	for i, j := range cells {
		cell := int(j)*f.kvHeads + kvh
		vrow := f.v[cell*f.vRow : (cell+1)*f.vRow]
		if !halfV {
			dtype.DequantizeRow(f.vt, sc.vrow[:hd], vrow)
		}
		for g := range group {
			ms, vs := sc.ms[g*nv+i], sc.vs[g*nv+i]
			if halfV {
				a := sc.acc16[g*hd : (g+1)*hd]
				if ms != 1 {
					scaleF16(a, ms)
				}
				madF16(a, halfsOf(vrow), vs)
			} else {
				a := sc.acc[g*hd : (g+1)*hd]
				if ms != 1 {
					scaleF32(a, ms)
				}
				madF32(a, sc.vrow[:hd], vs)
			}
		}
	}
}

// visibleCells appends to cells those of row's range that the row sees
// (backend.KVView's rule), in order.
func visibleCells(f *flashTask, cells []int32, row int) []int32 {
	r := f.rows[4*row : 4*row+4]
	pos, lo, hi := int64(r[0]), int(r[2]), int(r[3])
	var mlo, mhi uint32
	if sq := r[1]; sq < 32 {
		mlo = 1 << sq
	} else {
		mhi = 1 << (sq - 32)
	}
	w := int64(f.window)
	for j := lo; j < hi; j++ {
		c := f.cells[3*j : 3*j+3 : 3*j+3]
		p := int64(c[0])
		if (uint32(c[1])&mlo|uint32(c[2])&mhi) == 0 || p > pos || w != 0 && pos-p >= w {
			continue
		}
		cells = append(cells, int32(j))
	}
	return cells
}

// kvSpan is the longest cell range of the n rows.
func kvSpan(rows []int32, n int) int {
	span := 0
	for i := range n {
		span = max(span, int(rows[4*i+3]-rows[4*i+2]))
	}
	return span
}

// flashWeightsGo is flash.c's glint_flash_weights in Go: ggml's online
// softmax over the dot products d, each cell's rescale ms and weight vs,
// and the sum S it returns (S·ms rounded, then + vs).
func flashWeightsGo(d, ms, vs []float32, scale, cap float32) float32 {
	var S float32
	M := float32(math.Inf(-1))
	for i, x := range d {
		x *= scale
		if cap != 0 {
			x = cap * ggmlmath.Tanhf(x)
		}
		m1, v1 := float32(1), float32(1)
		if x > M {
			m1 = ggmlmath.Expf(M - x)
			M = x
		} else {
			v1 = ggmlmath.Expf(x - M)
		}
		ms[i], vs[i] = m1, v1
		S = float32(S*m1) + v1
	}
	return S
}

// floatDot is the vec_dot of a BF16 or F32 key row (raw) and a query
// already rounded to that type, in order sum (ggml_vec_dot_bf16/_f32 of the
// flavour): the float matmul kernel on one row.
func floatDot(dt dtype.Type, sum floatSum, q []float32, raw []byte) float32 {
	var d [1]float32
	t := task{kind: kMatMul, dst: d[:], x: q, w: raw, wt: dt, n: 1, k: len(q), m: 1, sum: sum}
	if dt == dtype.F32 {
		t.y = unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), len(q))
	}
	matMulRows(&t, 0, 1)
	return d[0]
}

// scaleF16 is ggml_vec_scale_f16: y = f16(f32(y)·v).
func scaleF16(y []uint16, v float32) {
	for i, h := range y {
		y[i] = dtype.F32ToF16(f16Table[h] * v)
	}
}

// madF16 is ggml_vec_mad_f16: y = f16(f32(x)·v + f32(y)), fused.
func madF16(y []uint16, x []uint16, v float32) {
	x = x[:len(y)]
	for i, h := range y {
		y[i] = dtype.F32ToF16(fmaf(f16Table[x[i]], v, f16Table[h]))
	}
}

// scaleF32 is ggml_vec_scale_f32: y = y·v.
func scaleF32(y []float32, v float32) {
	for i := range y {
		y[i] *= v
	}
}

// madF32 is ggml_vec_mad_f32: y = x·v + y, fused.
func madF32(y, x []float32, v float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] = fmaf(x[i], v, y[i])
	}
}

// halfsOf views an F16 row's bytes (2-byte aligned: a cache's rows are)
// as its values.
func halfsOf(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}
