package layers

import (
	"errors"
	"fmt"
	"slices"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/workspace"
)

// Model is a Llama model on a backend: token embedding, decoder layers,
// final norm and LM head, with its workspace and KV cache. It implements
// engine.Model.
type Model struct {
	TokEmbd    backend.Tensor // [vocab, embd]
	OutputNorm backend.Tensor // [embd]
	Output     backend.Tensor // [vocab, embd]; TokEmbd when tied
	RopeFreqs  backend.Tensor // [ropeDims/2] or nil
	Layers     []Layer

	s       State
	weights []backend.Tensor
	// best and pos are their own allocations: device backends hand them
	// to C, and cgo forbids passing memory inside a struct that holds Go
	// pointers. pos stages a batch's positions.
	best, pos []int32
}

var _ engine.Model = (*Model)(nil)

// Options sizes the runtime buffers.
type Options struct {
	// Context is the KV-cache length (≤ 0: the model's trained context).
	Context int
	// Batch is the most prompt tokens run through a layer at once; longer
	// prompts are fed in chunks (≤ 0: 512).
	Batch int
	// CacheK and CacheV are the KV-cache element types, F16 or F32 (the zero
	// value); glint.Open defaults to F16, as llama.cpp does.
	CacheK, CacheV dtype.Type
	// Progress, when set, is told the weight bytes loaded so far.
	Progress func(done, total int64)
}

// weightRef is one entry of the name → field mapping.
type weightRef struct {
	dst      *backend.Tensor
	name     string
	shape    []int
	optional bool
}

// tensorMap is the one place where GGUF tensor names meet the model's fields.
func (m *Model) tensorMap(c model.Config) []weightRef {
	qDim, kvDim := c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim
	refs := []weightRef{
		{&m.TokEmbd, "token_embd.weight", []int{c.Vocab, c.NEmbd}, false},
		{&m.OutputNorm, "output_norm.weight", []int{c.NEmbd}, false},
		{&m.Output, "output.weight", []int{c.Vocab, c.NEmbd}, c.TiedEmbeddings},
		{&m.RopeFreqs, "rope_freqs.weight", []int{c.RopeDims / 2}, !c.HasRopeFreqs},
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		refs = append(refs,
			weightRef{&l.AttnNorm, p + "attn_norm.weight", []int{c.NEmbd}, false},
			weightRef{&l.Wq, p + "attn_q.weight", []int{qDim, c.NEmbd}, false},
			weightRef{&l.Wk, p + "attn_k.weight", []int{kvDim, c.NEmbd}, false},
			weightRef{&l.Wv, p + "attn_v.weight", []int{kvDim, c.NEmbd}, false},
			weightRef{&l.Wo, p + "attn_output.weight", []int{c.NEmbd, qDim}, false},
			weightRef{&l.FFNNorm, p + "ffn_norm.weight", []int{c.NEmbd}, false},
			weightRef{&l.WGate, p + "ffn_gate.weight", []int{c.NFF, c.NEmbd}, false},
			weightRef{&l.WUp, p + "ffn_up.weight", []int{c.NFF, c.NEmbd}, false},
			weightRef{&l.WDown, p + "ffn_down.weight", []int{c.NEmbd, c.NFF}, false},
		)
	}
	return refs
}

// Load places the weights of src on backend b and allocates the workspace
// and KV cache.
func Load(b backend.Backend, c model.Config, src model.Source, o Options) (*Model, error) {
	if c.RopeDims == 0 {
		c.RopeDims = c.HeadDim
	}
	if c.NHead <= 0 || c.NHeadKV <= 0 || c.NHead%c.NHeadKV != 0 {
		return nil, fmt.Errorf("layers: %d heads do not divide into %d KV heads", c.NHead, c.NHeadKV)
	}
	if o.Context <= 0 {
		o.Context = c.Context
	}
	if o.Batch <= 0 {
		o.Batch = 512
	}
	o.Batch = min(o.Batch, o.Context)
	m := &Model{Layers: make([]Layer, c.NLayer), best: make([]int32, 1), pos: make([]int32, o.Batch)}
	refs := m.tensorMap(c)

	var total, done int64
	datas := make([]model.TensorData, len(refs))
	for i, r := range refs {
		if !src.Has(r.name) {
			if r.optional {
				continue
			}
			return nil, fmt.Errorf("layers: tensor %q: missing", r.name)
		}
		td, err := src.Tensor(r.name)
		if err != nil {
			return nil, fmt.Errorf("layers: %w", err)
		}
		if !slices.Equal(td.Shape, r.shape) {
			return nil, fmt.Errorf("layers: tensor %q: shape %v, want %v", r.name, td.Shape, r.shape)
		}
		datas[i] = td
		total += int64(len(td.Data))
	}
	for i, r := range refs {
		td := datas[i]
		if td.Data == nil {
			continue
		}
		t, err := b.Weight(td.Name, td.Type, td.Shape, td.Data)
		if err != nil {
			m.free(b)
			return nil, fmt.Errorf("layers: tensor %q: %w", r.name, err)
		}
		*r.dst = t
		m.weights = append(m.weights, t)
		if pr, ok := src.(model.PageReleaser); ok {
			pr.ReleasePages(td.Name) // the backend holds what it needs
		}
		done += int64(len(td.Data))
		if o.Progress != nil {
			o.Progress(done, total)
		}
	}
	if m.Output == nil {
		m.Output = m.TokEmbd
	}

	ws, err := workspace.New(b, c, o.Batch)
	if err != nil {
		m.free(b)
		return nil, err
	}
	kv, err := kvcache.New(b, c.NLayer, o.Context, o.Batch, c.NHeadKV, c.HeadDim, o.CacheK, o.CacheV)
	if err != nil {
		ws.Free(b)
		m.free(b)
		return nil, err
	}
	m.s = State{
		B: b, C: c, WS: ws, KV: kv,
		Rope: backend.Rope{Dims: c.RopeDims, Theta: c.RopeTheta, Freqs: m.RopeFreqs, NeoX: c.RopeNeoX},
	}
	if err := b.Sync(); err != nil {
		m.Close()
		return nil, fmt.Errorf("layers: load: %w", err)
	}
	return m, nil
}

func (m *Model) free(b backend.Backend) {
	for _, t := range m.weights {
		b.Free(t)
	}
	m.weights = nil
}

// Config returns the model's hyper-parameters.
func (m *Model) Config() model.Config { return m.s.C }

// Backend returns the backend the model runs on.
func (m *Model) Backend() backend.Backend { return m.s.B }

func (m *Model) Vocab() int   { return m.s.C.Vocab }
func (m *Model) Context() int { return m.s.KV.MaxSeq }
func (m *Model) Pos() int     { return m.s.KV.Len() }
func (m *Model) Reset()       { m.s.KV.Reset() }

// ErrContext is wrapped by Eval when the tokens do not fit in the cache.
var ErrContext = errors.New("context size exceeded")

// Eval runs tokens through the model: the embedding, every layer (in
// batches of up to the workspace's size, at the positions that follow the
// cache's), then the final norm and LM head for the last token only.
func (m *Model) Eval(tokens []int32) error {
	s, b, c := &m.s, m.s.B, &m.s.C
	if len(tokens) == 0 {
		return errors.New("layers: Eval of no tokens")
	}
	if p := s.KV.Len(); p+len(tokens) > s.KV.MaxSeq {
		return fmt.Errorf("layers: %d tokens after %d in the cache: %w (%d)", len(tokens), p, ErrContext, s.KV.MaxSeq)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= c.Vocab {
			return fmt.Errorf("layers: token id %d out of range [0, %d)", id, c.Vocab)
		}
	}
	n := 0
	for start := 0; start < len(tokens); start += n {
		n = min(s.WS.Batch, len(tokens)-start)
		if err := b.WriteI32(s.WS.IDs, 0, tokens[start:start+n]); err != nil {
			return err
		}
		for i := range n {
			m.pos[i] = int32(s.KV.Len() + i)
		}
		if err := b.WriteI32(s.WS.Pos, 0, m.pos[:n]); err != nil {
			return err
		}
		if err := s.KV.Begin(b, n); err != nil {
			return fmt.Errorf("layers: %w", err)
		}
		b.Embedding(s.WS.X, m.TokEmbd, s.WS.IDs, n)
		for il := range m.Layers {
			m.Layers[il].Forward(s, il, n)
		}
		if err := s.KV.Advance(n); err != nil {
			return err
		}
	}
	// logits = RMSNorm(x_last)·g_out · W_outᵀ
	b.CopySlice(s.WS.Last, 0, s.WS.X, (n-1)*c.NEmbd, c.NEmbd)
	b.RMSNorm(s.WS.XNorm, s.WS.Last, m.OutputNorm, 1, c.RMSEps)
	b.MatMulTransposed(s.WS.Logits, s.WS.XNorm, m.Output, 1)
	return b.Err()
}

// Logits copies the last token's logits to dst.
func (m *Model) Logits(dst []float32) error {
	if len(dst) != m.s.C.Vocab {
		return fmt.Errorf("layers: Logits into %d floats, vocab is %d", len(dst), m.s.C.Vocab)
	}
	return m.s.B.ReadF32(m.s.WS.Logits, 0, dst)
}

// Argmax finds the largest logit on the backend; only its index comes back.
func (m *Model) Argmax() (int32, error) {
	m.s.B.Argmax(m.s.WS.Best, m.s.WS.Logits, 1)
	if err := m.s.B.ReadI32(m.s.WS.Best, 0, m.best); err != nil {
		return 0, err
	}
	return m.best[0], nil
}

// Close frees everything the model allocated on its backend (the backend
// itself belongs to the caller).
func (m *Model) Close() error {
	b := m.s.B
	if m.s.WS != nil {
		m.s.WS.Free(b)
	}
	if m.s.KV != nil {
		m.s.KV.Free(b)
	}
	if b != nil {
		m.free(b)
	}
	return nil
}
