package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/glint-llm/glint/engine"
)

// counter is a model whose next token is a function of its position, so a
// test knows what the cache holds without any weights.
type counter struct{ pos, ctx, vocab int }

func (c *counter) Vocab() int   { return c.vocab }
func (c *counter) Context() int { return c.ctx }
func (c *counter) Pos() int     { return c.pos }
func (c *counter) Eval(tokens []int32) error {
	if c.pos+len(tokens) > c.ctx {
		return fmt.Errorf("counter: %d tokens past the context of %d", c.pos+len(tokens), c.ctx)
	}
	c.pos += len(tokens)
	return nil
}
func (c *counter) Logits(dst []float32) error {
	clear(dst)
	dst[c.pos%c.vocab] = 1
	return nil
}
func (c *counter) Argmax() (int32, error) { return int32(c.pos % c.vocab), nil }
func (c *counter) Reset()                 { c.pos = 0 }
func (c *counter) Close() error           { return nil }

// A full context ends the generation without an error and says so; a
// generation that ran out of -n does not claim it.
func TestContextFull(t *testing.T) {
	for _, tc := range []struct {
		ctx, prompt, n int
		full           bool
	}{{12, 4, 50, true}, {12, 4, 3, false}, {12, 12, 5, true}, {12, 4, 9, false}} {
		m := &counter{ctx: tc.ctx, vocab: 100}
		tm, err := engine.Generate(m, make([]int32, tc.prompt), engine.Options{MaxTokens: tc.n})
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if tm.ContextFull != tc.full {
			t.Errorf("%+v: ContextFull = %v", tc, tm.ContextFull)
		}
		// Every position is used: the cache holds the prompt and all but
		// the last generated token, which had no room.
		if tc.full && (m.pos != tc.ctx || tc.prompt+len(tm.Generated)-1 != tc.ctx) {
			t.Errorf("%+v: %d tokens generated, cache at %d", tc, len(tm.Generated), m.pos)
		}
	}
}

// ErrStop from OnToken is a normal end: no error, the tokens so far kept.
func TestErrStop(t *testing.T) {
	m := &counter{ctx: 64, vocab: 100}
	n := 0
	tm, err := engine.Generate(m, []int32{1, 2}, engine.Options{MaxTokens: 10, OnToken: func(int32) error {
		if n++; n == 3 {
			return fmt.Errorf("client: %w", engine.ErrStop)
		}
		return nil
	}})
	if err != nil || len(tm.Generated) != 3 {
		t.Fatalf("got %d tokens, err %v; want 3, nil", len(tm.Generated), err)
	}
	wantErr := errors.New("disk full")
	_, err = engine.Generate(&counter{ctx: 64, vocab: 100}, []int32{1}, engine.Options{MaxTokens: 10, OnToken: func(int32) error { return wantErr }})
	if !errors.Is(err, wantErr) {
		t.Fatalf("other OnToken errors must come back: got %v", err)
	}
}

// StopStrings against the naive answer: the whole text cut at the first
// occurrence of any stop string, however the text is split into pieces,
// with nothing of a stop string ever released.
func TestStopStrings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab <|>\né")
	stopsets := [][]string{{"ab"}, {"<|im_end|>", "\n\n"}, {"a", "b a"}, {"é<"}, {"aaa", "aab"}, {}}
	for iter := 0; iter < 3000; iter++ {
		stops := stopsets[iter%len(stopsets)]
		var sb strings.Builder
		for range rng.IntN(20) {
			sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(3) == 0 && len(stops) > 0 {
			sb.WriteString(stops[rng.IntN(len(stops))])
			sb.WriteString("tail")
		}
		full := sb.String()
		want, wantStop := full, false
		for _, x := range stops {
			if i := strings.Index(full, x); i >= 0 && i <= len(want) {
				want, wantStop = full[:i], true
			}
		}
		s := engine.NewStopStrings(stops)
		var got strings.Builder
		stopped := false
		for rest := full; rest != "" && !stopped; {
			k := 1 + rng.IntN(min(4, len(rest)))
			out, st := s.Add(rest[:k])
			rest = rest[k:]
			got.WriteString(out)
			stopped = st
			if !strings.HasPrefix(want, got.String()) {
				t.Fatalf("stops %q, text %q: released %q, beyond %q", stops, full, got.String(), want)
			}
		}
		if !stopped {
			got.WriteString(s.Flush())
		}
		if got.String() != want || stopped != wantStop {
			t.Fatalf("stops %q, text %q: got %q (stopped %v), want %q (%v)", stops, full, got.String(), stopped, want, wantStop)
		}
	}
	// Only what could still become a stop string is held back.
	s := engine.NewStopStrings([]string{"World"})
	if out, _ := s.Add("Hello Wor"); out != "Hello " {
		t.Fatalf("Add(\"Hello Wor\") = %q, want \"Hello \"", out)
	}
	if out, _ := s.Add("ms"); out != "Worms" {
		t.Fatalf("Add(\"ms\") = %q, want \"Worms\"", out)
	}
}
