package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/grammar"
	"github.com/glint-llm/glint/sample"
	"github.com/glint-llm/glint/tokenizer"
)

// Request is one generation as the HTTP layer hands it to a Scheduler.
type Request struct {
	Prompt   []int32
	Sampling sample.Params
	// MaxTokens is the most tokens generated; < 0: no limit (until the
	// context is full, or with context shift on until the prompt and reply
	// reach the model's training context, as llama-server stops).
	MaxTokens int
	// Stop strings end the text (none of a stop string is sent).
	Stop []string
	// IgnoreEOS: end-of-generation tokens do not end it (as the CLI's
	// --ignore-eos: they are generated, and render as nothing).
	IgnoreEOS bool
	// EndTokens end it too (a chat template's end of turn).
	EndTokens []int32
	// LogitBias is added to the logits before the sampler.
	LogitBias []Bias
	// Logprobs: the stream carries each chosen token's log-probability
	// and those of the TopLogprobs most probable tokens of its step.
	Logprobs    bool
	TopLogprobs int
	// Grammar, when set, holds the reply to it (response_format).
	Grammar *grammar.Grammar
	// Keep is llama-server's n_keep: the prompt tokens after the BOS that a
	// context shift keeps (-1: the whole prompt).
	Keep int
	// Owner is whose request it is (the API key's identity; "" without
	// keys): a slot's cached prompt is reused, and reported as cached,
	// only for requests of the owner whose request filled it, so that no
	// client learns from the timing or the usage how much of its prompt
	// another client sent.
	Owner string
}

// Finish reasons, as OpenAI names them.
const (
	FinishStop   = "stop"   // an end-of-generation token or a stop string
	FinishLength = "length" // max_tokens, or the context is full
)

// Result is what a finished generation did.
type Result struct {
	Finish string // FinishStop or FinishLength
	// PromptTokens counts the prompt as it ran: one over a slot's context
	// is cut first where context shift is on.
	PromptTokens     int
	CachedTokens     int // of the prompt, already in the slot's cache
	CompletionTokens int // tokens chosen, counting an end-of-generation token as llama-server does
	Shifts           int // context shifts on the way
	Slot             int
	TTFT, Elapsed    time.Duration

	// Drafted and Accepted count speculative decoding's draft tokens.
	Drafted, Accepted int
}

// Errors Submit returns; the HTTP layer maps them to status codes.
var (
	ErrBusy   = errors.New("the server is busy: every slot is taken and the queue is full")
	ErrClosed = errors.New("the server is shutting down")
	// ErrBadRequest wraps a request the scheduler cannot run as given.
	ErrBadRequest = errors.New("bad request")
)

// SchedulerOptions configure a Scheduler.
type SchedulerOptions struct {
	// Slots is the number of requests run at once, an engine session each
	// (0: one per sequence of the engine).
	Slots int
	// Queue is the most requests waiting for a slot; more get ErrBusy.
	Queue int
	// ContextShift is llama-server's: a slot whose context is full keeps
	// the BOS and the request's n_keep tokens, discards half of the rest
	// and goes on (the engine's shift), and a prompt that does not fit is
	// cut to fit. Off, a full context ends the generation (finish_reason
	// length) and a prompt that does not fit is refused.
	ContextShift bool
	// Trained is the model's training context: with context shift on, a
	// request without a token limit stops when its prompt and reply reach
	// it, as llama-server's does (0: never).
	Trained int
	// IsEOG says which tokens end a generation.
	IsEOG func(int32) bool
	// Speculation, when set, gives each slot its speculative decoding
	// (glint.Model.Speculation: a draft model's session of its own, or
	// n-gram drafts); the drafts of every slot share the engine's steps.
	Speculation func() (*engine.Speculative, func(), error)
}

// minSlotContext is the least context a slot may have: a cut prompt keeps
// up to 4 fewer tokens than the context, as llama-server's does.
const minSlotContext = 8

// Scheduler runs requests on slots, each an engine session: it queues them
// (boundedly), gives each a free slot — the one whose cached tokens share
// the longest prefix with the prompt, if it is most of them, else the one
// idle longest — and runs it on its own goroutine: it cuts the slot's
// session to the common prefix, prefills the rest and generates. The
// engine's scheduler puts the steps of every running slot into one batch
// (continuous batching: a request joins at the next step, and a long
// prompt is fed in chunks that share their steps with the slots decoding).
// Each slot runs an engine.Generator, the loop every generation shares.
type Scheduler struct {
	e     *engine.Engine
	tok   *tokenizer.Tokenizer
	o     SchedulerOptions
	slots []*slot

	mu      sync.Mutex
	cond    *sync.Cond // a request ended or left the queue (Close waits for the last)
	queue   []*job     // submitted, not yet on a slot
	running int
	closed  bool
	frees   int64 // slots freed so far: the clock of slot.lastUse

	// testHook, when set, runs on a request's slot goroutine before its
	// generation (tests inject faults with it).
	testHook func(*job)
}

// slot is one session and what the scheduler knows of it.
type slot struct {
	id   int
	sess *engine.Session
	// Under Scheduler.mu; read by the slot's job, which starts after they
	// are written.
	job     *job    // nil: free
	cached  []int32 // the tokens in its cells when it was last freed
	owner   string  // whose request they are
	lastUse int64   // when it was last freed

	// spec is the slot's speculative decoding (nil: none); specDone
	// releases it.
	spec     *engine.Speculative
	specDone func()
}

// NewScheduler opens o.Slots sessions on e and starts serving them.
func NewScheduler(e *engine.Engine, tok *tokenizer.Tokenizer, o SchedulerOptions) (*Scheduler, error) {
	if o.Slots <= 0 {
		o.Slots = e.Seqs()
	}
	if o.IsEOG == nil {
		o.IsEOG = tok.IsEOG
	}
	o.Queue = max(o.Queue, 0)
	if e.Context() < minSlotContext {
		return nil, fmt.Errorf("serve: a slot's context of %d tokens is too small (want at least %d: raise -c or lower --parallel)", e.Context(), minSlotContext)
	}
	s := &Scheduler{e: e, tok: tok, o: o}
	s.cond = sync.NewCond(&s.mu)
	for i := range o.Slots {
		sess, err := e.NewSession(engine.SessionOptions{ContextShift: o.ContextShift})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("serve: slot %d: %w", i, err)
		}
		sl := &slot{id: i, sess: sess}
		s.slots = append(s.slots, sl)
		if o.Speculation != nil {
			if sl.spec, sl.specDone, err = o.Speculation(); err != nil {
				s.Close()
				return nil, fmt.Errorf("serve: slot %d: %w", i, err)
			}
		}
	}
	return s, nil
}

// Vocab is the size of the model's vocabulary (its logits).
func (s *Scheduler) Vocab() int { return s.e.Vocab() }

// Context is the most tokens one slot holds: its prompt and reply.
func (s *Scheduler) Context() int { return s.e.Context() }

// Status counts the slots and the queue.
type Status struct {
	Slots, Processing, Queued int
}

// Status says what the scheduler is doing now.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Slots: len(s.slots), Processing: s.running, Queued: len(s.queue)}
}

// Submit queues r. The generation runs until it ends or ctx is cancelled
// (the client went away), which frees its slot at the next step — or takes
// it out of the queue at once.
func (s *Scheduler) Submit(ctx context.Context, r Request) (*Stream, error) {
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("%w: the prompt is empty", ErrBadRequest)
	}
	for _, id := range r.Prompt {
		if id < 0 || int(id) >= s.e.Vocab() {
			return nil, fmt.Errorf("%w: token id %d is outside the vocabulary of %d", ErrBadRequest, id, s.e.Vocab())
		}
	}
	for _, b := range r.LogitBias {
		if b.ID < 0 || int(b.ID) >= s.e.Vocab() {
			return nil, fmt.Errorf("%w: logit bias: token id %d is outside the vocabulary of %d", ErrBadRequest, b.ID, s.e.Vocab())
		}
	}
	if r.Logprobs && (r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs) {
		return nil, fmt.Errorf("%w: %d top log-probabilities are outside [0, %d]", ErrBadRequest, r.TopLogprobs, MaxTopLogprobs)
	}
	// llama-server's n_keep: -1 is the whole prompt, and at most the context
	// less 4 (room for what follows).
	n := s.Context()
	keep := r.Keep
	if keep < 0 {
		keep = len(r.Prompt)
	}
	keep = min(keep, n-4)
	if len(r.Prompt) >= n {
		if !s.o.ContextShift {
			return nil, fmt.Errorf("%w: the prompt of %d tokens does not fit the context of %d tokens (a slot's share of -c; context shift is off)", ErrBadRequest, len(r.Prompt), n)
		}
		r.Prompt = cutPrompt(r.Prompt, keep, n)
	}
	j := &job{ctx: ctx, req: r, keep: keep, out: newStream(), submitted: time.Now()}
	if err := s.enqueue(j); err != nil {
		return nil, err
	}
	return j.out, nil
}

// enqueue queues j, or refuses it when the scheduler is closed or full.
func (s *Scheduler) enqueue(j *job) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrClosed
	case s.running+len(s.queue) >= len(s.slots)+s.o.Queue:
		s.mu.Unlock()
		return ErrBusy
	}
	s.queue = append(s.queue, j)
	s.admit()
	s.mu.Unlock()
	context.AfterFunc(j.ctx, func() { s.leave(j) })
	return nil
}

// cutPrompt is llama-server's cut of a prompt that does not fit a slot's
// context n: its first keep tokens, then whole blocks of half the rest of
// the context dropped, so that what is left fits.
func cutPrompt(p []int32, keep, n int) []int32 {
	block := (n - keep) / 2
	erased := (len(p) - keep - block) / block
	return append(slices.Clone(p[:keep]), p[keep+erased*block:]...)
}

// Close stops taking requests, lets the queued and running ones finish,
// and returns when the last has; then it closes the slots' sessions.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	for s.running > 0 || len(s.queue) > 0 {
		s.cond.Wait()
	}
	s.mu.Unlock()
	for _, sl := range s.slots {
		sl.sess.Close()
		if sl.specDone != nil {
			sl.specDone()
		}
	}
}

// admit puts the first waiting requests on free slots; under mu.
func (s *Scheduler) admit() {
	for len(s.queue) > 0 {
		sl := s.pickSlot(s.queue[0].req)
		if sl == nil {
			return
		}
		j := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		sl.job, j.slot = j, sl
		s.running++
		go s.run(j)
	}
}

// leave takes j out of the queue when its client has gone before it got a
// slot.
func (s *Scheduler) leave(j *job) {
	s.mu.Lock()
	i := slices.Index(s.queue, j)
	if i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.cond.Broadcast()
	}
	s.mu.Unlock()
	if i >= 0 {
		j.out.finish(Result{PromptTokens: len(j.req.Prompt)}, j.ctx.Err())
	}
}

// pickSlot chooses a free slot as llama-server does: the one whose cached
// tokens share the longest prefix with prompt, when that prefix is more
// than half of them (its --slot-prompt-similarity 0.5, over the common
// prefix: the part a slot keeps), else the one idle longest, so that an
// unrelated prompt leaves the best caches alone; nil when none is free.
// Only the slots r's owner filled count as caches. Under mu.
func (s *Scheduler) pickSlot(r Request) *slot {
	var best, lru *slot
	bestLen := 0
	for _, sl := range s.slots {
		if sl.job != nil {
			continue
		}
		if lru == nil || sl.lastUse < lru.lastUse {
			lru = sl
		}
		if sl.owner != r.Owner {
			continue
		}
		if n := commonPrefix(sl.cached, r.Prompt); n > bestLen && 2*n > len(sl.cached) {
			best, bestLen = sl, n
		}
	}
	if best == nil {
		return lru
	}
	return best
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// run generates j on its slot, then frees the slot and ends j, in that
// order: a client told its request ended may send the next at once.
func (s *Scheduler) run(j *job) {
	sl := j.slot
	err := s.generateSafely(j, sl)
	if err != nil && j.ctx.Err() == nil {
		// A fault, not a client gone: the slot's cells are in doubt.
		sl.sess.Truncate(0)
	}
	cached := sl.sess.Tokens()[:sl.sess.Fed()]
	s.mu.Lock()
	s.frees++
	sl.job, sl.cached, sl.owner, sl.lastUse = nil, cached, j.req.Owner, s.frees
	s.running--
	s.admit()
	s.cond.Broadcast()
	s.mu.Unlock()
	j.end(err)
}

// generateSafely is generate with a panic (a bug) turned into the
// request's error: the slot is reset and freed, the client gets a 500,
// and the other slots go on.
func (s *Scheduler) generateSafely(j *job, sl *slot) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: panic on slot %d: %v", sl.id, p)
		}
	}()
	if s.testHook != nil {
		s.testHook(j)
	}
	if j.embed != nil {
		return s.embed(j, sl)
	}
	return s.generate(j, sl)
}

// generate runs j's prompt and generation on its slot's session.
func (s *Scheduler) generate(j *job, sl *slot) error {
	sess, p := sl.sess, j.req.Prompt
	// At least the prompt's last token is fed again, for its logits; none
	// of another owner's cache is reused.
	keep := min(commonPrefix(sl.cached, p), len(p)-1)
	if sl.owner != j.req.Owner {
		keep = 0
	}
	if err := sess.Truncate(keep); err != nil {
		if err := sess.Truncate(0); err != nil {
			return err
		}
		keep = 0
	}
	j.res = Result{PromptTokens: len(p), CachedTokens: sess.Fed(), Slot: sl.id}
	bos := 0
	if s.tok.AddBOS() {
		bos = 1
	}
	sess.SetKeep(j.keep + bos)
	o := s.options(j)
	if err := s.constrain(&o, j.req); err != nil {
		return err
	}
	g, err := sess.NewGenerator(o)
	if err != nil {
		return err
	}
	defer func() {
		tm := g.Timing()
		j.res.Shifts, j.res.Drafted, j.res.Accepted = tm.Shifts, tm.Drafted, tm.Accepted
	}()
	if err := g.Start(j.ctx, p[keep:]); err != nil {
		return err
	}
	for {
		t, err := g.Next(j.ctx)
		if err != nil {
			return err
		}
		if t.ID >= 0 {
			// An end token counts, as llama-server counts it.
			if j.res.CompletionTokens == 0 {
				j.first = time.Now()
			}
			j.res.CompletionTokens++
		}
		j.out.push(t.Text)
		switch t.Finish {
		case engine.Going:
		case engine.FinishEnd, engine.FinishStop:
			j.res.Finish = FinishStop
			return nil
		default:
			j.res.Finish = FinishLength
			return nil
		}
	}
}

// options are j's generation: its sampler, limit, end tokens, stop
// strings, logit bias and log-probabilities.
func (s *Scheduler) options(j *job) engine.Options {
	r := j.req
	o := engine.Options{Sampler: sample.New(r.Sampling, s.e.Vocab()), MaxTokens: r.MaxTokens,
		Tokenizer: s.tok, Stop: r.Stop}
	if o.MaxTokens < 0 && s.o.ContextShift && s.o.Trained > 0 {
		o.MaxTokens = max(s.o.Trained-len(r.Prompt), 1)
	}
	if !r.IgnoreEOS {
		o.EOG, o.EndTokens = s.o.IsEOG, r.EndTokens
	}
	top := -1
	if r.Logprobs {
		top = r.TopLogprobs
	}
	o.Hooks = logprobHooks(r.LogitBias, top, s.e.Vocab(), j.out.pushLogprob)
	if j.slot != nil {
		o.Speculative = j.slot.spec
	}
	return o
}

// job is one request: what the HTTP layer asked, where its text goes, and
// what it did.
type job struct {
	ctx       context.Context
	req       Request
	keep      int // n_keep, resolved
	out       *Stream
	submitted time.Time

	slot  *slot
	res   Result
	first time.Time
	// embed, when set, makes the job an embedding instead of a
	// generation.
	embed *embedJob
}

// end sends the result.
func (j *job) end(err error) {
	if !j.first.IsZero() {
		j.res.TTFT = j.first.Sub(j.submitted)
	}
	j.res.Elapsed = time.Since(j.submitted)
	j.out.finish(j.res, err)
}
