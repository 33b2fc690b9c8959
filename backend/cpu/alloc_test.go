package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/backendtest"
	"github.com/glint-llm/glint/dtype"
)

// TestZeroAllocs runs the ops of a decode step (and a small prefill) and
// asserts that, once scratch has grown to the shapes in use, they allocate
// nothing: a layer calls about 15 ops per token.
func TestZeroAllocs(t *testing.T) {
	const (
		dim, heads, kvHeads, headDim, ffn, vocab, maxSeq = 256, 4, 2, 64, 512, 1000, 64
		kvCols                                           = kvHeads * headDim
	)
	b := New(3)
	defer b.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	must := func(tt backend.Tensor, err error) backend.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	var ws []backend.Tensor
	for _, dt := range backendtest.WeightTypes {
		ws = append(ws, must(b.Weight(dt.String(), dt, []int{dim, dim}, backendtest.RandomWeight(t, rng, dt, dim, dim))))
	}
	up := must(b.Weight("up", dtype.Q4_0, []int{ffn, dim}, backendtest.RandomWeight(t, rng, dtype.Q4_0, ffn, dim)))
	embd := must(b.Weight("embd", dtype.Q8_0, []int{vocab, dim}, backendtest.RandomWeight(t, rng, dtype.Q8_0, vocab, dim)))
	head := must(b.Weight("head", dtype.Q6_K, []int{vocab, dim}, backendtest.RandomWeight(t, rng, dtype.Q6_K, vocab, dim)))
	norm := must(b.Weight("norm", dtype.F32, []int{dim}, backendtest.RandomWeight(t, rng, dtype.F32, 1, dim)))
	const batch = 8
	x := must(b.Alloc(dtype.F32, batch, dim))
	y := must(b.Alloc(dtype.F32, batch, dim))
	g := must(b.Alloc(dtype.F32, batch, ffn))
	u := must(b.Alloc(dtype.F32, batch, ffn))
	kv := must(b.Alloc(dtype.F32, batch, kvCols))
	kc := must(b.Alloc(dtype.F32, maxSeq, kvHeads, headDim))
	vc := must(b.Alloc(dtype.F32, maxSeq, kvHeads, headDim))
	logits := must(b.Alloc(dtype.F32, 1, vocab))
	ids := must(b.Alloc(dtype.I32, batch))
	if err := b.WriteF32(x, 0, make([]float32, batch*dim)); err != nil {
		t.Fatal(err)
	}
	// The decode row's view and position are written each step, as
	// kvcache does; the prefill's causal rows once.
	full, err := backendtest.Causal(1, maxSeq-1).Upload(b)
	if err != nil {
		t.Fatal(err)
	}
	prefill, err := backendtest.Causal(batch, 0).Upload(b)
	if err != nil {
		t.Fatal(err)
	}
	prefill.Cells = full.Cells
	posT := must(b.Alloc(dtype.I32, batch))
	row := make([]int32, 4)
	attn := backend.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: headDim, Scale: 0.125}
	rope := backend.Rope{Dims: headDim, Theta: 10000, NeoX: true}
	pos := 0
	step := func() {
		row[0], row[3] = int32(pos), int32(pos+1)
		if err := b.WriteI32(full.Rows, 0, row); err != nil {
			t.Fatal(err)
		}
		if err := b.WriteI32(posT, 0, row[:1]); err != nil {
			t.Fatal(err)
		}
		b.Embedding(x, embd, ids, 1)
		b.RMSNorm(y, x, norm, 1, 1e-5)
		for _, w := range ws {
			b.MatMulTransposed(x, y, w, 1)
		}
		b.RoPE(x, 1, heads, headDim, posT, rope)
		b.CopySlice(kc, pos*kvCols, kv, 0, kvCols)
		b.CopySlice(vc, pos*kvCols, kv, 0, kvCols)
		view := full
		view.Hi = pos + 1
		b.Attention(y, x, kc, vc, 1, view, attn)
		b.Add(x, x, y, 1)
		b.MatMulTransposed(g, x, up, 1)
		b.MatMulTransposed(u, x, up, 1)
		b.SiLUMul(g, g, u, 1)
		b.MatMulTransposed(logits, x, head, 1)
		b.Argmax(ids, logits, 1)
		// A small prefill exercises the tiled matmul and causal attention.
		b.MatMulTransposed(y, x, ws[4], batch)
		b.Attention(y, x, kc, vc, batch, prefill, attn)
		pos = (pos + 1) % (maxSeq - batch)
	}
	step() // grows scratch to the cache size
	if allocs := testing.AllocsPerRun(20, step); allocs != 0 {
		t.Errorf("%v allocations per decode step, want 0", allocs)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}
