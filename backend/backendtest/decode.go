package backendtest

import (
	"fmt"
	"math"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
)

// testMatMulDecode holds MatMulDecode to its contract: each of n rows gets
// exactly the bits MatMulTransposed gives that row alone (n = 1), for every
// weight type, at token counts on both sides of a backend's decode/prefill
// split. The expectation is the backend's own lone-row matmul, which the
// MatMulTransposed test holds to the float64 reference.
func testMatMulDecode(h *harness) {
	for _, dt := range WeightTypes {
		for si, s := range matmulShapes(dt) {
			m, k := s[0], s[1]
			raw := RandomWeight(h.t, h.rng, dt, m, k)
			w := h.weight("w", dt, raw, m, k)
			// Each row is checked by a launch of its own (slow on a
			// device): every split on the first shape — a few tokens,
			// more than a decode's (8), and for float weights more than
			// a 32-token tile — and a few tokens on the others.
			ns := []int{3}
			if si == 0 {
				ns = append(ns, 9)
				if !dt.Quantized() {
					ns = append(ns, 33)
				}
			}
			for _, n := range ns {
				x := h.rand(n * k)
				xt := h.f32(x, n, k)
				dst := h.f32(sentinel(n*m), n, m)
				h.be.MatMulDecode(dst, xt, w, n)
				got := h.read(dst)
				want := make([]float32, 0, n*m)
				one := h.f32(make([]float32, k), 1, k)
				oneDst := h.f32(make([]float32, m), 1, m)
				for i := range n {
					if err := h.be.WriteF32(one, 0, x[i*k:(i+1)*k]); err != nil {
						h.t.Fatal(err)
					}
					h.be.MatMulTransposed(oneDst, one, w, 1)
					want = append(want, h.read(oneDst)...)
				}
				exact(h.t, fmt.Sprintf("%v [%d,%d] n=%d", dt, m, k, n), got, want)
				for _, t := range []backend.Tensor{xt, dst, one, oneDst} {
					h.be.Free(t)
				}
			}
			h.be.Free(w)
		}
	}
}

// testAttentionDecode holds KVView.Decode to its contract: a causal batch of
// one sequence (a verification step: the last token and its drafts) gives
// each row exactly the bits of that row decoded alone over the cells up to
// its own, over F32 and F16 caches and head sizes that take the prefill
// arithmetic's other sums.
func testAttentionDecode(h *harness) {
	type ac struct{ n, pos0, heads, kvHeads, hd int }
	cases := []ac{{5, 0, 4, 2, 8}, {9, 30, 8, 1, 64}, {4, 61, 4, 2, 16}}
	for _, kvt := range [][2]dtype.Type{{dtype.F32, dtype.F32}, {dtype.F16, dtype.F16}} {
		for _, c := range cases {
			cells := c.pos0 + c.n
			cols, kvCols := c.heads*c.hd, c.kvHeads*c.hd
			kt, _ := h.halfCache(kvt[0], h.rand(cells*kvCols), cells, c.kvHeads, c.hd)
			vt, _ := h.halfCache(kvt[1], h.rand(cells*kvCols), cells, c.kvHeads, c.hd)
			q := randF32(h.rng, c.n*cols, -3, 3)
			qt := h.f32(q, c.n, cols)
			out := h.f32(sentinel(c.n*cols), c.n, cols)
			a := backend.Attn{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd)))}
			batch := Causal(c.n, c.pos0)
			kv, err := batch.Upload(h.be)
			if err != nil {
				h.t.Fatal(err)
			}
			kv.Decode = true
			h.be.Attention(out, qt, kt, vt, c.n, kv, a)
			got := h.read(out)
			name := fmt.Sprintf("n=%d pos0=%d heads %d/%d headDim %d K %v V %v", c.n, c.pos0, c.heads, c.kvHeads, c.hd, kvt[0], kvt[1])
			one := h.f32(make([]float32, cols), 1, cols)
			oneOut := h.f32(make([]float32, cols), 1, cols)
			for i := range c.n {
				// Row i alone, as kvcache views a decode step: its own
				// cells only, the same range start.
				lone := Causal(c.pos0+i+1, 0)
				lone.Rows = lone.Rows[4*(c.pos0+i):]
				lv, err := lone.Upload(h.be)
				if err != nil {
					h.t.Fatal(err)
				}
				if err := h.be.WriteF32(one, 0, q[i*cols:(i+1)*cols]); err != nil {
					h.t.Fatal(err)
				}
				h.be.Attention(oneOut, one, kt, vt, 1, lv, a)
				exact(h.t, fmt.Sprintf("%s row %d", name, i), got[i*cols:(i+1)*cols], h.read(oneOut))
				h.be.Free(lv.Rows)
				h.be.Free(lv.Cells)
			}
			for _, t := range []backend.Tensor{kt, vt, qt, out, one, oneOut, kv.Rows, kv.Cells} {
				h.be.Free(t)
			}
		}
	}
}
