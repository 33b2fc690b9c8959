// Package workspace holds the LayerWorkspace: every intermediate buffer a
// decoder layer needs, allocated once on the backend when a model loads and
// reused by every layer and every token, so that generating a token
// allocates nothing.
package workspace

import (
	"fmt"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/model"
)

// LayerWorkspace is sized for up to Batch tokens per forward call and
// Outputs tokens whose logits are computed. Rows past the current n are
// stale and never read.
type LayerWorkspace struct {
	Batch, Outputs int

	X     backend.Tensor // [Batch, embd] residual stream
	XNorm backend.Tensor // [Batch, embd] normalised input of attention/FFN
	Q     backend.Tensor // [Batch, heads·headDim]
	K     backend.Tensor // [Batch, kvHeads·headDim]
	V     backend.Tensor // [Batch, kvHeads·headDim]
	Att   backend.Tensor // [Batch, heads·headDim] attention output
	Out   backend.Tensor // [Batch, embd] o_proj / ffn_down output
	Gate  backend.Tensor // [Batch, ff]
	Up    backend.Tensor // [Batch, ff]

	Hidden backend.Tensor // [Outputs, embd] final hidden states of the tokens whose logits are wanted
	Logits backend.Tensor // [Outputs, vocab]
	IDs    backend.Tensor // I32 [Batch] token ids in
	Pos    backend.Tensor // I32 [Batch] their positions (RoPE, learned position embeddings)
	Best   backend.Tensor // I32 [Outputs] argmax out

	all []backend.Tensor
}

// New allocates a workspace for config c on backend b, for batches of up to
// batch tokens of which up to outputs want logits (outputs ≤ batch: the head
// normalises them in XNorm).
func New(b backend.Backend, c model.Config, batch, outputs int) (*LayerWorkspace, error) {
	if batch < 1 || outputs < 1 || outputs > batch {
		return nil, fmt.Errorf("workspace: batch %d, outputs %d: want 1 ≤ outputs ≤ batch", batch, outputs)
	}
	w := &LayerWorkspace{Batch: batch, Outputs: outputs}
	qDim, kvDim := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	bufs := []struct {
		dst   *backend.Tensor
		dt    dtype.Type
		shape []int
	}{
		{&w.X, dtype.F32, []int{batch, c.NEmbd}},
		{&w.XNorm, dtype.F32, []int{batch, c.NEmbd}},
		{&w.Q, dtype.F32, []int{batch, qDim}},
		{&w.K, dtype.F32, []int{batch, kvDim}},
		{&w.V, dtype.F32, []int{batch, kvDim}},
		{&w.Att, dtype.F32, []int{batch, qDim}},
		{&w.Out, dtype.F32, []int{batch, c.NEmbd}},
		{&w.Gate, dtype.F32, []int{batch, c.NFF}},
		{&w.Up, dtype.F32, []int{batch, c.NFF}},
		{&w.Hidden, dtype.F32, []int{outputs, c.NEmbd}},
		{&w.Logits, dtype.F32, []int{outputs, c.Vocab}},
		{&w.IDs, dtype.I32, []int{batch}},
		{&w.Pos, dtype.I32, []int{batch}},
		{&w.Best, dtype.I32, []int{outputs}},
	}
	for _, buf := range bufs {
		t, err := b.Alloc(buf.dt, buf.shape...)
		if err != nil {
			w.Free(b)
			return nil, fmt.Errorf("workspace: %v %v: %w", buf.dt, buf.shape, err)
		}
		*buf.dst = t
		w.all = append(w.all, t)
	}
	return w, nil
}

// Free releases every buffer.
func (w *LayerWorkspace) Free(b backend.Backend) {
	for _, t := range w.all {
		b.Free(t)
	}
	w.all = nil
}
