package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Embedder is a Model that can give the final hidden states of tokens
// (after the output norm, before the LM head), what llama.cpp's embeddings
// are made of.
type Embedder interface {
	// Embd is the width of a hidden state.
	Embd() int
	// DecodeEmbeddings runs batch as Decode does, but writes the normed
	// final hidden state of each token with Output set into dst (Embd
	// floats each, in batch order) instead of computing logits; any number
	// of tokens may be outputs. The logits of the last Decode are gone.
	DecodeEmbeddings(batch []Item, dst []float32) error
}

// Pooling is how the hidden states of a sequence's tokens become its
// embedding, as llama.cpp's llama_pooling_type.
type Pooling int

// The pooling types, numbered as llama.cpp's (and a GGUF's
// {arch}.pooling_type); PoolingRank is a classifier head's, which no model
// glint runs has.
const (
	PoolingUnspecified Pooling = -1
	PoolingNone        Pooling = 0 // one vector per token
	PoolingMean        Pooling = 1
	PoolingCLS         Pooling = 2 // the first token's
	PoolingLast        Pooling = 3 // the last token's
	PoolingRank        Pooling = 4
)

var poolingNames = map[Pooling]string{PoolingNone: "none", PoolingMean: "mean", PoolingCLS: "cls", PoolingLast: "last", PoolingRank: "rank"}

func (p Pooling) String() string {
	if s, ok := poolingNames[p]; ok {
		return s
	}
	return fmt.Sprintf("pooling(%d)", int(p))
}

// ParsePooling reads a pooling name as llama.cpp's --pooling takes it:
// none, mean, cls or last.
func ParsePooling(s string) (Pooling, error) {
	for p, n := range poolingNames {
		if n == s && p != PoolingRank {
			return p, nil
		}
	}
	return PoolingUnspecified, fmt.Errorf("pooling %q: want none, mean, cls or last", s)
}

// Embed runs tokens through the session's sequence from position 0 and
// returns their embedding pooled by p: one vector (mean over the tokens,
// the first's, or the last's), or with PoolingNone one per token. The
// vectors are not normalised (Normalize does that). The session then
// holds tokens, as after Prefill, less their logits: its cells are
// replaced, whatever it held before. The prompt runs in chunks of the
// engine's step size, each a Decode of its own between the scheduler's
// steps, so that other sessions go on between them.
func (s *Session) Embed(ctx context.Context, tokens []int32, p Pooling) ([][]float32, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	em, ok := s.e.m.(Embedder)
	if !ok {
		return nil, fmt.Errorf("engine: embeddings: %w", ErrUnsupported)
	}
	switch {
	case p < PoolingNone || p > PoolingLast:
		return nil, fmt.Errorf("engine: embeddings: pooling %v is not supported", p)
	case len(tokens) == 0:
		return nil, errors.New("engine: embeddings of no tokens")
	case len(tokens) > s.e.m.Context():
		return nil, fmt.Errorf("engine: embeddings of %d tokens: they do not fit the context of %d: %w", len(tokens), s.e.m.Context(), ErrContextFull)
	}
	for i, id := range tokens {
		if id < 0 || int(id) >= s.e.m.Vocab() {
			return nil, fmt.Errorf("engine: token %d: id %d outside the vocabulary of %d", i, id, s.e.m.Vocab())
		}
	}
	if err := s.Truncate(0); err != nil {
		return nil, err
	}
	d := em.Embd()
	// want reports whether the pooling reads token i's hidden state.
	want := func(i int) bool {
		switch p {
		case PoolingCLS:
			return i == 0
		case PoolingLast:
			return i == len(tokens)-1
		}
		return true
	}
	s.e.mu.Lock()
	chunk := s.e.stepTokens
	s.e.mu.Unlock()
	var out [][]float32
	sum := make([]float64, d)
	var batch []Item
	var rows []float32
	for start := 0; start < len(tokens); start += chunk {
		if err := ctx.Err(); err != nil {
			return nil, err // the chunks fed so far stay, as a prefix
		}
		part := tokens[start:min(start+chunk, len(tokens))]
		batch = batch[:0]
		n := 0
		for i, t := range part {
			o := want(start + i)
			batch = append(batch, Item{Token: t, Pos: int32(start + i), Seq: s.seq, Output: o})
			if o {
				n++
			}
		}
		rows = slices.Grow(rows[:0], n*d)[:n*d]
		err := s.e.withModel(func(m Model) error {
			if n == 0 {
				return m.Decode(batch) // a chunk that only fills the cache (cls, last)
			}
			return em.DecodeEmbeddings(batch, rows)
		})
		if err != nil {
			// A failed Decode leaves the cells in doubt.
			s.e.withModel(func(m Model) error { return m.SeqRemove(s.seq, -1, -1) })
			s.tokens = s.tokens[:0]
			return nil, fmt.Errorf("engine: embeddings: %w", err)
		}
		s.tokens = append(s.tokens, part...)
		for r := range n {
			row := rows[r*d : (r+1)*d]
			if p != PoolingMean {
				out = append(out, slices.Clone(row))
				continue
			}
			for k, v := range row {
				sum[k] += float64(v)
			}
		}
	}
	if p == PoolingMean {
		v := make([]float32, d)
		for k, x := range sum {
			v[k] = float32(x / float64(len(tokens)))
		}
		out = append(out, v)
	}
	return out, nil
}

// Normalize scales v in place to unit Euclidean length with llama.cpp's
// arithmetic (common_embd_normalize, embd_normalize 2: float squares summed
// in float64, one float scale); a zero vector stays zero.
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(float32(x * x))
	}
	if sum == 0 {
		return
	}
	scale := float32(1 / math.Sqrt(sum))
	for i, x := range v {
		v[i] = float32(x * scale)
	}
}
