package engine

import (
	"context"
	"errors"
	"time"
)

// Timing is what one generation measured. TTFT runs from the prompt going in
// to the first token being chosen, so it includes prefill; Gaps are the
// times between consecutive tokens after the first (TBT), so the first
// token is never in them.
type Timing struct {
	PromptTokens int
	Generated    []int32
	TTFT         time.Duration
	Gaps         []time.Duration
	// ContextFull: generation ended because the next token had no room in
	// the context (context shift off, or unable to make room).
	ContextFull bool
	// Shifts counts the context shifts made.
	Shifts int
	// SpecOff says why speculative decoding, asked for, did not run.
	SpecOff string
	// Passes counts the model's steps that chose generated tokens (one
	// per token without speculative decoding; the first token's is the
	// prompt's); Drafted and Accepted count the tokens drafts proposed
	// and the model took.
	Passes, Drafted, Accepted int
}

// AvgTBT is the mean of the gaps (0 with fewer than two tokens).
func (t Timing) AvgTBT() time.Duration {
	if len(t.Gaps) == 0 {
		return 0
	}
	var s time.Duration
	for _, g := range t.Gaps {
		s += g
	}
	return s / time.Duration(len(t.Gaps))
}

// Generate opens a session on e, feeds it prompt and generates up to
// o.MaxTokens tokens, then closes it.
func Generate(ctx context.Context, e *Engine, prompt []int32, o Options) (Timing, error) {
	s, err := e.NewSession(o.Session)
	if err != nil {
		return Timing{PromptTokens: len(prompt)}, err
	}
	defer s.Close()
	return s.Generate(ctx, prompt, o)
}

// Generate feeds prompt to the session (after what it holds), then runs a
// Generator to its end, handing o.OnToken each generated token and, as a
// Token of ID -1, text released after the last one. The session keeps
// every token chosen, so a later call continues where this one ended; the
// last one is fed with the next call's first step. o.Session is not used
// (the session's own options apply).
func (s *Session) Generate(ctx context.Context, prompt []int32, o Options) (Timing, error) {
	g, err := s.NewGenerator(o)
	if err != nil {
		return Timing{PromptTokens: len(prompt)}, err
	}
	if err := g.Start(ctx, prompt); err != nil {
		return g.Timing(), err
	}
	for {
		t, err := g.Next(ctx)
		if err != nil {
			return g.Timing(), err
		}
		if t.Finish == FinishEnd {
			t.ID = -1 // not generated: only its text, if any, goes out
		}
		if o.OnToken != nil && (t.ID >= 0 || t.Text != "") {
			if err := o.OnToken(t); err != nil {
				if errors.Is(err, ErrStop) {
					return g.Timing(), nil
				}
				return g.Timing(), err
			}
		}
		if t.Finish != Going {
			return g.Timing(), nil
		}
	}
}

// Forward is the past/present form of a session: it runs ids after past (a
// State, or nil for none) and returns the last token's logits and the
// state after them (present). Positions continue at past's length, so a
// sequence fed in chunks through Forward gives the logits of feeding it
// whole, and the cache's causal mask sees past and chunk alike.
func (e *Engine) Forward(ctx context.Context, past []byte, ids []int32) (logits []float32, present []byte, err error) {
	s, err := e.NewSession(SessionOptions{})
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	if past != nil {
		if err := s.LoadState(past); err != nil {
			return nil, nil, err
		}
	}
	if err := s.Prefill(ctx, ids); err != nil {
		return nil, nil, err
	}
	logits = make([]float32, e.Vocab())
	if err := s.Logits(ctx, logits); err != nil {
		return nil, nil, err
	}
	present, err = s.State()
	return logits, present, err
}
