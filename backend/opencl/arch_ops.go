package opencl

import (
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/ggmlmath"
)

// The ops that architectures beyond Llama add (kernels in norm.cl and
// elementwise.cl), in the CPU backend's float operations.

// uploadGELUTable puts ggml's F16 GELU table on the device, where gelu_mul
// looks its results up as the CPU backend does.
func (b *Backend) uploadGELUTable() error {
	t := ggmlmath.GELUTable()
	m, err := b.ctx.NewBuffer(2 * len(t))
	if err != nil {
		return err
	}
	b.geluTable = m
	if err := b.q.Write(m, 0, 2*len(t), ptr(t)); err != nil {
		return err
	}
	return nil
}

// LayerNorm normalises the first n rows of x into dst (mean and variance),
// scaled by w and shifted by bias when it is not nil.
func (b *Backend) LayerNorm(dst, x, w, bias backend.Tensor, n int, eps float32) {
	const op = "LayerNorm"
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
	if wt.dt != dtype.F32 || wt.elems != cols {
		b.shape(op, "w %v is not F32 [%d]", wt, cols)
		return
	}
	bm, hasB := wt.mem, 0 // an unread stand-in when there is no bias
	if bias != nil {
		bt := b.own(op, "b", bias)
		if bt == nil {
			return
		}
		if bt.dt != dtype.F32 || bt.elems != cols {
			b.shape(op, "b %v is not F32 [%d]", bt, cols)
			return
		}
		bm, hasB = bt.mem, 1
	}
	if n == 0 || !b.fits(op, "columns", cols) {
		return
	}
	k := b.layerNorm
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, xt.mem)
	b.argMem(k, 2, wt.mem)
	b.argMem(k, 3, bm)
	b.argI32(k, 4, hasB)
	b.argI32(k, 5, cols)
	b.argF32(k, 6, eps)
	b.argLocal(k, 7, 8*k.wg) // doubles where the device has fp64 (norm.cl)
	b.launch(k, 2, [3]int{k.wg, n, 1}, [3]int{k.wg, 1, 1}, 4*(2*n*cols+(1+hasB)*cols))
}

// GELUMul computes dst = gelu(gate)·up.
func (b *Backend) GELUMul(dst, gate, up backend.Tensor, n int) {
	b.gelu("GELUMul", dst, gate, up, n)
}

// GELU computes dst = gelu(x).
func (b *Backend) GELU(dst, x backend.Tensor, n int) {
	b.gelu("GELU", dst, x, nil, n)
}

func (b *Backend) gelu(op string, dst, x, up backend.Tensor, n int) {
	hasUp := 1
	if up == nil {
		up, hasUp = x, 0
	}
	d, xt, ut, count := b.sameRows(op, n, dst, x, up)
	if d == nil {
		return
	}
	k := b.geluMul
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, xt.mem)
	b.argMem(k, 2, ut.mem)
	b.argI32(k, 3, count)
	b.argMem(k, 4, b.geluTable)
	b.argI32(k, 5, hasUp)
	b.launch(k, 1, [3]int{roundUp(count, k.wg), 1, 1}, [3]int{k.wg, 1, 1}, 4*count*(2+hasUp))
}

// AddBias computes dst[i, :] = x[i, :] + bias.
func (b *Backend) AddBias(dst, x, bias backend.Tensor, n int) {
	const op = "AddBias"
	d, xt, _, count := b.sameRows(op, n, dst, x, x)
	if d == nil {
		return
	}
	bt := b.own(op, "bias", bias)
	if bt == nil {
		return
	}
	cols := backend.Cols(d)
	if bt.dt != dtype.F32 || bt.elems != cols {
		b.shape(op, "bias %v is not F32 [%d]", bt, cols)
		return
	}
	k := b.addBias
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, xt.mem)
	b.argMem(k, 2, bt.mem)
	b.argI32(k, 3, count)
	b.argI32(k, 4, cols)
	b.launch(k, 1, [3]int{roundUp(count, k.wg), 1, 1}, [3]int{k.wg, 1, 1}, 4*(2*count+cols))
}

// Scale computes dst = x·s.
func (b *Backend) Scale(dst, x backend.Tensor, n int, s float32) {
	d, xt, _, count := b.sameRows("Scale", n, dst, x, x)
	if d == nil {
		return
	}
	k := b.scale
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argMem(k, 1, xt.mem)
	b.argF32(k, 2, s)
	b.argI32(k, 3, count)
	b.launch(k, 1, [3]int{roundUp(count, k.wg), 1, 1}, [3]int{k.wg, 1, 1}, 8*count)
}

// SoftCap computes x = c·tanh(x/c) in place.
func (b *Backend) SoftCap(x backend.Tensor, n int, c float32) {
	const op = "SoftCap"
	if b.enter(op) && (!(c > 0) || math.IsInf(float64(c), 0)) {
		b.shape(op, "cap %g is not a positive finite number", c)
		return
	}
	d, _, _, count := b.sameRows(op, n, x, x, x)
	if d == nil {
		return
	}
	k := b.softCap
	if !b.made(k) {
		return
	}
	b.argMem(k, 0, d.mem)
	b.argF32(k, 1, 1/c)
	b.argF32(k, 2, c)
	b.argI32(k, 3, count)
	b.launch(k, 1, [3]int{roundUp(count, k.wg), 1, 1}, [3]int{k.wg, 1, 1}, 8*count)
}

// sameRows validates n rows of F32 tensors of one row length (dst first)
// and returns them with the element count, or d nil when there is nothing
// to launch (an error, recorded, or no elements).
func (b *Backend) sameRows(op string, n int, dst, a, c backend.Tensor) (d, at, ct *tensor, count int) {
	if !b.enter(op) {
		return nil, nil, nil, 0
	}
	return b.rowsOf(op, n, dst, a, c)
}

// rowsOf is sameRows' check, for an op that has begun.
func (b *Backend) rowsOf(op string, n int, dst, a, c backend.Tensor) (d, at, ct *tensor, count int) {
	d, at, ct = b.out(op, "dst", dst), b.own(op, "a", a), b.own(op, "b", c)
	if d == nil || at == nil || ct == nil {
		return nil, nil, nil, 0
	}
	cols := backend.Cols(d)
	if !b.f32Rows(op, "dst", d, n, cols) || !b.f32Rows(op, "a", at, n, cols) || !b.f32Rows(op, "b", ct, n, cols) {
		return nil, nil, nil, 0
	}
	count = n * cols
	if count == 0 || !b.fits(op, "element count", count) {
		return nil, nil, nil, 0
	}
	return d, at, ct, count
}
