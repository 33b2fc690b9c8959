package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/glint-llm/glint/engine"
)

// counter is a model without weights whose next token is the position after
// the last one fed, so a test knows what the cache holds: per sequence, the
// token at each position (the naive KV cache).
type counter struct {
	ctx, vocab, seqs int
	cells            []map[int32]int32 // per sequence: position → token
	outs             []int32           // the positions of the last Decode's outputs
	decodes          int
}

func newCounter(ctx, vocab, seqs int) *counter {
	c := &counter{ctx: ctx, vocab: vocab, seqs: seqs}
	for range seqs {
		c.cells = append(c.cells, map[int32]int32{})
	}
	return c
}

func (c *counter) Vocab() int      { return c.vocab }
func (c *counter) Context() int    { return c.ctx }
func (c *counter) Seqs() int       { return c.seqs }
func (c *counter) MaxOutputs() int { return 8 }
func (c *counter) Close() error    { return nil }
func (c *counter) Decode(batch []engine.Item) error {
	c.decodes++
	c.outs = c.outs[:0]
	for _, it := range batch {
		if _, dup := c.cells[it.Seq][it.Pos]; dup || len(c.cells[it.Seq]) >= c.ctx {
			return fmt.Errorf("counter: sequence %d position %d taken, or the context of %d full", it.Seq, it.Pos, c.ctx)
		}
		c.cells[it.Seq][it.Pos] = it.Token
		if it.Output {
			c.outs = append(c.outs, it.Pos)
		}
	}
	return nil
}
func (c *counter) Logits(i int, dst []float32) error {
	clear(dst)
	dst[int(c.outs[i]+1)%c.vocab] = 1
	return nil
}
func (c *counter) Argmax(dst []int32) error {
	for i := range dst {
		dst[i] = (c.outs[i] + 1) % int32(c.vocab)
	}
	return nil
}
func (c *counter) SeqRemove(seq, p0, p1 int) error {
	for p := range c.cells[seq] {
		if int(p) >= p0 && (p1 < 0 || int(p) < p1) {
			delete(c.cells[seq], p)
		}
	}
	return nil
}
func (c *counter) SeqShift(seq, p0, p1, delta int) error {
	moved := map[int32]int32{}
	for p, t := range c.cells[seq] {
		if int(p) >= p0 && (p1 < 0 || int(p) < p1) {
			delete(c.cells[seq], p)
			moved[p+int32(delta)] = t
		}
	}
	for p, t := range moved {
		if _, dup := c.cells[seq][p]; dup {
			return fmt.Errorf("counter: shift onto position %d", p)
		}
		c.cells[seq][p] = t
	}
	return nil
}
func (c *counter) SeqPosMax(seq int) int {
	m := -1
	for p := range c.cells[seq] {
		m = max(m, int(p))
	}
	return m
}
func (c *counter) SeqCopy(src, dst, p0, p1 int) error {
	for p, t := range c.cells[src] {
		c.cells[dst][p] = t
	}
	return nil
}
func (c *counter) SeqKeep(int) error              { return nil }
func (c *counter) SeqState(int) ([]byte, error)   { return nil, engine.ErrUnsupported }
func (c *counter) SeqLoadState(int, []byte) error { return engine.ErrUnsupported }

// held returns sequence seq's tokens in position order, checking that the
// positions run 0, 1, … without a gap.
func (c *counter) held(t *testing.T, seq int) []int32 {
	t.Helper()
	out := make([]int32, len(c.cells[seq]))
	for p, tok := range c.cells[seq] {
		if int(p) >= len(out) {
			t.Fatalf("sequence %d: position %d among %d cells", seq, p, len(out))
		}
		out[p] = tok
	}
	return out
}

// A full context ends the generation without an error and says so; a
// generation that ran out of -n does not claim it.
func TestContextFull(t *testing.T) {
	for _, tc := range []struct {
		ctx, prompt, n int
		full           bool
	}{{12, 4, 50, true}, {12, 4, 3, false}, {12, 12, 5, true}, {12, 4, 9, false}} {
		m := newCounter(tc.ctx, 100, 1)
		e := newEngine(t, m)
		s := newSession(t, e, engine.SessionOptions{})
		tm, err := s.Generate(t.Context(), make([]int32, tc.prompt), engine.Options{MaxTokens: tc.n})
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if tm.ContextFull != tc.full {
			t.Errorf("%+v: ContextFull = %v", tc, tm.ContextFull)
		}
		// Every position is used: the cache holds the prompt and all but
		// the last generated token, which had no room.
		if n := len(m.cells[0]); tc.full && (n != tc.ctx || tc.prompt+len(tm.Generated)-1 != tc.ctx) {
			t.Errorf("%+v: %d tokens generated, cache at %d", tc, len(tm.Generated), n)
		}
	}
}

// llama-cli's context shift (examples/main/main.cpp), against its
// arithmetic done by hand: when the tokens held plus the next one reach
// the context, keep the first Keep, drop half of the rest and move the
// remainder down; the cache then holds exactly the session's tokens at
// positions 0…n-1, and generation goes on past the context.
func TestContextShift(t *testing.T) {
	for _, tc := range []struct{ ctx, keep, prompt, n int }{
		{16, 1, 4, 40}, {16, 5, 6, 60}, {32, 0, 3, 100}, {16, 20, 4, 30},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			m := newCounter(tc.ctx, 1000, 1)
			e := newEngine(t, m)
			s := newSession(t, e, engine.SessionOptions{ContextShift: true, Keep: tc.keep})
			prompt := make([]int32, tc.prompt)
			for i := range prompt {
				prompt[i] = int32(500 + i)
			}
			// The reference: llama-cli's loop over n_past.
			want, nPast, shifts := append([]int32{}, prompt...), tc.prompt, 0
			var gen []int32
			full := false
			for i := 0; i < tc.n; i++ {
				next := int32(nPast) % 1000 // the counter's choice: the position after
				gen = append(gen, next)
				if i == tc.n-1 {
					break
				}
				if nPast+1 >= tc.ctx {
					keep := min(tc.keep, nPast)
					discard := (nPast - keep) / 2
					// Nothing to discard: llama-cli decodes into the last
					// cell, and fails after it; glint stops there.
					if discard <= 0 && nPast+1 > tc.ctx {
						full = true
						break
					}
					if discard > 0 {
						want = append(want[:keep], want[keep+discard:]...)
						nPast -= discard
						shifts++
					}
				}
				want = append(want, next)
				nPast++
			}
			tm, err := s.Generate(t.Context(), prompt, engine.Options{MaxTokens: tc.n})
			if err != nil {
				t.Fatal(err)
			}
			if tm.ContextFull != full || tm.Shifts != shifts {
				t.Fatalf("ContextFull %v, %d shifts; want %v, %d", tm.ContextFull, tm.Shifts, full, shifts)
			}
			if fmt.Sprint(tm.Generated) != fmt.Sprint(gen[:len(tm.Generated)]) || !full && len(tm.Generated) != tc.n {
				t.Fatalf("generated %v\nwant      %v", tm.Generated, gen)
			}
			if got := m.held(t, 0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("cache holds %v\nwant        %v", got, want)
			}
		})
	}
}

// ErrStop from OnToken is a normal end: no error, the tokens so far kept.
func TestErrStop(t *testing.T) {
	e := newEngine(t, newCounter(64, 100, 1))
	n := 0
	tm, err := engine.Generate(t.Context(), e, []int32{1, 2}, engine.Options{MaxTokens: 10, OnToken: func(engine.Token) error {
		if n++; n == 3 {
			return fmt.Errorf("client: %w", engine.ErrStop)
		}
		return nil
	}})
	if err != nil || len(tm.Generated) != 3 {
		t.Fatalf("got %d tokens, err %v; want 3, nil", len(tm.Generated), err)
	}
	wantErr := errors.New("disk full")
	_, err = engine.Generate(t.Context(), e, []int32{1}, engine.Options{MaxTokens: 10, OnToken: func(engine.Token) error { return wantErr }})
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
