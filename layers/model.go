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

// Model is a decoder model on a backend: token embedding, decoder layers,
// final norm and LM head, with its workspace and KV cache. It implements
// engine.Model.
type Model struct {
	TokEmbd    backend.Tensor // [vocab, embd]
	OutputNorm backend.Tensor // [embd]
	Output     backend.Tensor // [vocab, embd]; TokEmbd when tied
	// RopeFreqs divides the RoPE frequencies: Llama 3's rope_freqs, or
	// Phi-3's LongRoPE factors (short, or long when the context exceeds
	// the original); [ropeDims/2] or nil.
	RopeFreqs   backend.Tensor
	PosEmbd     backend.Tensor // [context, embd] learned positions (GPT-2) or nil
	OutputNormB backend.Tensor // [embd] LayerNorm bias (GPT-2) or nil
	Layers      []Layer

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

// tensorMap is the one place where GGUF tensor names meet the model's
// fields, for every architecture: what an architecture lacks is optional
// (and then absent from its files; model.Config.TensorShapes lists what a
// file holds). Fused matrices are read as their parts (model.Unfused).
// ctx is the KV-cache length, which picks Phi-3's LongRoPE factors as
// llama.cpp does.
func (m *Model) tensorMap(c model.Config, ctx int) []weightRef {
	e, q, kv, ff := c.NEmbd, c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim, c.NFF
	freqs, hasFreqs := "rope_freqs.weight", c.HasRopeFreqs
	if c.HasRopeFactors {
		freqs, hasFreqs = "rope_factors_short.weight", true
		if ctx > c.RopeOrigContext {
			freqs = "rope_factors_long.weight"
		}
	}
	refs := []weightRef{
		{&m.TokEmbd, "token_embd.weight", []int{c.Vocab, e}, false},
		{&m.PosEmbd, "position_embd.weight", []int{c.Context, e}, !c.NoRoPE},
		{&m.OutputNorm, "output_norm.weight", []int{e}, false},
		{&m.OutputNormB, "output_norm.bias", []int{e}, !c.LayerNorm},
		{&m.Output, "output.weight", []int{c.Vocab, e}, c.TiedEmbeddings},
		{&m.RopeFreqs, freqs, []int{c.RopeDims / 2}, !hasFreqs},
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		refs = append(refs,
			weightRef{&l.AttnNorm, p + "attn_norm.weight", []int{e}, false},
			weightRef{&l.AttnNormB, p + "attn_norm.bias", []int{e}, !c.LayerNorm},
			weightRef{&l.Wq, p + "attn_q.weight", []int{q, e}, false},
			weightRef{&l.Wk, p + "attn_k.weight", []int{kv, e}, false},
			weightRef{&l.Wv, p + "attn_v.weight", []int{kv, e}, false},
			weightRef{&l.Bq, p + "attn_q.bias", []int{q}, !c.AttnBias},
			weightRef{&l.Bk, p + "attn_k.bias", []int{kv}, !c.AttnBias},
			weightRef{&l.Bv, p + "attn_v.bias", []int{kv}, !c.AttnBias},
			weightRef{&l.QNorm, p + "attn_q_norm.weight", []int{c.HeadDim}, !c.QKNorm},
			weightRef{&l.KNorm, p + "attn_k_norm.weight", []int{c.HeadDim}, !c.QKNorm},
			weightRef{&l.Wo, p + "attn_output.weight", []int{e, q}, false},
			weightRef{&l.Bo, p + "attn_output.bias", []int{e}, !c.OutBias},
			weightRef{&l.AttnPostNorm, p + "post_attention_norm.weight", []int{e}, !c.PostNorms},
			weightRef{&l.FFNNorm, p + "ffn_norm.weight", []int{e}, false},
			weightRef{&l.FFNNormB, p + "ffn_norm.bias", []int{e}, !c.LayerNorm},
			weightRef{&l.WGate, p + "ffn_gate.weight", []int{ff, e}, c.NoGate},
			weightRef{&l.WUp, p + "ffn_up.weight", []int{ff, e}, false},
			weightRef{&l.BUp, p + "ffn_up.bias", []int{ff}, !c.OutBias},
			weightRef{&l.WDown, p + "ffn_down.weight", []int{e, ff}, false},
			weightRef{&l.BDown, p + "ffn_down.bias", []int{e}, !c.OutBias},
			weightRef{&l.FFNPostNorm, p + "post_ffw_norm.weight", []int{e}, !c.PostNorms},
		)
	}
	return refs
}

// Load places the weights of src on backend b and allocates the workspace
// and KV cache.
func Load(b backend.Backend, c model.Config, src model.Source, o Options) (*Model, error) {
	if c.RopeDims == 0 && !c.NoRoPE {
		c.RopeDims = c.HeadDim
	}
	if err := model.CheckArch(c.Arch); err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	if c.NHead <= 0 || c.NHeadKV <= 0 || c.NHead%c.NHeadKV != 0 {
		return nil, fmt.Errorf("layers: %d heads do not divide into %d KV heads", c.NHead, c.NHeadKV)
	}
	src = model.Unfused(src, c)
	if o.Context <= 0 || c.NoRoPE && o.Context > c.Context {
		// GPT-2 has a position embedding for its trained context only.
		o.Context = c.Context
	}
	if o.Batch <= 0 {
		o.Batch = 512
	}
	o.Batch = min(o.Batch, o.Context)
	m := &Model{Layers: make([]Layer, c.NLayer), best: make([]int32, 1), pos: make([]int32, o.Batch)}
	refs := m.tensorMap(c, o.Context)

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
	m.s = State{B: b, C: c, WS: ws, KV: kv}
	for il := range c.NLayer {
		m.s.Ropes = append(m.s.Ropes, backend.Rope{Dims: c.RopeDims, Theta: c.LayerRopeTheta(il), Freqs: m.RopeFreqs, NeoX: c.RopeNeoX,
			FreqScale: c.LayerRopeFreqScale(il), AttnFactor: c.RopeAttnFactor})
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
		m.embed(n)
		for il := range m.Layers {
			m.Layers[il].Forward(s, il, n)
		}
		if err := s.KV.Advance(n); err != nil {
			return err
		}
	}
	// logits = RMSNorm(x_last)·g_out · W_outᵀ
	b.CopySlice(s.WS.Last, 0, s.WS.X, (n-1)*c.NEmbd, c.NEmbd)
	s.norm(s.WS.XNorm, s.WS.Last, m.OutputNorm, m.OutputNormB, 1)
	b.MatMulTransposed(s.WS.Logits, s.WS.XNorm, m.Output, 1)
	// Gemma 2: logits = c·tanh(logits/c)
	if c.FinalSoftCap > 0 {
		b.SoftCap(s.WS.Logits, 1, c.FinalSoftCap)
	}
	return b.Err()
}

// embed puts the embeddings of the n ids in ws.IDs, at the positions in
// ws.Pos, into the residual stream ws.X: x = E[id] (· √embd for Gemma;
// + P[pos] for GPT-2's learned positions).
func (m *Model) embed(n int) {
	s, b := &m.s, m.s.B
	b.Embedding(s.WS.X, m.TokEmbd, s.WS.IDs, n)
	if s.C.EmbedScale > 0 {
		b.Scale(s.WS.X, s.WS.X, n, s.C.EmbedScale)
	}
	if m.PosEmbd != nil {
		b.Embedding(s.WS.Out, m.PosEmbd, s.WS.Pos, n)
		b.Add(s.WS.X, s.WS.X, s.WS.Out, n)
	}
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
