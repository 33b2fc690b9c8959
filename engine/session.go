package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/glint-llm/glint/sample"
)

// ErrContextFull is returned when a session's next tokens do not fit in
// its context and context shift is off (or cannot make room).
var ErrContextFull = errors.New("the context is full")

// ErrState is wrapped by every error about a session state that cannot be
// loaded: truncated, malformed, or made by another model.
var ErrState = errors.New("bad state")

// SessionOptions configure a session.
type SessionOptions struct {
	// ContextShift: when the next tokens would fill the context, keep the
	// first Keep tokens, discard half of the rest and move the remainder
	// down (re-rotating their cached keys), then go on — llama-cli's
	// policy, at its moment (when the tokens held and the tokens to feed
	// reach the context). Off, a full context is ErrContextFull.
	ContextShift bool
	// Keep is the number of leading tokens a context shift keeps (the BOS
	// and llama-cli's --keep N).
	Keep int
}

// Session is one sequence of an Engine: the tokens in its KV cells, and the
// logits of its last one. Its methods run its work through the engine's
// scheduler, batched with every other session's; a Session itself is for
// one goroutine at a time. Cancelling a context stops between steps.
type Session struct {
	e    *Engine
	seq  int
	opts SessionOptions
	// tokens are in the cache, tokens[i] at position i; pending are
	// chosen (by Next) but not yet fed.
	tokens, pending []int32
	// hasLogits: logits are the last token's; hasBest: best is its argmax.
	hasLogits, hasBest bool
	logits             []float32
	best               int32
	shifts             int
	closed             bool
	req                request // reused by every feed
	vtoks              []int32 // a verification's tokens
}

// NewSession opens a session on a free sequence.
func (e *Engine) NewSession(o SessionOptions) (*Session, error) {
	seq, err := e.acquire()
	if err != nil {
		return nil, err
	}
	if o.Keep < 0 {
		o.Keep = 0
	}
	return &Session{e: e, seq: seq, opts: o, logits: make([]float32, e.m.Vocab())}, nil
}

// Seq is the session's sequence id in the model.
func (s *Session) Seq() int { return s.seq }

// Len is the number of tokens in the session (fed or about to be).
func (s *Session) Len() int { return len(s.tokens) + len(s.pending) }

// Fed is the number of the session's tokens in its KV cells: Len less the
// tokens given or chosen but not fed yet.
func (s *Session) Fed() int { return len(s.tokens) }

// Tokens returns the session's tokens.
func (s *Session) Tokens() []int32 { return append(slices.Clone(s.tokens), s.pending...) }

// SetKeep changes the number of leading tokens a context shift keeps
// (SessionOptions.Keep): a server's slot takes each request's own.
func (s *Session) SetKeep(n int) { s.opts.Keep = max(n, 0) }

// Shifts is the number of context shifts so far.
func (s *Session) Shifts() int { return s.shifts }

func (s *Session) check() error {
	if s.closed {
		return errors.New("engine: session closed")
	}
	return nil
}

// Prefill feeds ids (after the token Next chose last, if any) into the
// sequence, in chunks that share steps with other sessions, and readies
// the last one's logits for Next, Logits or Argmax.
func (s *Session) Prefill(ctx context.Context, ids []int32) error {
	if err := s.check(); err != nil {
		return err
	}
	for i, id := range ids {
		if id < 0 || int(id) >= s.e.m.Vocab() {
			return fmt.Errorf("engine: token %d: id %d outside the vocabulary of %d", i, id, s.e.m.Vocab())
		}
	}
	s.pending = append(s.pending, ids...)
	if len(s.pending) == 0 {
		return nil
	}
	return s.feed(ctx, wantArgmax|wantLogits)
}

// Next appends the greedy choice (Argmax) to be fed with the next step, and
// returns it. Sampling, end tokens and text are a Generator's.
func (s *Session) Next(ctx context.Context) (int32, error) {
	id, err := s.Argmax(ctx)
	if err != nil {
		return 0, err
	}
	s.Choose(id)
	return id, nil
}

// Choose appends id, a token picked from Logits (a Generator's sampler),
// to be fed with the next step as Next does with its pick (so
// that the last token of a generation costs no step).
func (s *Session) Choose(id int32) {
	s.hasLogits, s.hasBest = false, false
	s.pending = append(s.pending, id)
}

// Logits copies the last token's logits to dst (len Vocab), feeding what
// is pending first; the caller then appends its choice with Choose.
func (s *Session) Logits(ctx context.Context, dst []float32) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(dst) != len(s.logits) {
		return fmt.Errorf("engine: Logits into %d floats, vocab is %d", len(dst), len(s.logits))
	}
	if !s.hasLogits {
		if err := s.feedLast(ctx, wantLogits); err != nil {
			return err
		}
	}
	copy(dst, s.logits)
	return nil
}

// Argmax returns the last token's largest logit (the first on ties),
// computed on the device, feeding what is pending first.
func (s *Session) Argmax(ctx context.Context) (int32, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if !s.hasBest && s.hasLogits {
		// The device's rule, on the logits already here.
		s.best, s.hasBest = sample.Argmax(s.logits), true
	}
	if !s.hasBest {
		if err := s.feedLast(ctx, wantArgmax); err != nil {
			return 0, err
		}
	}
	return s.best, nil
}

// feedLast feeds what is pending, reading the last token's w; with nothing
// pending it feeds the last token again (after Truncate or LoadState,
// whose logits are gone).
func (s *Session) feedLast(ctx context.Context, w want) error {
	if len(s.pending) == 0 {
		if len(s.tokens) == 0 {
			return errors.New("engine: the session is empty: Prefill first")
		}
		n := len(s.tokens) - 1
		if err := s.e.withModel(func(m Model) error { return m.SeqRemove(s.seq, n, -1) }); err != nil {
			return err
		}
		s.pending = append(s.pending, s.tokens[n])
		s.tokens = s.tokens[:n]
	}
	return s.feed(ctx, w)
}

// feed makes room (context shift) and runs the pending tokens through the
// scheduler, reading the last one's logits into s.logits (wantLogits)
// and its argmax into s.best (wantArgmax).
func (s *Session) feed(ctx context.Context, w want) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.makeRoom(len(s.pending)); err != nil {
		return err
	}
	r := &s.req
	r.seq, r.base, r.tokens, r.want, r.logits, r.verify = s.seq, len(s.tokens), s.pending, w, nil, false
	if w&wantLogits != 0 {
		r.logits = s.logits
	}
	s.hasLogits, s.hasBest = false, false
	err := s.e.submit(ctx, r)
	s.tokens = append(s.tokens, s.pending[:r.fed]...)
	s.pending = append(s.pending[:0], s.pending[r.fed:]...)
	if err != nil {
		return err
	}
	s.best = r.id
	s.hasLogits, s.hasBest = w&wantLogits != 0, w&wantArgmax != 0
	return nil
}

// makeRoom applies llama-cli's context shift before k tokens are fed, or
// reports ErrContextFull.
func (s *Session) makeRoom(k int) error {
	ctxLen := s.e.m.Context()
	n := len(s.tokens)
	if !s.opts.ContextShift || k >= ctxLen {
		if n+k > ctxLen {
			return fmt.Errorf("engine: %d tokens after %d do not fit the context of %d: %w", k, n, ctxLen, ErrContextFull)
		}
		return nil
	}
	for n+k >= ctxLen {
		keep := min(s.opts.Keep, n)
		discard := (n - keep) / 2
		if discard <= 0 {
			if n+k <= ctxLen {
				return nil // full to the last cell, as without a shift
			}
			return fmt.Errorf("engine: %d tokens after %d do not fit the context of %d, keeping %d: %w", k, n, ctxLen, keep, ErrContextFull)
		}
		removed := false
		err := s.e.withModel(func(m Model) error {
			if err := m.SeqRemove(s.seq, keep, keep+discard); err != nil {
				return err
			}
			removed = true
			return m.SeqShift(s.seq, keep+discard, n, -discard)
		})
		switch {
		case err != nil && removed:
			// The cells after the hole could not move: keep what is whole.
			s.e.withModel(func(m Model) error { return m.SeqRemove(s.seq, keep, -1) })
			s.tokens = s.tokens[:keep]
			return fmt.Errorf("engine: context shift (the session is cut to its first %d tokens): %w", keep, err)
		case errors.Is(err, ErrUnsupported):
			return fmt.Errorf("engine: the context of %d is full and this model cannot shift it (%v): %w", ctxLen, err, ErrContextFull)
		case err != nil:
			return fmt.Errorf("engine: context shift: %w", err)
		}
		s.tokens = append(s.tokens[:keep], s.tokens[keep+discard:]...)
		n = len(s.tokens)
		s.shifts++
	}
	return nil
}

// Truncate keeps the session's first n tokens and drops the rest (from the
// cache too); the next Next, Logits or Argmax feeds the last kept token
// again for its logits.
func (s *Session) Truncate(n int) error {
	if err := s.check(); err != nil {
		return err
	}
	if n < 0 || n > s.Len() {
		return fmt.Errorf("engine: Truncate(%d) of a session of %d tokens", n, s.Len())
	}
	if n == s.Len() {
		return nil
	}
	all := s.Tokens()
	fed := min(len(s.tokens), n)
	if fed < len(s.tokens) {
		if err := s.e.withModel(func(m Model) error { return m.SeqRemove(s.seq, fed, -1) }); err != nil {
			return err
		}
	}
	s.tokens = all[:fed]
	s.pending = slices.Clone(all[fed:n])
	s.hasLogits, s.hasBest = false, false
	return nil
}

// Fork opens a new session holding this one's tokens: in a unified cache
// their cells are shared, not copied.
func (s *Session) Fork() (*Session, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	f, err := s.e.NewSession(s.opts)
	if err != nil {
		return nil, err
	}
	if err := s.e.withModel(func(m Model) error { return m.SeqCopy(s.seq, f.seq, -1, -1) }); err != nil {
		f.Close()
		return nil, err
	}
	f.tokens, f.pending = slices.Clone(s.tokens), slices.Clone(s.pending)
	f.hasLogits, f.hasBest, f.best, f.shifts = s.hasLogits, s.hasBest, s.best, s.shifts
	copy(f.logits, s.logits)
	return f, nil
}

// A session's state is "GLSS", a version, the counts of tokens fed and
// pending (u32 each), those tokens (i32 each), then the model's state of
// the sequence (Model.SeqState), all little-endian.
const (
	sessionMagic   = "GLSS"
	sessionVersion = 1
)

// State returns the session as bytes: its tokens and its KV cells (as
// llama_state_seq_get_data), for LoadState on a session of the same model.
func (s *Session) State() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var kv []byte
	err := s.e.withModel(func(m Model) error {
		var err error
		kv, err = m.SeqState(s.seq)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 16+4*s.Len()+len(kv))
	out = append(out, sessionMagic...)
	out = binary.LittleEndian.AppendUint32(out, sessionVersion)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(s.tokens)))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(s.pending)))
	for _, t := range s.Tokens() {
		out = binary.LittleEndian.AppendUint32(out, uint32(t))
	}
	return append(out, kv...), nil
}

// LoadState replaces the session's tokens and cells with a State of a
// session of the same model. A truncated, malformed or foreign state is an
// error wrapping ErrState and leaves the session as it was.
func (s *Session) LoadState(state []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(state) < 16 || string(state[:4]) != sessionMagic {
		return fmt.Errorf("engine: %w: not a session state (%d bytes)", ErrState, len(state))
	}
	if v := binary.LittleEndian.Uint32(state[4:]); v != sessionVersion {
		return fmt.Errorf("engine: %w: version %d, want %d", ErrState, v, sessionVersion)
	}
	nf, np := int(binary.LittleEndian.Uint32(state[8:])), int(binary.LittleEndian.Uint32(state[12:]))
	if nf < 0 || np < 0 || nf+np > s.e.m.Context() || 16+4*(nf+np) > len(state) {
		return fmt.Errorf("engine: %w: %d tokens and %d pending in %d bytes (truncated?)", ErrState, nf, np, len(state))
	}
	toks := make([]int32, nf+np)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(state[16+4*i:]))
		if toks[i] < 0 || int(toks[i]) >= s.e.m.Vocab() {
			return fmt.Errorf("engine: %w: token %d: id %d outside the vocabulary of %d", ErrState, i, toks[i], s.e.m.Vocab())
		}
	}
	kv := state[16+4*len(toks):]
	err := s.e.withModel(func(m Model) error {
		if err := m.SeqLoadState(s.seq, kv); err != nil {
			if errors.Is(err, ErrUnsupported) {
				return err
			}
			return fmt.Errorf("%w: %w", ErrState, err)
		}
		if p := m.SeqPosMax(s.seq); p != nf-1 {
			m.SeqRemove(s.seq, -1, -1)
			return fmt.Errorf("%w: its cells end at position %d, its tokens at %d", ErrState, p, nf-1)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrState) {
			return fmt.Errorf("engine: %w", err)
		}
		return err
	}
	s.tokens, s.pending = toks[:nf], slices.Clone(toks[nf:])
	s.hasLogits, s.hasBest = false, false
	return nil
}

// Close frees the session's cells and its sequence id.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.e.withModel(func(m Model) error { return m.SeqRemove(s.seq, -1, -1) })
	s.e.release(s.seq)
	if errors.Is(err, ErrClosed) {
		return nil // the engine and its cells are gone already
	}
	return err
}

// Verify feeds the token chosen last (pending) and drafts after it as one
// speculative verification: one step in which every token takes a decode
// step's arithmetic (Verifier), reading the argmax of each of the
// len(drafts)+1 tokens into ids (nil: none) and, with logits not nil, its
// logits into logits[i·Vocab:]. The session then holds them all; Truncate
// drops the drafts rejected. There is no context shift here: drafts that
// do not fit are the caller's to shorten (VerifyRoom).
func (s *Session) Verify(ctx context.Context, drafts, ids []int32, logits []float32) error {
	if err := s.check(); err != nil {
		return err
	}
	if !s.e.CanVerify() {
		return fmt.Errorf("engine: Verify: %w", ErrUnsupported)
	}
	if len(s.pending) != 1 {
		return fmt.Errorf("engine: Verify with %d tokens pending, want the one chosen last", len(s.pending))
	}
	n, v := 1+len(drafts), s.e.m.Vocab()
	for i, id := range drafts {
		if id < 0 || int(id) >= v {
			return fmt.Errorf("engine: Verify: draft %d: id %d outside the vocabulary of %d", i, id, v)
		}
	}
	if ids != nil && len(ids) != n || logits != nil && len(logits) != n*v || ids == nil && logits == nil {
		return fmt.Errorf("engine: Verify of %d tokens into %d ids and %d logits", n, len(ids), len(logits))
	}
	if n > s.VerifyRoom()+1 {
		return fmt.Errorf("engine: Verify of %d drafts, room for %d", len(drafts), s.VerifyRoom())
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.vtoks = append(append(s.vtoks[:0], s.pending...), drafts...)
	r := &s.req
	r.seq, r.base, r.tokens, r.logits, r.verify = s.seq, len(s.tokens), s.vtoks, nil, true
	r.ids, r.rows, r.want = ids, logits, 0
	if ids != nil {
		r.want |= wantArgmax
	}
	if logits != nil {
		r.want |= wantLogits
	}
	s.hasLogits, s.hasBest = false, false
	err := s.e.submit(ctx, r)
	r.verify, r.ids, r.rows = false, nil, nil
	if r.fed == n {
		s.tokens = append(s.tokens, s.vtoks...)
		s.pending = s.pending[:0]
	}
	return err
}

// VerifyRoom is the most drafts one Verify may take: what one step feeds
// and reads, and the context left after the token pending.
func (s *Session) VerifyRoom() int {
	return max(0, min(s.e.verifyMax(), s.e.m.Context()-len(s.tokens))-1)
}
