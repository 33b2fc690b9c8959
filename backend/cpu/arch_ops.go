package cpu

import (
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/ggmlmath"
)

// The ops that architectures beyond Llama add (GPT-2's LayerNorm and GELU,
// Gemma's GeGLU, scales and soft-capping, biases), each in the float
// operations of llama.cpp's CPU build.

// LayerNorm implements backend.Backend, as llama.cpp computes it
// (layerNormRows).
func (b *Backend) LayerNorm(dst, x, w, bias backend.Tensor, n int, eps float32) {
	const op = "LayerNorm"
	if !b.ok(op) {
		return
	}
	d := b.tensor(op, "dst", dst, dtype.F32)
	xt := b.tensor(op, "x", x, dtype.F32)
	wt := b.tensor(op, "w", w, dtype.F32)
	if d == nil || xt == nil || wt == nil {
		return
	}
	var bv []float32
	if bias != nil {
		bt := b.tensor(op, "b", bias, dtype.F32)
		if bt == nil {
			return
		}
		bv = bt.f32
	}
	if !b.writable(op, "dst", d) || !b.checkN(op, n, d, xt) {
		return
	}
	cols := backend.Cols(xt)
	if backend.Cols(d) != cols || len(wt.f32) != cols || bv != nil && len(bv) != cols {
		b.fail(backend.ShapeError("cpu: "+op, "x %v, w %v, b [%d], dst %v", xt.shape, wt.shape, len(bv), d.shape))
		return
	}
	if n == 0 {
		return
	}
	t := &b.pool.task
	*t = task{kind: kLayerNorm, total: n, grain: max(1, minElemsPerTask/cols), dst: d.f32, x: xt.f32, y: wt.f32, z: bv, k: cols, eps: eps}
	b.pool.run()
}

func layerNormRows(t *task, lo, hi int) {
	k := t.k
	w := t.y[:k]
	for i := lo; i < hi; i++ {
		x, y := t.x[i*k:(i+1)*k], t.dst[i*k:(i+1)*k]
		// ggml's norm: the mean of the row summed in float64 and rounded to
		// float32, the float32 deviations' squares summed in float64, the
		// variance rounded to float32, scale = 1/sqrtf(σ² + eps) in float32;
		// then (ggml_mul, ggml_add) ·w and +b, each rounded.
		var sum float64
		for _, v := range x {
			sum += float64(v)
		}
		mean := float32(sum / float64(k))
		var sum2 float64
		for j, v := range x {
			v -= mean
			y[j] = v
			sum2 += float64(v * v)
		}
		variance := float32(sum2 / float64(k))
		s := 1 / float32(math.Sqrt(float64(variance+t.eps)))
		for j := range y {
			y[j] = (y[j] * s) * w[j]
		}
		if t.z != nil {
			for j, bj := range t.z[:k] {
				y[j] += bj
			}
		}
	}
}

// GELUMul implements backend.Backend.
func (b *Backend) GELUMul(dst, gate, up backend.Tensor, n int) {
	d, g, u, cols := b.elementwise("GELUMul", "gate", "up", dst, gate, up, n)
	if d == nil || n == 0 {
		return
	}
	b.runGELU(d.f32, g.f32, u.f32, n*cols)
}

// GELU implements backend.Backend.
func (b *Backend) GELU(dst, x backend.Tensor, n int) {
	d, xt, _, cols := b.elementwise("GELU", "x", "x", dst, x, x, n)
	if d == nil || n == 0 {
		return
	}
	b.runGELU(d.f32, xt.f32, nil, n*cols)
}

// runGELU runs dst = gelu(x) (·up when up is not nil) over total elements.
func (b *Backend) runGELU(dst, x, up []float32, total int) {
	t := &b.pool.task
	*t = task{kind: kGELUMul, total: total, grain: max(minElemsPerTask, b.grainFor(total)), dst: dst, x: x, y: up}
	b.pool.run()
}

// geluMulRange is ggml_vec_gelu_f32 (the F16 table: ggmlmath.GELU), then,
// for GeGLU, ggml_mul by up.
func geluMulRange(t *task, lo, hi int) {
	d, g := t.dst[lo:hi], t.x[lo:hi]
	if t.y == nil {
		for i, v := range g {
			d[i] = ggmlmath.GELU(v)
		}
		return
	}
	u := t.y[lo:hi]
	for i, v := range g {
		d[i] = ggmlmath.GELU(v) * u[i]
	}
}

// AddBias implements backend.Backend.
func (b *Backend) AddBias(dst, x, bias backend.Tensor, n int) {
	const op = "AddBias"
	d, xt, _, cols := b.elementwise(op, "x", "x", dst, x, x, n)
	if d == nil {
		return
	}
	bt := b.tensor(op, "bias", bias, dtype.F32)
	if bt == nil {
		return
	}
	if len(bt.f32) != cols {
		b.fail(backend.ShapeError("cpu: "+op, "bias %v for rows of %d", bt.shape, cols))
		return
	}
	for i := range n {
		xs, ds := xt.f32[i*cols:(i+1)*cols], d.f32[i*cols:(i+1)*cols]
		for j, v := range bt.f32 {
			ds[j] = xs[j] + v
		}
	}
}

// Scale implements backend.Backend.
func (b *Backend) Scale(dst, x backend.Tensor, n int, s float32) {
	d, xt, _, cols := b.elementwise("Scale", "x", "x", dst, x, x, n)
	if d == nil {
		return
	}
	m := n * cols
	xs, ds := xt.f32[:m], d.f32[:m]
	for i, v := range xs {
		ds[i] = v * s
	}
}

// SoftCap implements backend.Backend.
func (b *Backend) SoftCap(x backend.Tensor, n int, c float32) {
	const op = "SoftCap"
	d, _, _, cols := b.elementwise(op, "x", "x", x, x, x, n)
	if d == nil {
		return
	}
	if !(c > 0) || math.IsInf(float64(c), 0) {
		b.fail(backend.ShapeError("cpu: "+op, "cap %g is not a positive finite number", c))
		return
	}
	for i, v := range d.f32[:n*cols] {
		d.f32[i] = ggmlmath.SoftCap(v, c)
	}
}
