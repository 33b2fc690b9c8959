package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/glint-llm/glint/sample"
)

// Options control one generation.
type Options struct {
	// MaxTokens is the most tokens generated (-n).
	MaxTokens int
	// Sampler picks tokens; a greedy sampler lets the model pick on its
	// device (Model.Argmax) unless logits are dumped.
	Sampler *sample.Sampler
	// Stop reports whether a generated token ends the generation (EOS/EOT);
	// the stop token is neither emitted, counted nor kept in the session.
	Stop func(id int32) bool
	// OnToken receives each generated token as soon as it is chosen; an
	// error wrapping ErrStop ends the generation normally (a stop string).
	OnToken func(id int32) error
	// DumpLogits, when set, receives each step's logits (little-endian
	// float32, one vocab-sized row per generated step).
	DumpLogits io.Writer
	// Session configures the session Generate opens (context shift).
	Session SessionOptions
}

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

// Generate feeds prompt to the session (after what it holds), then
// generates up to o.MaxTokens tokens. The session keeps every token
// chosen, so a later call continues where this one ended; the last one is
// fed with the next call's first step. o.Session is not used (the
// session's own options apply).
func (s *Session) Generate(ctx context.Context, prompt []int32, o Options) (tm Timing, err error) {
	tm.PromptTokens = len(prompt)
	shifts := s.shifts
	defer func() { tm.Shifts = s.shifts - shifts }()
	if len(prompt) == 0 && s.Len() == 0 {
		return tm, errors.New("generate: empty prompt")
	}
	if ctxLen := s.e.Context(); s.Len()+len(prompt) > ctxLen && (!s.opts.ContextShift || len(prompt) >= ctxLen) {
		return tm, fmt.Errorf("generate: prompt of %d tokens after %d does not fit the context of %d (-c)", len(prompt), s.Len(), ctxLen)
	}
	useDevice := o.Sampler == nil || (o.Sampler.Greedy() && o.DumpLogits == nil)
	var logits []float32
	var row []byte
	if !useDevice {
		logits = make([]float32, s.e.Vocab())
	}
	if o.DumpLogits != nil {
		row = make([]byte, 4*s.e.Vocab())
	}
	start := time.Now()
	last := start
	if err := s.Prefill(ctx, prompt); err != nil {
		return tm, contextFull(&tm, err)
	}
	for len(tm.Generated) < o.MaxTokens {
		var id int32
		if useDevice {
			var err error
			if id, err = s.Next(ctx, nil); err != nil {
				return tm, contextFull(&tm, err)
			}
		} else {
			if err := s.Logits(ctx, logits); err != nil {
				return tm, contextFull(&tm, err)
			}
			if o.DumpLogits != nil {
				for i, v := range logits {
					binary.LittleEndian.PutUint32(row[4*i:], math.Float32bits(v))
				}
				if _, err := o.DumpLogits.Write(row); err != nil {
					return tm, fmt.Errorf("generate: dump logits: %w", err)
				}
			}
			id = o.Sampler.Sample(logits, s.history)
			s.appendChosen(id)
		}
		if o.Stop != nil && o.Stop(id) {
			s.dropChosen()
			break
		}
		now := time.Now()
		if len(tm.Generated) == 0 {
			tm.TTFT = now.Sub(start)
		} else {
			tm.Gaps = append(tm.Gaps, now.Sub(last))
		}
		last = now
		tm.Generated = append(tm.Generated, id)
		if o.OnToken != nil {
			if err := o.OnToken(id); err != nil {
				if errors.Is(err, ErrStop) {
					break
				}
				return tm, err
			}
		}
	}
	return tm, nil
}

// contextFull turns a full context into the timing's flag: generation ends
// there normally, as llama.cpp's does without a context shift.
func contextFull(tm *Timing, err error) error {
	if errors.Is(err, ErrContextFull) {
		tm.ContextFull = true
		return nil
	}
	return err
}

// appendChosen appends a token the caller chose, to be fed with the next
// step (as Next does with its own choice).
func (s *Session) appendChosen(id int32) {
	s.hasLogits, s.hasBest = false, false
	s.pending = append(s.pending, id)
	s.history = append(s.history, id)
}

// dropChosen takes back the token just chosen (a stop token).
func (s *Session) dropChosen() {
	s.pending = s.pending[:len(s.pending)-1]
	s.history = s.history[:len(s.history)-1]
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
