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
// final norm and LM head, with its workspace and a KV cache of many
// sequences. It implements engine.Model.
type Model struct {
	// Each weight's tag is its GGUF name, as Layer's are.
	TokEmbd    backend.Tensor `gguf:"token_embd.weight"`  // [vocab, embd]
	OutputNorm backend.Tensor `gguf:"output_norm.weight"` // [embd]
	Output     backend.Tensor `gguf:"output.weight"`      // [vocab, embd]; TokEmbd when tied
	// RopeFreqs divides the RoPE frequencies: Llama 3's rope_freqs, or
	// Phi-3's LongRoPE factors (short, or long when the context exceeds
	// the original); [ropeDims/2] or nil.
	RopeFreqs   backend.Tensor `gguf:"rope_freqs.weight"`
	PosEmbd     backend.Tensor `gguf:"position_embd.weight"` // [context, embd] learned positions (GPT-2) or nil
	OutputNormB backend.Tensor `gguf:"output_norm.bias"`     // [embd] LayerNorm bias (GPT-2) or nil
	Layers      []Layer

	s       State
	weights []backend.Tensor
	// fingerprint names the weights in the KV states the model writes.
	fingerprint uint64
	// ids, pos and seq stage a part of a batch, and best the argmaxes;
	// they are their own allocations: device backends hand them to C, and
	// cgo forbids passing memory inside a struct that holds Go pointers.
	ids, pos, seq []int32
	// seqs holds a whole batch's sequences, for the room check; it grows
	// with the longest batch seen.
	seqs []int32
	// outputs is the number of outputs of the last Decode.
	outputs int
}

var (
	_ engine.Model    = (*Model)(nil)
	_ engine.Verifier = (*Model)(nil)
	_ engine.Embedder = (*Model)(nil)
)

// Options sizes the runtime buffers.
type Options struct {
	// Context is the number of KV-cache cells (≤ 0: the model's trained
	// context), llama.cpp's n_ctx: every sequence's in a unified cache,
	// Context/Seqs each in a per-stream one.
	Context int
	// Batch is the most tokens run through a layer at once (llama.cpp's
	// n_ubatch); longer batches run in parts (≤ 0: 512).
	Batch int
	// Seqs is the number of sequences the cache holds (≤ 0: 1), Layout how
	// they share it.
	Seqs   int
	Layout kvcache.Layout
	// MaxOutputs is the most tokens of one Decode whose logits are computed
	// (≤ 0: max(Seqs, 8); at most Batch).
	MaxOutputs int
	// CacheK and CacheV are the KV-cache element types (kvcache.Types; the
	// zero value is F32); glint.Open defaults to F16, as llama.cpp does.
	CacheK, CacheV dtype.Type
	// Flash runs attention as flash attention (backend.Attn.Flash), which
	// caches other than F32 and F16 need (kvcache.Flash decides it).
	Flash bool
	// MaxCacheBytes, when > 0, is the memory the KV cache may take; a larger
	// one is an error naming both figures (kvcache.Options.MaxBytes).
	MaxCacheBytes int64
	// Progress, when set, is told the weight bytes loaded so far.
	Progress func(done, total int64)
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
	o.Seqs = max(o.Seqs, 1)
	if o.MaxOutputs <= 0 {
		o.MaxOutputs = max(o.Seqs, 8)
	}
	o.MaxOutputs = min(o.MaxOutputs, o.Batch)
	kvo := kvcache.Options{Layers: c.NLayer, KVHeads: c.NHeadKV, HeadDim: c.HeadDim,
		Cells: o.Context, Batch: o.Batch, K: o.CacheK, V: o.CacheV, Seqs: o.Seqs, Layout: o.Layout, MaxBytes: o.MaxCacheBytes}
	// The cache's types and size are checked before any weight loads.
	if _, err := kvcache.Size(kvo); err != nil {
		return nil, fmt.Errorf("layers: %w", err)
	}
	if !o.Flash {
		if _, err := kvcache.Flash("off", o.CacheK, o.CacheV); err != nil {
			return nil, fmt.Errorf("layers: %w", err)
		}
	}
	m := &Model{Layers: make([]Layer, c.NLayer),
		ids: make([]int32, o.Batch), pos: make([]int32, o.Batch), seq: make([]int32, o.Batch)}
	refs := c.Weights(o.Context)
	fp := newFingerprint(c)

	var total, done int64
	datas := make([]model.TensorData, len(refs))
	dsts := make([]*backend.Tensor, len(refs))
	for i, r := range refs {
		dst, err := m.field(r)
		if err != nil {
			return nil, err
		}
		dsts[i] = dst
		if !src.Has(r.Name) {
			if !r.Required {
				continue
			}
			return nil, fmt.Errorf("layers: tensor %q: missing", r.Name)
		}
		td, err := src.Tensor(r.Name)
		if err != nil {
			return nil, fmt.Errorf("layers: %w", err)
		}
		if !slices.Equal(td.Shape, r.Shape) {
			return nil, fmt.Errorf("layers: tensor %q: shape %v, want %v", r.Name, td.Shape, r.Shape)
		}
		datas[i] = td
		total += int64(len(td.Data))
		fp.tensor(td)
	}
	m.fingerprint = fp.sum()
	for i, r := range refs {
		td := datas[i]
		if td.Data == nil {
			continue
		}
		t, err := b.Weight(td.Name, td.Type, td.Shape, td.Data)
		if err != nil {
			m.free(b)
			return nil, fmt.Errorf("layers: tensor %q: %w", r.Name, err)
		}
		*dsts[i] = t
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

	ws, err := workspace.New(b, c, o.Batch, o.MaxOutputs)
	if err != nil {
		m.free(b)
		return nil, err
	}
	kv, err := kvcache.New(b, kvo)
	if err != nil {
		ws.Free(b)
		m.free(b)
		return nil, fmt.Errorf("layers: %w", err)
	}
	m.s = State{B: b, C: c, WS: ws, KV: kv, Flash: o.Flash}
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

// keepOutputs moves the rows of part that want logits to the front of the
// residual stream ws.X and the attention's output ws.Out, in order, and
// returns how many there are.
func (s *State) keepOutputs(part []engine.Item) int {
	k := 0
	for i := 0; i < len(part); {
		if !part[i].Output {
			i++
			continue
		}
		e := i + 1
		for e < len(part) && part[e].Output {
			e++
		}
		s.moveRows(k, i, e-i)
		k += e - i
		i = e
	}
	return k
}

// moveRows moves rows from…from+count-1 of ws.X and ws.Out to row to ≤
// from, in pieces no longer than the shift, so that no copy overlaps its
// source.
func (s *State) moveRows(to, from, count int) {
	d := s.C.NEmbd
	for c, step := 0, from-to; step > 0 && c < count; c += step {
		r := min(step, count-c)
		s.B.CopySlice(s.WS.X, (to+c)*d, s.WS.X, (from+c)*d, r*d)
		s.B.CopySlice(s.WS.Out, (to+c)*d, s.WS.Out, (from+c)*d, r*d)
	}
}

// Config returns the model's hyper-parameters.
func (m *Model) Config() model.Config { return m.s.C }

// Backend returns the backend the model runs on.
func (m *Model) Backend() backend.Backend { return m.s.B }

// Cache is the model's KV cache (for its layout and size).
func (m *Model) Cache() *kvcache.Cache { return m.s.KV }

func (m *Model) Vocab() int      { return m.s.C.Vocab }
func (m *Model) Context() int    { return m.s.KV.Context() }
func (m *Model) Seqs() int       { return m.s.KV.Seqs }
func (m *Model) MaxOutputs() int { return m.s.WS.Outputs }

// Decode implements engine.Model: the embedding and every layer over parts
// of up to the workspace's batch, whose rows attend through the view the
// cache builds for them; the final hidden states of the tokens that want
// logits are gathered as each part ends, then normalised and projected by
// the LM head together. A K-shift that SeqShift left pending is applied
// first.
func (m *Model) Decode(batch []engine.Item) error { return m.decode(batch, nil) }

// Embd implements engine.Embedder: the width of a hidden state.
func (m *Model) Embd() int { return m.s.C.NEmbd }

// DecodeEmbeddings implements engine.Embedder: Decode's pass, with the
// output rows normalised by the output norm part by part and read into dst
// instead of projected by the LM head, so that any number of tokens of a
// batch may be outputs (the workspace holds a part's rows).
func (m *Model) DecodeEmbeddings(batch []engine.Item, dst []float32) error {
	m.outputs = 0
	n := 0
	for _, it := range batch {
		if it.Output {
			n++
		}
	}
	if len(dst) != n*m.s.C.NEmbd {
		return fmt.Errorf("layers: DecodeEmbeddings of %d outputs into %d floats, want %d", n, len(dst), n*m.s.C.NEmbd)
	}
	if n == 0 {
		return errors.New("layers: DecodeEmbeddings of no outputs")
	}
	return m.decode(batch, dst)
}

// decode is Decode, or with hidden set DecodeEmbeddings.
func (m *Model) decode(batch []engine.Item, hidden []float32) error {
	s, b, c := &m.s, m.s.B, &m.s.C
	m.outputs = 0
	if len(batch) == 0 {
		return errors.New("layers: Decode of no tokens")
	}
	outputs := 0
	if cap(m.seqs) < len(batch) {
		m.seqs = make([]int32, len(batch))
	}
	seqs := m.seqs[:len(batch)]
	for i, it := range batch {
		if it.Token < 0 || int(it.Token) >= c.Vocab {
			return fmt.Errorf("layers: token %d: id %d out of range [0, %d)", i, it.Token, c.Vocab)
		}
		if it.Seq < 0 || it.Seq >= s.KV.Seqs {
			return fmt.Errorf("layers: token %d: sequence %d outside 0…%d", i, it.Seq, s.KV.Seqs-1)
		}
		if it.Pos < 0 {
			return fmt.Errorf("layers: token %d: position %d < 0", i, it.Pos)
		}
		if it.Output {
			outputs++
		}
		seqs[i] = int32(it.Seq)
	}
	if hidden == nil && outputs > s.WS.Outputs {
		return fmt.Errorf("layers: %d outputs in one batch, at most %d", outputs, s.WS.Outputs)
	}
	// All or nothing: a batch that does not fit is refused before any part
	// of it is stored.
	if err := s.KV.Room(seqs); err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	if err := m.kShift(); err != nil {
		return err
	}
	out := 0
	for start := 0; start < len(batch); {
		part := batch[start:min(start+s.WS.Batch, len(batch))]
		n := len(part)
		for i, it := range part {
			m.ids[i], m.pos[i], m.seq[i] = it.Token, it.Pos, int32(it.Seq)
		}
		if err := b.WriteI32(s.WS.IDs, 0, m.ids[:n]); err != nil {
			return err
		}
		if err := b.WriteI32(s.WS.Pos, 0, m.pos[:n]); err != nil {
			return err
		}
		if err := s.KV.Begin(b, m.pos[:n], m.seq[:n]); err != nil {
			return fmt.Errorf("layers: %w", err)
		}
		m.embed(n)
		last := len(m.Layers) - 1
		for il := range m.Layers[:last] {
			m.Layers[il].Forward(s, il, n)
		}
		// The last layer's feed-forward runs on the rows that give logits
		// only, as llama.cpp's does (inp_out_ids): the others' would be
		// wasted, and a matmul of fewer rows sums in another order (one
		// row: vec_dot's, not tinyBLAS's), which llama.cpp's logits carry.
		m.Layers[last].attention(s, last, n)
		k := s.keepOutputs(part)
		if k > 0 {
			m.Layers[last].feedForward(s, k)
			if hidden != nil {
				// The norm is per row: these are the rows Decode would
				// project, to the bit.
				s.norm(s.WS.XNorm, s.WS.X, m.OutputNorm, m.OutputNormB, k)
				if err := b.ReadF32(s.WS.XNorm, 0, hidden[out*c.NEmbd:(out+k)*c.NEmbd]); err != nil {
					return err
				}
			} else {
				b.CopySlice(s.WS.Hidden, out*c.NEmbd, s.WS.X, 0, k*c.NEmbd)
			}
			out += k
		}
		start += n
	}
	if out > 0 && hidden == nil {
		// logits = norm(h)·g_out · W_outᵀ
		s.norm(s.WS.XNorm, s.WS.Hidden, m.OutputNorm, m.OutputNormB, out)
		s.matMul(s.WS.Logits, s.WS.XNorm, m.Output, out)
		// Gemma 2: logits = c·tanh(logits/c)
		if c.FinalSoftCap > 0 {
			b.SoftCap(s.WS.Logits, out, c.FinalSoftCap)
		}
	}
	if err := b.Err(); err != nil {
		return err
	}
	if hidden == nil {
		m.outputs = out
	}
	return nil
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

// Logits copies output i's logits to dst.
func (m *Model) Logits(i int, dst []float32) error {
	if i < 0 || i >= m.outputs {
		return fmt.Errorf("layers: Logits of output %d: the last Decode has %d", i, m.outputs)
	}
	if len(dst) != m.s.C.Vocab {
		return fmt.Errorf("layers: Logits into %d floats, vocab is %d", len(dst), m.s.C.Vocab)
	}
	return m.s.B.ReadF32(m.s.WS.Logits, i*m.s.C.Vocab, dst)
}

// Argmax finds the largest logit of each output on the backend; only the
// indices come back.
func (m *Model) Argmax(dst []int32) error {
	if len(dst) > m.outputs {
		return fmt.Errorf("layers: Argmax of %d outputs: the last Decode has %d", len(dst), m.outputs)
	}
	if len(dst) == 0 {
		return nil
	}
	m.s.B.Argmax(m.s.WS.Best, m.s.WS.Logits, len(dst))
	return m.s.B.ReadI32(m.s.WS.Best, 0, dst)
}

// The sequence operations are the cache's (kvcache.Cache).

func (m *Model) SeqRemove(seq, p0, p1 int) error { return m.s.KV.SeqRemove(seq, p0, p1) }
func (m *Model) SeqKeep(seq int) error           { return m.s.KV.SeqKeep(seq) }
func (m *Model) SeqPosMax(seq int) int           { return m.s.KV.SeqPosMax(seq) }
func (m *Model) SeqCopy(src, dst, p0, p1 int) error {
	return m.seqErr(m.s.KV.SeqCopy(m.s.B, src, dst, p0, p1))
}
func (m *Model) SeqShift(seq, p0, p1, delta int) error {
	return m.seqErr(m.s.KV.SeqShift(m.s.B, seq, p0, p1, delta))
}

// seqErr adds the backend's error to an operation that queued copies.
func (m *Model) seqErr(err error) error {
	if err != nil {
		return err
	}
	return m.s.B.Err()
}

// SeqState returns sequence seq's cells (after any pending K-shift) under
// the model's fingerprint.
func (m *Model) SeqState(seq int) ([]byte, error) {
	if err := m.kShift(); err != nil {
		return nil, err
	}
	return m.s.KV.State(m.s.B, seq, m.fingerprint)
}

// SeqLoadState loads a state SeqState made on a model of the same weights.
func (m *Model) SeqLoadState(seq int, state []byte) error {
	return m.s.KV.LoadState(m.s.B, seq, state, m.fingerprint, m.s.WS.K)
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

// kShift applies a K-shift SeqShift left pending, with each layer's RoPE
// (none for a model without RoPE: its positions only move).
func (m *Model) kShift() error {
	ropes := m.s.Ropes
	if m.s.C.NoRoPE {
		ropes = nil
	}
	if err := m.s.KV.Shift(m.s.B, ropes, m.s.WS.K, m.s.WS.Pos); err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	return nil
}

// Verify implements engine.Verifier: Decode with every row in a decode
// step's arithmetic (State.Decode), for speculative verification.
func (m *Model) Verify(batch []engine.Item) error {
	m.s.Decode = true
	defer func() { m.s.Decode = false }()
	return m.decode(batch, nil)
}
