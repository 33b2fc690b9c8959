package layers_test

import (
	"testing"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/layers"
)

// stream drives one sequence of a model directly, as llama_batch_get_one
// does: each eval feeds tokens at the positions after the last ones, with
// the last token's logits wanted.
type stream struct {
	m        *layers.Model
	seq, pos int
}

func (s *stream) eval(tokens []int32) error {
	if err := s.m.Decode(engine.Batch(s.seq, s.pos, tokens)); err != nil {
		return err
	}
	s.pos += len(tokens)
	return nil
}

func (s *stream) logits(t testing.TB) []float32 {
	t.Helper()
	out := make([]float32, s.m.Vocab())
	if err := s.m.Logits(0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *stream) argmax(t testing.TB) int32 {
	t.Helper()
	best := make([]int32, 1)
	if err := s.m.Argmax(best); err != nil {
		t.Fatal(err)
	}
	return best[0]
}

// greedy feeds prompt after what the stream holds and generates n tokens
// greedily (the device's argmax); the last one is not fed.
func greedy(t testing.TB, s *stream, prompt []int32, n int) []int32 {
	t.Helper()
	var out []int32
	for batch := prompt; len(out) < n; {
		if err := s.eval(batch); err != nil {
			t.Fatal(err)
		}
		id := s.argmax(t)
		out = append(out, id)
		batch = []int32{id}
	}
	return out
}
