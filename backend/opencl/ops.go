package opencl

import (
	"fmt"
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/dtype"
)

// Every op validates its arguments, records the first problem (sticky, see
// package backend) and otherwise queues one kernel. Nothing here allocates
// on the success path: error values are built only on failure.

// settle launches what the backend holds (fuse.go) before a kernel is given
// arguments or queued, so that no op need remember to: held ops run before
// anything queued after them, and a held chain cannot find the arguments
// of a kernel it shares (rms_norm) half set.
func (b *Backend) settle() {
	if b.nchains != 0 {
		b.flush()
	}
}

// enter is where every op starts: it reports whether the backend takes
// ops. What the backend holds (fuse.go) stays held: an op may join it, and
// settle launches it before anything else.
func (b *Backend) enter(op string) bool {
	if b.closed {
		b.fail(fmt.Errorf("opencl: %s: %w", op, errClosed))
		return false
	}
	return b.err == nil
}

func (b *Backend) shape(op, format string, args ...any) {
	b.fail(backend.ShapeError("opencl: "+op, format, args...))
}

func (b *Backend) argErr(k *kern, i int, err error) {
	b.fail(fmt.Errorf("opencl: %s: argument %d: %w", k.name, i, err))
}

func (b *Backend) argMem(k *kern, i int, m cl.Mem) {
	b.settle()
	if err := k.k.SetMem(i, m); err != nil {
		b.argErr(k, i, err)
	}
}

func (b *Backend) argI32(k *kern, i int, v int) {
	b.settle()
	if err := k.k.SetI32(i, int32(v)); err != nil {
		b.argErr(k, i, err)
	}
}

func (b *Backend) argU64(k *kern, i int, v int) {
	b.settle()
	if err := k.k.SetU64(i, uint64(v)); err != nil {
		b.argErr(k, i, err)
	}
}

// b01 is an OpenCL C bool argument: 1 for true.
func b01(v bool) int {
	if v {
		return 1
	}
	return 0
}

func (b *Backend) argF32(k *kern, i int, v float32) {
	b.settle()
	if err := k.k.SetF32(i, v); err != nil {
		b.argErr(k, i, err)
	}
}

func (b *Backend) argLocal(k *kern, i int, bytes int) {
	b.settle()
	if err := k.k.SetLocal(i, bytes); err != nil {
		b.argErr(k, i, err)
	}
}

// launch queues k unless an argument failed. moved is what the kernel
// reads and writes in device memory, each operand counted once (Stats.Moved):
// the least traffic its work needs, the figure a GPU's bandwidth divides.
func (b *Backend) launch(k *kern, dims int, global, local [3]int, moved int) {
	b.settle()
	if b.err != nil {
		return
	}
	timed := b.profiling || b.charge != ""
	ev, err := b.q.Launch(k.k, dims, global, local, timed)
	if err != nil {
		b.fail(fmt.Errorf("opencl: %s: %w", k.name, err))
		return
	}
	b.moved += int64(moved)
	if timed {
		b.pending = append(b.pending, pendingEvent{k.name, b.charge, ev})
		// Bound the events held by a long unsynchronised run.
		if len(b.pending) >= 4096 {
			b.collect()
		}
	}
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// fits checks that a count fits the kernels' int arguments.
func (b *Backend) fits(op, what string, v int) bool {
	if v < 0 || v > math.MaxInt32 {
		b.shape(op, "%s %d out of range", what, v)
		return false
	}
	return true
}

// f32Rows checks an F32 activation of at least n rows of cols columns.
func (b *Backend) f32Rows(op, arg string, t *tensor, n, cols int) bool {
	if n < 0 {
		b.shape(op, "n = %d is negative", n)
		return false
	}
	if t.dt != dtype.F32 {
		b.shape(op, "%s %v is not F32", arg, t)
		return false
	}
	if backend.Cols(t) != cols || backend.Rows(t) < n {
		b.shape(op, "%s %v does not hold %d rows of %d", arg, t, n, cols)
		return false
	}
	return true
}

// Embedding gathers rows of table into dst. Ids outside the table are found
// on the device: their rows become zeros and Sync reports the id.
func (b *Backend) Embedding(dst, table, ids backend.Tensor, n int) {
	const op = "Embedding"
	if !b.enter(op) {
		return
	}
	d, tb, id := b.out(op, "dst", dst), b.own(op, "table", table), b.own(op, "ids", ids)
	if d == nil || tb == nil || id == nil {
		return
	}
	wk, ok := b.byType[tb.dt]
	if !ok || len(tb.shape) != 2 {
		b.shape(op, "table %v is not a [vocab, dim] weight matrix", tb)
		return
	}
	vocab, cols := tb.shape[0], tb.shape[1]
	if n < 0 {
		b.shape(op, "n = %d", n)
		return
	}
	if !b.f32Rows(op, "dst", d, n, cols) {
		return
	}
	if id.dt != dtype.I32 || id.elems < n {
		b.shape(op, "ids %v does not hold %d I32 ids", id, n)
		return
	}
	if n == 0 || !b.fits(op, "table columns", cols) || !b.fits(op, "vocab", vocab) {
		return
	}
	k := wk.embedding
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, tb.mem)
	b.argU64(k, 2, tb.bytes/max(vocab, 1))
	b.argMem(k, 3, id.mem)
	b.argI32(k, 4, cols)
	b.argI32(k, 5, vocab)
	b.argMem(k, 6, b.status)
	// One 16-element group per work-item (embedding_T in matmul.cl).
	units := (cols + 15) / 16
	b.launch(k, 2, [3]int{roundUp(max(units, 1), k.wg), n, 1}, [3]int{k.wg, 1, 1}, n*(tb.bytes/max(vocab, 1)+4*cols+4))
	b.checkStatus = true
}

// RMSNorm normalises the first n rows of x into dst, scaled by w.
func (b *Backend) RMSNorm(dst, x, w backend.Tensor, n int, eps float32) {
	const op = "RMSNorm"
	if !b.enter(op) {
		return
	}
	d, xt, wt := b.out(op, "dst", dst), b.own(op, "x", x), b.own(op, "w", w)
	if d == nil || xt == nil || wt == nil {
		return
	}
	cols := backend.Cols(xt)
	if !b.f32Rows(op, "x", xt, n, cols) || !b.f32Rows(op, "dst", d, n, cols) {
		return
	}
	// A w shorter than a row normalises each of its runs: rows of w's length.
	if wt.dt != dtype.F32 || wt.elems == 0 || cols%wt.elems != 0 {
		b.shape(op, "w %v is not F32 [%d] or a divisor of it", wt, cols)
		return
	}
	rows := n * (cols / wt.elems)
	if n == 0 || !b.fits(op, "columns", cols) || !b.fits(op, "rows", rows) {
		return
	}
	if n == 1 && wt.elems == cols && b.holdNorm(d, xt, wt, eps) {
		return
	}
	b.launchRMSNorm(d, xt, wt, n, eps)
}

// launchRMSNorm queues rms_norm over n rows, each run of w's length of them
// on its own.
func (b *Backend) launchRMSNorm(d, x, w *tensor, n int, eps float32) {
	k := b.rmsNorm
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, x.mem)
	b.argMem(k, 2, w.mem)
	b.argI32(k, 3, w.elems)
	b.argF32(k, 4, eps)
	b.argLocal(k, 5, 8*k.wg) // a double or a float-float pair per item (norm.cl)
	b.launch(k, 2, [3]int{k.wg, n * (backend.Cols(x) / w.elems), 1}, [3]int{k.wg, 1, 1}, 4*(2*n*backend.Cols(x)+w.elems))
}

// RoPE rotates the heads of the first n rows of x in place, row i by the
// position pos[i].
func (b *Backend) RoPE(x backend.Tensor, n, heads, headDim int, pos backend.Tensor, r backend.Rope) {
	const op = "RoPE"
	if !b.enter(op) {
		return
	}
	xt, pt := b.out(op, "x", x), b.own(op, "pos", pos)
	if xt == nil || pt == nil {
		return
	}
	if heads <= 0 || headDim <= 0 || n < 0 {
		b.shape(op, "n = %d, heads = %d, headDim = %d", n, heads, headDim)
		return
	}
	if !b.f32Rows(op, "x", xt, n, heads*headDim) {
		return
	}
	if pt.dt != dtype.I32 || pt.elems < n {
		b.shape(op, "pos %v does not hold %d I32 positions", pt, n)
		return
	}
	if r.Dims <= 0 || r.Dims%2 != 0 || r.Dims > headDim {
		b.shape(op, "rope dims %d is not even in (0, headDim %d]", r.Dims, headDim)
		return
	}
	if !(r.Theta > 0) {
		b.shape(op, "rope theta %v is not positive", r.Theta)
		return
	}
	if _, _, ok := r.Scales(); !ok {
		b.shape(op, "rope scales %v and %v are not finite and positive", r.FreqScale, r.AttnFactor)
		return
	}
	var freqs *tensor
	if r.Freqs != nil {
		if freqs = b.own(op, "rope freqs", r.Freqs); freqs == nil {
			return
		}
		if freqs.dt != dtype.F32 || freqs.elems != r.Dims/2 {
			b.shape(op, "rope freqs %v is not F32 [%d]", freqs, r.Dims/2)
			return
		}
	}
	if n == 0 || !b.fits(op, "rows", n) {
		return
	}
	tab := b.ropeRows(op, r, freqs, pt, n)
	if tab == nil || (n == 1 && b.holdRoPE(xt, heads, headDim, pt, r, tab)) {
		return
	}
	k := b.rope
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, xt.mem)
	b.argI32(k, 1, heads)
	b.argI32(k, 2, headDim)
	b.argI32(k, 3, r.Dims)
	b.argMem(k, 4, pt.mem)
	b.argMem(k, 5, tab.mem)
	b.argI32(k, 6, int(tab.lo))
	b.argI32(k, 7, b01(r.NeoX))
	local := 1
	for local*2 <= r.Dims/2 && local*2 <= k.wg {
		local *= 2
	}
	b.launch(k, 3, [3]int{roundUp(r.Dims/2, local), heads, n}, [3]int{local, 1, 1}, 4*n*(2*heads*r.Dims+1))
}

// elemRows validates n rows of same-shaped F32 tensors (dst first) for an
// elementwise op and returns them with the element count, or d nil when
// there is nothing to launch: an error (recorded), no elements, or hold
// (for one row) ended the held chain with the op (fuse.go).
func (b *Backend) elemRows(op string, n int, dst, a, c backend.Tensor, hold func(d, a, c *tensor) bool) (d, at, ct *tensor, count int) {
	if !b.enter(op) {
		return nil, nil, nil, 0
	}
	d, at, ct, count = b.rowsOf(op, n, dst, a, c)
	if d == nil || (n == 1 && hold(d, at, ct)) {
		return nil, nil, nil, 0
	}
	return d, at, ct, count
}

// launchElems launches the elementwise kernel k over count elements of d,
// at and ct (as elemRows returns them), passing the ints more after the
// count.
func (b *Backend) launchElems(k *kern, d, at, ct *tensor, count int, more ...int) {
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, at.mem)
	b.argMem(k, 2, ct.mem)
	b.argI32(k, 3, count)
	for j, v := range more {
		b.argI32(k, 4+j, v)
	}
	b.launch(k, 1, [3]int{roundUp(count, k.wg), 1, 1}, [3]int{k.wg, 1, 1}, 12*count)
}

// SiLUMul computes dst = silu(gate)·up as the CPU backend does, with the
// exp of the llama.cpp build it follows over each row's whole vectors of
// its width (lanes), the C library's over the rest (elementwise.cl): rows
// of whole vectors take silu_mul, which need not find where a row ends.
// One row may join the held chain instead (fused.cl's mvf, which computes
// the same).
func (b *Backend) SiLUMul(dst, gate, up backend.Tensor, n int) {
	d, g, u, count := b.elemRows("SiLUMul", n, dst, gate, up, b.holdSiLUMul)
	if d == nil {
		return
	}
	if cols := count / n; cols%b.flavour.Lanes() != 0 {
		b.launchElems(b.siluMulRows, d, g, u, count, b.flavour.Lanes(), cols)
		return
	}
	b.launchElems(b.siluMul, d, g, u, count, b.flavour.Lanes())
}

// Add computes dst = a + b.
func (b *Backend) Add(dst, a, c backend.Tensor, n int) {
	if d, at, ct, count := b.elemRows("Add", n, dst, a, c, b.holdAdd); d != nil {
		b.launchElems(b.add, d, at, ct, count)
	}
}

// copyElems queues the copy kernel over 4-byte elements.
func (b *Backend) copyElems(d *tensor, dstOff int, s *tensor, srcOff, count int) {
	b.copyWith(b.copyKern, d, dstOff, s, srcOff, count)
}

// copyWith queues one of the copy kernels (elementwise.cl), which share
// their arguments: dst, dstOff, src, srcOff, count, offsets in elements.
func (b *Backend) copyWith(k *kern, d *tensor, dstOff int, s *tensor, srcOff, count int) {
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argU64(k, 1, dstOff)
	b.argMem(k, 2, s.mem)
	b.argU64(k, 3, srcOff)
	b.argI32(k, 4, count)
	b.launch(k, 1, [3]int{roundUp(count, k.wg), 1, 1}, [3]int{k.wg, 1, 1}, count*(d.bytes/max(d.elems, 1)+s.bytes/max(s.elems, 1)))
}

func copyable(dt dtype.Type) bool { return dt == dtype.F32 || dt == dtype.I32 }

// CopySlice copies count elements of src at srcOff to dst at dstOff.
func (b *Backend) CopySlice(dst backend.Tensor, dstOff int, src backend.Tensor, srcOff, count int) {
	const op = "CopySlice"
	if !b.enter(op) {
		return
	}
	d, s := b.out(op, "dst", dst), b.own(op, "src", src)
	if d == nil || s == nil {
		return
	}
	// Same-type copies move bits; F32 into F16 is the append to an f16 KV
	// cache, rounded to nearest even as llama.cpp stores its cache, and
	// into another cache type its from_float (kvquant.cl).
	k := b.copyKern
	switch {
	case d.dt == s.dt && copyable(d.dt):
	case d.dt == dtype.F16 && s.dt == dtype.F16:
		k = b.copyF16
	case d.dt == dtype.F16 && s.dt == dtype.F32:
		k = b.copyF32F16
	case d.dt == dtype.F32 && s.dt == dtype.F16:
		k = b.copyF16F32
	case s.dt == dtype.F32 && hasKVQ(d.dt), d.dt == dtype.F32 && hasKVQ(s.dt):
		k = nil // a quantised or BF16 cache: copyCache
	default:
		b.shape(op, "dst %v and src %v: want both F32, both I32, both F16, F32 into F16 or F16 into F32, or F32 into or out of a BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL cache", d, s)
		return
	}
	if count < 0 || dstOff < 0 || srcOff < 0 || dstOff > d.elems-count || srcOff > s.elems-count {
		b.shape(op, "%d elements from src %v at %d to dst %v at %d are out of bounds", count, s, srcOff, d, dstOff)
		return
	}
	if k == nil {
		if b.fits(op, "count", count) {
			b.copyCache(op, d, dstOff, s, srcOff, count)
		}
		return
	}
	if count == 0 || !b.fits(op, "count", count) || b.holdStore(d, dstOff, s, srcOff, count) {
		return
	}
	b.copyWith(k, d, dstOff, s, srcOff, count)
}

// Attention is attention of n query rows over the cache cells kv lets
// each see (backend.KVView). Rows whose sequence id or range is bad are
// found on the device: they get zeros and Sync reports the row.
func (b *Backend) Attention(out, q, k, v backend.Tensor, n int, kv backend.KVView, a backend.Attn) {
	const op = "Attention"
	if !b.enter(op) {
		return
	}
	ot, qt, kt, vt := b.out(op, "out", out), b.own(op, "q", q), b.own(op, "k", k), b.own(op, "v", v)
	rt, ct := b.own(op, "kv.Rows", kv.Rows), b.own(op, "kv.Cells", kv.Cells)
	if ot == nil || qt == nil || kt == nil || vt == nil || rt == nil || ct == nil {
		return
	}
	heads, kvHeads, headDim := a.Heads, a.KVHeads, a.HeadDim
	if n < 0 || heads <= 0 || kvHeads <= 0 || headDim <= 0 || heads%kvHeads != 0 {
		b.shape(op, "n = %d, heads = %d, kvHeads = %d, headDim = %d (heads must be a multiple of kvHeads)",
			n, heads, kvHeads, headDim)
		return
	}
	if !(a.SoftCap >= 0) || a.Window < 0 {
		b.shape(op, "soft cap %g, window %d: neither may be negative", a.SoftCap, a.Window)
		return
	}
	if !b.f32Rows(op, "q", qt, n, heads*headDim) || !b.f32Rows(op, "out", ot, n, heads*headDim) {
		return
	}
	if rt.dt != dtype.I32 || backend.Cols(rt) != 4 || backend.Rows(rt) < n || ct.dt != dtype.I32 || backend.Cols(ct) != 3 {
		b.shape(op, "kv.Rows %v, kv.Cells %v: want I32 [≥ %d, 4] and I32 [_, 3]", rt, ct, n)
		return
	}
	kvRow := kvHeads * headDim
	for _, c := range [2]*tensor{kt, vt} {
		if _, ok := faTypes[c.dt]; !ok || !a.Flash && c.dt != dtype.F32 && c.dt != dtype.F16 {
			if c == vt && ok {
				b.shape(op, "V cache %v: a quantised or BF16 V needs flash attention (Attn.Flash)", c)
			} else if ok {
				b.shape(op, "K cache %v: a quantised or BF16 K needs flash attention (Attn.Flash)", c)
			} else {
				b.shape(op, "cache %v is not F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL", c)
			}
			return
		}
		if bs := c.dt.BlockSize(); headDim%bs != 0 {
			b.shape(op, "cache %v: head size %d is not a whole number of its %d-element blocks", c, headDim, bs)
			return
		}
		if c.elems%kvRow != 0 || c.elems/kvRow < kv.Hi {
			b.shape(op, "cache %v does not hold %d cells of %d KV heads × %d", c, kv.Hi, kvHeads, headDim)
			return
		}
	}
	if kv.Lo < 0 || kv.Lo > kv.Hi || kv.Hi > backend.Rows(ct) {
		b.shape(op, "view [%d, %d) outside the %d cell entries of %v", kv.Lo, kv.Hi, backend.Rows(ct), ct)
		return
	}
	if n == 0 || !b.fits(op, "cells", kv.Hi) || !b.fits(op, "rows", n) || !b.fits(op, "window", a.Window) {
		return
	}
	b.checkStatus = true
	if a.Flash {
		b.attendFlash(op, ot, qt, kt, vt, rt, ct, n, kv, a)
		return
	}
	// The AVX-512 arithmetic is for K and V caches of one type (numerics.Flavour).
	wide := b.flavour.Wide() && kt.dt == vt.dt
	if parts := b.attnPartitions(n, kv.Hi-kv.Lo, heads); parts > 1 {
		b.attendSplit(op, ot, qt, kt, vt, rt, ct, kv, a, parts, wide)
		return
	}
	kk := b.attention[kvIndex(kt)][kvIndex(vt)]
	// A batch's rows may take either arithmetic (att_batched): lacc has
	// room for the larger, a decode row's.
	t := b.attnLocal(op, kk, headDim, attnLanes(wide), heads/kvHeads, n)
	if t.lanes == 0 {
		return
	}
	b.argMem(kk, 0, ot.mem)
	b.argMem(kk, 1, qt.mem)
	b.argMem(kk, 2, kt.mem)
	b.argMem(kk, 3, vt.mem)
	i := b.attnView(kk, 4, rt, ct, kv, a)
	b.argI32(kk, i, heads)
	b.argI32(kk, i+1, kvHeads)
	b.argI32(kk, i+2, headDim)
	i = b.attnScoring(kk, i+3, a)
	b.argMem(kk, i, b.status)
	b.argI32(kk, i+1, b01(wide))
	b.argI32(kk, i+2, b01(n > 1 && !kv.Decode))
	b.argI32(kk, i+3, t.lanes)
	b.argI32(kk, i+4, t.hq)
	b.argI32(kk, i+5, t.rows)
	b.argI32(kk, i+6, n)
	b.setAttnLocal(kk, i+7, headDim, t)
	b.launch(kk, 2, [3]int{kk.wg * heads / t.hq, (n + t.rows - 1) / t.rows, 1}, [3]int{kk.wg, 1, 1},
		8*n*heads*headDim+viewBytes(n, kv, a, kt, vt))
}

// Argmax writes each of the first n rows' index of its maximum to dst.
func (b *Backend) Argmax(dst, x backend.Tensor, n int) {
	const op = "Argmax"
	if !b.enter(op) {
		return
	}
	d, xt := b.out(op, "dst", dst), b.own(op, "x", x)
	if d == nil || xt == nil {
		return
	}
	cols := backend.Cols(xt)
	if !b.f32Rows(op, "x", xt, n, cols) {
		return
	}
	if d.dt != dtype.I32 || d.elems < n {
		b.shape(op, "dst %v does not hold %d I32 indices", d, n)
		return
	}
	if cols == 0 && n > 0 {
		b.shape(op, "x %v has empty rows", xt)
		return
	}
	if n == 0 || !b.fits(op, "columns", cols) {
		return
	}
	k := b.argmax
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, xt.mem)
	b.argI32(k, 2, cols)
	b.argLocal(k, 3, 4*k.wg)
	b.argLocal(k, 4, 4*k.wg)
	b.launch(k, 2, [3]int{k.wg, n, 1}, [3]int{k.wg, 1, 1}, 4*n*(cols+1))
}
