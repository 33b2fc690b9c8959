package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// StepTokens is the default of the most tokens one scheduler step feeds the
// model (llama.cpp's n_batch as its server uses it): every session's next
// token first, then prompt chunks in the order they came, so that a long
// prompt shares its steps with the sessions decoding beside it.
const StepTokens = 512

// ErrClosed is returned by an Engine, and its sessions, once closed.
var ErrClosed = errors.New("engine: closed")

// Engine is a Model made safe for concurrent use: it owns the sequence ids
// and runs a scheduler that feeds the work of every waiting session in one
// Decode per step (continuous batching). Sessions are its users.
type Engine struct {
	m Model

	mu     sync.Mutex // guards free, queue, closed
	cond   *sync.Cond // signals the loop: work queued, a request cancelled, closing
	free   []int      // sequence ids not in use, lowest first
	queue  []*request // requests with tokens left to feed, oldest first
	closed bool
	done   chan struct{}
	// stepTokens is the step's budget (SetStepTokens); guarded by mu.
	stepTokens int

	// model serialises the model's use: a scheduler step, a sequence
	// operation of a session; modelClosed (under it) refuses use after
	// Close.
	model       sync.Mutex
	modelClosed bool

	// back[s]: sequence s was served by the last step, so it will likely be
	// back in microseconds (its session picks a token and asks again); the
	// next step waits for such sessions a little (gather). Guarded by mu.
	back    []bool
	backN   int
	expired bool // the gather's time is up
	grace   *time.Timer

	steps, tokens atomic.Int64 // Stats

	// Owned by the loop.
	batch    []Item
	takes    []take
	best     []int32
	lastStep time.Duration
	// verifying: this step runs the verifications (Verifier); lastVerified:
	// the last one did, so prompt chunks waiting go first in this one.
	verifying, lastVerified bool
}

// maxGather is the longest a step waits for the sessions of the last one
// to come back (and at most a quarter of the last step's time);
// gatherFor, when set (tests), replaces that bound.
const maxGather = time.Millisecond

var gatherFor time.Duration

// request is a session's wish to feed tokens and, optionally, to read the
// last one's argmax or logits. The loop updates fed, id and err, and
// signals done when it is over; the session reads them after that. A
// session reuses its one request, so a step allocates nothing.
type request struct {
	seq      int
	base     int // the position of tokens[0]
	tokens   []int32
	want     want
	logits   []float32 // filled when want includes wantLogits
	fed      int
	id       int32 // the argmax, when want includes wantArgmax
	err      error
	canceled bool          // set under Engine.mu
	done     chan struct{} // signalled once when the request is over

	// verify: the tokens are one speculative verification, fed in one
	// step as decode steps (Verifier), every one an output: ids gets each
	// argmax (wantArgmax), rows each one's logits (wantLogits).
	verify bool
	ids    []int32
	rows   []float32
}

// want says what a request reads from its last token.
type want uint8

const (
	wantArgmax want = 1 << iota
	wantLogits
)

// take is a request's share of one step.
type take struct {
	r      *request
	n      int
	output bool
	all    bool // every token an output (a verification)
}

// New starts an engine over m, which it owns from now on (Close closes it).
func New(m Model) *Engine {
	e := &Engine{m: m, done: make(chan struct{}), best: make([]int32, m.MaxOutputs()), back: make([]bool, m.Seqs()),
		stepTokens: StepTokens}
	e.cond = sync.NewCond(&e.mu)
	e.grace = time.AfterFunc(time.Hour, func() {
		e.mu.Lock()
		e.expired = true
		e.cond.Broadcast()
		e.mu.Unlock()
	})
	e.grace.Stop()
	for s := range m.Seqs() {
		e.free = append(e.free, s)
	}
	go e.loop()
	return e
}

// Vocab is the number of logits per token.
func (e *Engine) Vocab() int { return e.m.Vocab() }

// Context is the most positions one session holds.
func (e *Engine) Context() int { return e.m.Context() }

// Seqs is the most sessions open at once.
func (e *Engine) Seqs() int { return e.m.Seqs() }

// SetStepTokens sets the most tokens one step feeds (n ≤ 0: StepTokens).
// Smaller steps bring the tokens of sessions decoding beside a long prompt
// sooner, at some cost to the prompt's speed.
func (e *Engine) SetStepTokens(n int) {
	if n <= 0 {
		n = StepTokens
	}
	e.mu.Lock()
	e.stepTokens = n
	e.mu.Unlock()
}

// Stats counts what the scheduler has run.
type Stats struct {
	Steps  int64 // Decode calls
	Tokens int64 // tokens fed, prompts' and generated ones
}

// Stats says what the scheduler has run so far.
func (e *Engine) Stats() Stats {
	return Stats{Steps: e.steps.Load(), Tokens: e.tokens.Load()}
}

// Close stops the scheduler (requests still queued fail with ErrClosed)
// and closes the model. Sessions must not be used afterwards.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return nil
	}
	e.closed = true
	e.cond.Broadcast()
	e.mu.Unlock()
	<-e.done
	e.model.Lock()
	defer e.model.Unlock()
	e.modelClosed = true
	return e.m.Close()
}

// acquire takes a free sequence id.
func (e *Engine) acquire() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, ErrClosed
	}
	if len(e.free) == 0 {
		return 0, fmt.Errorf("engine: all %d sequences are in use (load the model with more)", e.m.Seqs())
	}
	s := e.free[0]
	e.free = e.free[1:]
	return s, nil
}

// release gives a sequence id back.
func (e *Engine) release(seq int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.arrived(seq)
	e.cond.Broadcast()
	i := 0
	for i < len(e.free) && e.free[i] < seq {
		i++
	}
	e.free = append(e.free[:i], append([]int{seq}, e.free[i:]...)...)
}

// withModel runs f with the model to itself, between steps.
func (e *Engine) withModel(f func(m Model) error) error {
	e.model.Lock()
	defer e.model.Unlock()
	if e.modelClosed {
		return ErrClosed
	}
	return f(e.m)
}

// submit queues r and waits until it is done. A cancelled request leaves
// the queue at the next step boundary (the step under way, which may hold
// some of its tokens, finishes first); its fed count says how far it got.
func (e *Engine) submit(ctx context.Context, r *request) error {
	if r.done == nil {
		r.done = make(chan struct{}, 1) // one signal per submission
	}
	r.fed, r.err, r.canceled = 0, nil, false
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.queue = append(e.queue, r)
	e.arrived(r.seq)
	e.cond.Signal()
	e.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		e.mu.Lock()
		r.canceled = true
		e.cond.Signal()
		e.mu.Unlock()
		<-r.done
		if r.err != nil && !errors.Is(r.err, errCanceled) {
			return r.err
		}
		return ctx.Err()
	}
}

var errCanceled = errors.New("canceled")

// loop runs steps while there is work.
func (e *Engine) loop() {
	defer close(e.done)
	for {
		e.mu.Lock()
		for len(e.queue) == 0 && !e.closed {
			e.cond.Wait()
		}
		e.gather()
		q := e.queue[:0]
		for _, r := range e.queue {
			switch {
			case r.canceled:
				r.err = errCanceled
				r.done <- struct{}{}
			case e.closed:
				r.err = ErrClosed
				r.done <- struct{}{}
			default:
				q = append(q, r)
			}
		}
		clear(e.queue[len(q):])
		e.queue = q
		if e.closed {
			e.mu.Unlock()
			return
		}
		e.plan()
		e.mu.Unlock()
		if len(e.takes) == 0 {
			continue
		}
		err := e.step()
		e.mu.Lock()
		q = e.queue[:0]
		for _, r := range e.queue {
			t := e.takeOf(r)
			switch {
			case t == nil:
				q = append(q, r)
			case err != nil:
				r.err = err
				r.done <- struct{}{}
			default:
				r.fed += t.n
				if r.fed < len(r.tokens) {
					q = append(q, r)
				} else {
					if r.want != 0 && !e.back[r.seq] {
						e.back[r.seq] = true
						e.backN++
					}
					r.done <- struct{}{}
				}
			}
		}
		clear(e.queue[len(q):])
		e.queue = q
		e.mu.Unlock()
	}
}

func (e *Engine) takeOf(r *request) *take {
	for i := range e.takes {
		if e.takes[i].r == r {
			return &e.takes[i]
		}
	}
	return nil
}

// plan chooses this step's tokens: every request's last token first (the
// decode steps of sessions generating), then chunks of the others in
// queue order, up to the step's budget of tokens and the model's outputs.
// Verifications (speculative decoding) run whole, every token an output,
// in steps whose every row takes a decode step's arithmetic; such a step
// takes no prompt chunk, whose rows would lose the prefill's speed, and
// after one a waiting prompt goes first. Under mu.
func (e *Engine) plan() {
	e.takes = e.takes[:0]
	budget, outputs := e.stepTokens, e.m.MaxOutputs()
	add := func(r *request, n int) {
		last := r.fed+n == len(r.tokens)
		out := last && r.want != 0
		if out && outputs == 0 {
			if n--; n == 0 {
				return
			}
			out = false
		}
		if out {
			outputs--
		}
		budget -= n
		e.takes = append(e.takes, take{r: r, n: n, output: out})
	}
	prompts := false
	for _, r := range e.queue {
		prompts = prompts || !r.verify && len(r.tokens)-r.fed > 1
	}
	e.verifying = false
	if !(prompts && e.lastVerified) {
		for _, r := range e.queue {
			// A verification over the budget (lowered since it was
			// checked) still runs, alone.
			if n := len(r.tokens); r.verify && n <= outputs && (n <= budget || len(e.takes) == 0) {
				budget -= n
				outputs -= n
				e.takes = append(e.takes, take{r: r, n: n, output: true, all: true})
				e.verifying = true
			}
		}
	}
	e.lastVerified = e.verifying
	for _, r := range e.queue {
		if !r.verify && len(r.tokens)-r.fed == 1 && budget > 0 {
			add(r, 1)
		}
	}
	if e.verifying {
		return
	}
	for _, r := range e.queue {
		if left := len(r.tokens) - r.fed; !r.verify && left > 1 && budget > 0 {
			add(r, min(left, budget))
		}
	}
}

// step feeds the planned tokens and reads the outputs. A panic (a bug in
// a backend or layer) fails this step's requests and leaves the loop
// running for the others, as a server needs.
func (e *Engine) step() (err error) {
	e.model.Lock()
	defer e.model.Unlock()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: panic in a step: %v", p)
		}
	}()
	e.batch = e.batch[:0]
	outs := 0
	for _, t := range e.takes {
		r := t.r
		for i := range t.n {
			j := r.fed + i
			e.batch = append(e.batch, Item{Token: r.tokens[j], Pos: int32(r.base + j), Seq: r.seq,
				Output: t.output && (t.all || i == t.n-1)})
		}
		switch {
		case t.all:
			outs += t.n
		case t.output:
			outs++
		}
	}
	start := time.Now()
	if e.verifying {
		err = e.m.(Verifier).Verify(e.batch)
	} else {
		err = e.m.Decode(e.batch)
	}
	e.lastStep = time.Since(start)
	if err != nil {
		return err
	}
	e.steps.Add(1)
	e.tokens.Add(int64(len(e.batch)))
	argmax := false
	for _, t := range e.takes {
		argmax = argmax || t.output && t.r.want&wantArgmax != 0
	}
	if argmax {
		if err := e.m.Argmax(e.best[:outs]); err != nil {
			return err
		}
	}
	o := 0
	for _, t := range e.takes {
		if !t.output {
			continue
		}
		if t.all {
			if err := e.readAll(t, o); err != nil {
				return err
			}
			o += t.n
			continue
		}
		if t.r.want&wantArgmax != 0 {
			t.r.id = e.best[o]
		}
		if t.r.want&wantLogits != 0 {
			if err := e.m.Logits(o, t.r.logits); err != nil {
				return err
			}
		}
		o++
	}
	return nil
}

// arrived notes that sequence seq asked again (or closed); under mu.
func (e *Engine) arrived(seq int) {
	if e.back[seq] {
		e.back[seq] = false
		e.backN--
	}
}

// gather waits, under mu, for the sessions the last step served to ask
// again — usually a matter of microseconds, the time to pick a token — so
// that their tokens share the next step instead of each running alone: up
// to a quarter of the last step's time, at most maxGather. The wait only
// ever concerns the step right after.
func (e *Engine) gather() {
	if e.backN > 0 && !e.closed {
		e.expired = false
		d := min(maxGather, e.lastStep/4)
		if gatherFor > 0 {
			d = gatherFor
		}
		e.grace.Reset(d)
		for e.backN > 0 && !e.expired && !e.closed {
			e.cond.Wait()
		}
		e.grace.Stop()
	}
	clear(e.back)
	e.backN = 0
}

// readAll reads a verification's outputs, o… of the step, into its ids and
// rows.
func (e *Engine) readAll(t take, o int) error {
	r, v := t.r, e.m.Vocab()
	for j := range t.n {
		if r.want&wantArgmax != 0 {
			r.ids[j] = e.best[o+j]
		}
		if r.want&wantLogits != 0 {
			if err := e.m.Logits(o+j, r.rows[j*v:(j+1)*v]); err != nil {
				return err
			}
		}
	}
	return nil
}

// verifyMax is the most tokens one verification may feed: a step's budget
// and outputs.
func (e *Engine) verifyMax() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return min(e.stepTokens, e.m.MaxOutputs())
}

// CanVerify reports whether the engine's model verifies drafts
// (Verifier): speculative decoding needs it.
func (e *Engine) CanVerify() bool {
	_, ok := e.m.(Verifier)
	return ok
}
