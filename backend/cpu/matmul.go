package cpu

import (
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

const (
	// tokenTile tokens share one pass over a weight row in prefill: each
	// dequantised chunk is used tokenTile times while it sits in L1, and
	// the tile's activations (tokenTile × chunk floats) stay in L2.
	tokenTile = 32
	// chunkElems is one Q6_K super-block and eight Q4_0/Q8_0 blocks.
	chunkElems = dtype.QK_K
)

// MatMulTransposed implements backend.Backend.
func (b *Backend) MatMulTransposed(dst, x, w backend.Tensor, n int) {
	const op = "MatMulTransposed"
	if !b.ok(op) {
		return
	}
	d := b.tensor(op, "dst", dst, dtype.F32)
	xt := b.tensor(op, "x", x, dtype.F32)
	wt, err := b.own(op, "w", w)
	if err != nil {
		b.fail(err)
		return
	}
	if d == nil || xt == nil || !b.writable(op, "dst", d) || !b.checkN(op, n, d, xt) {
		return
	}
	if wt.dt == dtype.I32 {
		b.fail(backend.ShapeError("cpu: "+op, "weight %q is I32", wt.name))
		return
	}
	k, m := backend.Cols(wt), backend.Rows(wt)
	if backend.Cols(xt) != k || backend.Cols(d) != m {
		b.fail(backend.ShapeError("cpu: "+op, "x %v · w %q %v → dst %v: want x [_, %d] and dst [_, %d]",
			xt.shape, wt.name, wt.shape, d.shape, k, m))
		return
	}
	if n == 0 {
		return
	}
	t := &b.pool.task
	*t = task{kind: kMatMul, total: m, dst: d.f32, x: xt.f32, w: wt.data, y: wt.f32, wt: wt.dt, n: n, k: k, m: m}
	if b.simd > simdOff && simdType(wt.dt) {
		t.simd = b.simd
	}
	// About four chunks per thread even out threads slowed down by others
	// on the machine; the SIMD prefill kernel works on panels of 32 rows, so
	// its chunks are whole panels.
	t.grain = b.grainFor(m)
	if t.simd > simdOff && n > 1 {
		t.grain = (t.grain + 31) / 32 * 32
	}
	b.pool.run()
}

// matMulRows computes output columns lo…hi-1 for every token. Decode calls
// the dot kernel on the stored row directly; prefill dequantises a chunk of
// the row once and reuses it for a tile of tokens.
func matMulRows(t *task, lo, hi int) {
	k, m, n := t.k, t.m, t.n
	rowBytes, _ := t.wt.RowBytes(k)
	if t.simd > simdOff {
		if n == 1 {
			simdMatVec(t.simd, t, rowBytes, lo, hi)
		} else {
			simdMatMat(t.simd, t, rowBytes, lo, hi)
		}
		return
	}
	if n == 1 {
		x := t.x[:k]
		for o := lo; o < hi; o++ {
			var wf []float32
			if t.wt == dtype.F32 {
				wf = t.y[o*k : (o+1)*k]
			}
			t.dst[o] = dot(t.wt, x, t.w[o*rowBytes:(o+1)*rowBytes], wf)
		}
		return
	}
	var buf [chunkElems]float32
	var acc [tokenTile]float32
	elemBytes := 0 // bytes per element for plain types; chunks of blocks otherwise
	if !t.wt.Quantized() {
		elemBytes = t.wt.BlockBytes()
	}
	chunkBytes := chunkElems / t.wt.BlockSize() * t.wt.BlockBytes()
	for o := lo; o < hi; o++ {
		row := t.w[o*rowBytes : (o+1)*rowBytes]
		for t0 := 0; t0 < n; t0 += tokenTile {
			nt := min(tokenTile, n-t0)
			clear(acc[:nt])
			for c := 0; c < k; c += chunkElems {
				cl := min(chunkElems, k-c)
				var wc []float32
				if t.wt == dtype.F32 {
					wc = t.y[o*k+c : o*k+c+cl]
				} else {
					off := c / chunkElems * chunkBytes
					if elemBytes > 0 {
						off = c * elemBytes
					}
					wc = buf[:cl]
					dequant(t.wt, wc, row[off:])
				}
				xs := t.x[t0*k+c:]
				for i := range nt {
					acc[i] += dotF32(xs[i*k:i*k+cl], wc)
				}
			}
			for i := range nt {
				t.dst[(t0+i)*m+o] = acc[i]
			}
		}
	}
}
