package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/glint-llm/glint/sample"
	"github.com/glint-llm/glint/tokenizer"
)

// Finish says why a generation ended.
type Finish uint8

const (
	// Going: the generation has not ended.
	Going Finish = iota
	// FinishEnd: an end-of-generation token (Options.EOG or EndTokens).
	FinishEnd
	// FinishStop: a stop string (Options.Stop).
	FinishStop
	// FinishLength: Options.MaxTokens were generated.
	FinishLength
	// FinishContext: the next token had no room in the context (context
	// shift off, or unable to make room).
	FinishContext
)

func (f Finish) String() string {
	switch f {
	case Going:
		return "going"
	case FinishEnd:
		return "end token"
	case FinishStop:
		return "stop string"
	case FinishLength:
		return "length"
	case FinishContext:
		return "context full"
	}
	return fmt.Sprintf("Finish(%d)", uint8(f))
}

// Hooks are where per-token work beyond sampling goes: a constraint on what
// may come next, what a client wants to know of each choice. Setting any
// of them makes every step read the logits back from the model, greedy
// ones too (the argmax is then taken on the host, by the device's rule).
//
// Speculative decoding (Options.Speculative) runs each verified token's
// logits through them in order, as plain decoding's steps would, up to
// the first draft rejected, so that a hook sees what it would see without
// drafts.
type Hooks struct {
	// Logits sees each step's logits before the sampler and may change
	// them: a grammar or schema masks the tokens it forbids by setting
	// their logits to -Inf; a dump writes them. An error ends the
	// generation with it.
	Logits func(logits []float32) error
	// Chosen sees the token chosen and the logits it was chosen from, as
	// the sampler left them (its repetition penalty applied), for
	// log-probabilities. It is not called for an end token.
	Chosen func(logits []float32, id int32) error
}

func (h Hooks) any() bool { return h.Logits != nil || h.Chosen != nil }

// Options control one generation.
type Options struct {
	// MaxTokens is the most tokens generated; < 0: no limit (an end
	// token, a stop string or a full context ends it).
	MaxTokens int
	// Sampler picks tokens; nil or greedy lets the model pick on its
	// device (Model.Argmax) unless a hook needs the logits.
	Sampler *sample.Sampler
	// EOG reports the model's end-of-generation tokens (EOS, EOT; nil:
	// none, as --ignore-eos); EndTokens are more (a chat template's end of
	// turn). Such a token ends the generation: it is neither emitted,
	// counted nor kept in the session.
	EOG       func(id int32) bool
	EndTokens []int32
	// Tokenizer turns the tokens into text (Token.Text); nil: no text.
	Tokenizer *tokenizer.Tokenizer
	// Stop strings end the text, none of them shown (StopStrings); they
	// need a Tokenizer. The token that completes one is kept and counted.
	Stop []string
	// Hooks run on each step's logits.
	Hooks Hooks
	// Speculative, when set, drafts tokens and verifies them with the
	// model in one step (speculative decoding), which changes no token:
	// greedy ones are plain decoding's to the bit, sampled ones keep
	// their distribution. A generation it cannot serve runs without it
	// (Generator.Speculating says why).
	Speculative *Speculative

	// OnToken receives each generated token of Generate as soon as it is
	// chosen, with the text it releases; an error wrapping ErrStop ends
	// the generation normally. Generator does not use it.
	OnToken func(t Token) error
	// Session configures the session engine.Generate opens (context
	// shift).
	Session SessionOptions
}

// Token is one step of a generation.
type Token struct {
	// ID is the token chosen: a generated one, or with FinishEnd the end
	// token; -1 when the step chose none (the limit was 0, the context
	// full).
	ID int32
	// Text is what may be shown now: complete UTF-8 characters, nothing of
	// a stop string or what may still become one; on the last step, the
	// rest of what was held back.
	Text string
	// Finish is Going until the last step.
	Finish Finish
}

// Generator is one generation on a session, step by step: it chooses each
// token (the device's argmax or the sampler over the logits, through the
// hooks), ends at an end token, a stop string, the token limit or a full
// context, and decodes the text as it comes. Every generation — Generate,
// the CLI's chat, a server's slots — runs through it, so that each rule
// lives in one place. Sessions stepping on several goroutines share the
// engine's steps (continuous batching).
type Generator struct {
	s      *Session
	o      Options
	dec    *tokenizer.StreamDecoder
	stops  *StopStrings
	logits []float32
	// history is what the repetition penalty looks back on: the session's
	// tokens when it started, then everything chosen (a context shift does
	// not forget them, as llama.cpp's sampler does not).
	history []int32
	tm      Timing
	finish  Finish

	start, last time.Time
	shifts      int

	// Speculative decoding: why it is off (specOff), the tokens a
	// verification chose that Next has yet to hand out (ready; all but
	// the last are in the session), and buffers.
	specOff  string
	ready    []int32
	specIDs  []int32
	specRows []float32
	tune     *tune // Speculative.Adaptive's measurements
	specHist []int32
}

// NewGenerator prepares a generation on s.
func (s *Session) NewGenerator(o Options) (*Generator, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	g := &Generator{s: s, o: o, stops: NewStopStrings(o.Stop)}
	g.specOff = specCheck(s, o)
	if o.Speculative != nil && o.Speculative.Adaptive {
		g.tune = newTune()
	}
	if o.Tokenizer != nil {
		g.dec = o.Tokenizer.NewStreamDecoder()
	} else if len(g.stops.stops) > 0 {
		return nil, errors.New("generate: stop strings need a tokenizer")
	}
	if o.Hooks.any() || (o.Sampler != nil && !o.Sampler.Greedy()) {
		g.logits = make([]float32, s.e.Vocab())
	}
	return g, nil
}

// Start feeds prompt to the session, after what it holds (a continuation
// may give none). A prompt that does not fit is an error; a context that
// fills while it is fed ends the generation (FinishContext at Next).
func (g *Generator) Start(ctx context.Context, prompt []int32) error {
	s := g.s
	g.tm = Timing{PromptTokens: len(prompt)}
	g.shifts = s.shifts
	if len(prompt) == 0 && s.Len() == 0 {
		return errors.New("generate: empty prompt")
	}
	if ctxLen := s.e.Context(); s.Len()+len(prompt) > ctxLen && (!s.opts.ContextShift || len(prompt) >= ctxLen) {
		return fmt.Errorf("generate: prompt of %d tokens after %d does not fit the context of %d (-c)", len(prompt), s.Len(), ctxLen)
	}
	g.history = append(s.Tokens(), prompt...)
	g.start = time.Now()
	g.last = g.start
	if err := s.Prefill(ctx, prompt); err != nil {
		if !errors.Is(err, ErrContextFull) {
			return err
		}
		g.end(FinishContext)
	}
	return nil
}

// Next chooses the next token and returns it with its text. After the
// step whose Finish is set, Next returns that Finish again with ID -1. A
// cancelled ctx or a failed step is an error (the session keeps the tokens
// fed so far).
func (g *Generator) Next(ctx context.Context) (Token, error) {
	if g.finish != Going {
		return Token{ID: -1, Finish: g.finish}, nil
	}
	if g.o.MaxTokens >= 0 && len(g.tm.Generated) >= g.o.MaxTokens {
		return g.finished(-1, "", FinishLength), nil
	}
	if len(g.ready) == 0 && g.o.Speculative != nil && g.specOff == "" {
		ready, err := g.speculate(ctx)
		if err != nil {
			return Token{ID: -1}, err
		}
		g.ready = ready
	}
	var id int32
	if len(g.ready) > 0 {
		id = g.ready[0]
		g.ready = g.ready[1:]
	} else {
		var err error
		start, one := time.Now(), len(g.s.pending) == 1 // not a prompt's prefill
		id, err = g.choose(ctx)
		if g.tune != nil && one && err == nil {
			g.tune.plainStep(time.Since(start))
		}
		if errors.Is(err, ErrContextFull) {
			return g.finished(-1, "", FinishContext), nil
		}
		if err != nil {
			return Token{ID: -1}, err
		}
		g.tm.Passes++
	}
	// With tokens of a verification still to hand out, id and those
	// before the last are in the session already.
	fed := len(g.ready) > 0
	if g.isEnd(id) {
		return g.finishedEarly(id, "", FinishEnd, fed)
	}
	if !fed {
		g.s.Choose(id)
	}
	g.history = append(g.history, id)
	now := time.Now()
	if len(g.tm.Generated) == 0 {
		g.tm.TTFT = now.Sub(g.start)
	} else {
		g.tm.Gaps = append(g.tm.Gaps, now.Sub(g.last))
	}
	g.last = now
	g.tm.Generated = append(g.tm.Generated, id)
	var text string
	if g.dec != nil {
		var stopped bool
		if text, stopped = g.stops.Add(g.dec.Add(id)); stopped {
			g.end(FinishStop)
			if err := g.dropReady(true); err != nil {
				return Token{ID: -1}, err
			}
			return Token{ID: id, Text: text, Finish: FinishStop}, nil
		}
	}
	if g.o.MaxTokens >= 0 && len(g.tm.Generated) >= g.o.MaxTokens {
		return g.finishedEarly(id, text, FinishLength, false)
	}
	return Token{ID: id, Text: text}, nil
}

// finishedEarly is finished for a generation that may end inside a
// verification's tokens: the session drops those after id (and id itself
// when it is an end token, which plain decoding never keeps).
func (g *Generator) finishedEarly(id int32, text string, f Finish, fedEnd bool) (Token, error) {
	if err := g.dropReady(!fedEnd); err != nil {
		return Token{ID: -1}, err
	}
	return g.finished(id, text, f), nil
}

// dropReady removes from the session the tokens of a verification after
// the one just handed out (kept: that one stays; else it goes too), so that
// the session ends as plain decoding's would.
func (g *Generator) dropReady(kept bool) error {
	if len(g.ready) == 0 {
		return nil
	}
	// All of ready but its last are in the session, after the token
	// handed out.
	drop := len(g.ready) - 1
	if !kept {
		drop++
	}
	g.ready = g.ready[:0]
	return g.s.Truncate(g.s.Len() - drop)
}

// choose picks the next token without appending it: the device's argmax
// when nothing needs the logits, else the sampler's choice (or the argmax)
// over the logits after the Logits hook.
func (g *Generator) choose(ctx context.Context) (int32, error) {
	if g.logits == nil {
		return g.s.Argmax(ctx)
	}
	if err := g.s.Logits(ctx, g.logits); err != nil {
		return 0, err
	}
	if h := g.o.Hooks.Logits; h != nil {
		if err := h(g.logits); err != nil {
			return 0, err
		}
	}
	var id int32
	if g.o.Sampler != nil {
		id = g.o.Sampler.Sample(g.logits, g.history)
	} else {
		id = sample.Argmax(g.logits)
	}
	if h := g.o.Hooks.Chosen; h != nil && !g.isEnd(id) {
		if err := h(g.logits, id); err != nil {
			return 0, err
		}
	}
	return id, nil
}

func (g *Generator) isEnd(id int32) bool {
	return g.o.EOG != nil && g.o.EOG(id) || slices.Contains(g.o.EndTokens, id)
}

// finished ends the generation with f, releasing what was held back after
// text.
func (g *Generator) finished(id int32, text string, f Finish) Token {
	text += g.Flush()
	g.end(f)
	return Token{ID: id, Text: text, Finish: f}
}

func (g *Generator) end(f Finish) {
	g.finish = f
	g.tm.ContextFull = f == FinishContext
}

// Flush returns the text held back (an unfinished character, a possible
// stop string's start), for a caller that ends the generation itself; ""
// once a stop string was seen.
func (g *Generator) Flush() string {
	if g.dec == nil || g.stops.Stopped() {
		return ""
	}
	text, _ := g.stops.Add(g.dec.Flush())
	return text + g.stops.Flush()
}

// Finish is why the generation ended (Going while it runs).
func (g *Generator) Finish() Finish { return g.finish }

// Timing is what the generation did and measured so far.
func (g *Generator) Timing() Timing {
	tm := g.tm
	if g.o.Speculative != nil {
		tm.SpecOff = g.specOff
	}
	tm.Shifts = g.s.shifts - g.shifts
	return tm
}
