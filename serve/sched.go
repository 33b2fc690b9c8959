package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/sample"
	"github.com/glint-llm/glint/tokenizer"
)

// Request is one generation as the HTTP layer hands it to a Scheduler.
type Request struct {
	Prompt   []int32
	Sampling sample.Params
	// MaxTokens is the most tokens generated; < 0: until the context is full.
	MaxTokens int
	// Stop strings end the text (none of a stop string is sent).
	Stop []string
	// IgnoreEOS: end-of-generation tokens do not end it (as the CLI's
	// --ignore-eos: they are generated, and render as nothing).
	IgnoreEOS bool
	// EndTokens end it too (a chat template's end of turn).
	EndTokens []int32
}

// Finish reasons, as OpenAI names them.
const (
	FinishStop   = "stop"   // an end-of-generation token or a stop string
	FinishLength = "length" // max_tokens, or the context is full
)

// Result is what a finished generation did.
type Result struct {
	Finish           string // FinishStop or FinishLength
	PromptTokens     int
	CachedTokens     int // of the prompt, already in the slot's cache
	CompletionTokens int // tokens chosen, counting an end-of-generation token as llama-server does
	Slot             int
	TTFT, Elapsed    time.Duration
}

// Errors Submit returns; the HTTP layer maps them to status codes.
var (
	ErrBusy   = errors.New("the server is busy: every slot is taken and the queue is full")
	ErrClosed = errors.New("the server is shutting down")
	// ErrBadRequest wraps a request the scheduler cannot run as given.
	ErrBadRequest = errors.New("bad request")
)

// Scheduler runs requests on slots: it queues them (boundedly), gives each
// a free slot — the one whose cached sequence shares the longest prefix
// with the prompt, else the one idle longest — prefills what the slot's
// cache lacks, and steps every busy slot together until each request ends.
// A request joins at the next step. Text is decoded and stop strings are
// matched here, so that every finish reason and token count is exact.
type Scheduler struct {
	slots    Slots
	tok      *tokenizer.Tokenizer
	isEOG    func(int32) bool
	maxQueue int

	mu      sync.Mutex
	queue   []*job // submitted, not yet on a slot
	running int
	closed  bool
	wake    chan struct{}
	done    chan struct{}

	// Owned by the loop.
	active  []*job    // per slot; nil: free
	cached  [][]int32 // per slot: the ids its cache holds
	lastUse []int64   // per slot: when it was last freed (a step count)
	steps   int64
}

// NewScheduler starts a scheduler over slots; at most maxQueue requests
// wait for a slot, more get ErrBusy. isEOG says which tokens end a
// generation.
func NewScheduler(slots Slots, tok *tokenizer.Tokenizer, isEOG func(int32) bool, maxQueue int) *Scheduler {
	n := slots.Len()
	s := &Scheduler{slots: slots, tok: tok, isEOG: isEOG, maxQueue: max(maxQueue, 0),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		active: make([]*job, n), cached: make([][]int32, n), lastUse: make([]int64, n)}
	go s.loop()
	return s
}

// Context is the most tokens one request's prompt and reply hold.
func (s *Scheduler) Context() int { return s.slots.Context() }

// Status counts the slots and the queue.
type Status struct {
	Slots, Processing, Queued int
}

// Status says what the scheduler is doing now.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Slots: s.slots.Len(), Processing: s.running, Queued: len(s.queue)}
}

// Submit queues r. The generation runs until it ends or ctx is cancelled
// (the client went away), which frees its slot at the next step.
func (s *Scheduler) Submit(ctx context.Context, r Request) (*Stream, error) {
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("%w: the prompt is empty", ErrBadRequest)
	}
	if len(r.Prompt) > s.Context() {
		return nil, fmt.Errorf("%w: the prompt of %d tokens does not fit the context of %d tokens", ErrBadRequest, len(r.Prompt), s.Context())
	}
	for _, id := range r.Prompt {
		if id < 0 || int(id) >= s.slots.Vocab() {
			return nil, fmt.Errorf("%w: token id %d is outside the vocabulary of %d", ErrBadRequest, id, s.slots.Vocab())
		}
	}
	j := &job{ctx: ctx, req: r, out: newStream(), submitted: time.Now()}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, ErrClosed
	case s.running+len(s.queue) >= s.slots.Len()+s.maxQueue:
		s.mu.Unlock()
		return nil, ErrBusy
	}
	s.queue = append(s.queue, j)
	s.mu.Unlock()
	s.poke()
	return j.out, nil
}

// Close stops taking requests, lets the queued and running ones finish,
// and returns when the last has.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) loop() {
	defer close(s.done)
	for {
		s.admit()
		if s.idle() {
			s.mu.Lock()
			exit := s.closed && len(s.queue) == 0
			s.mu.Unlock()
			if exit {
				return
			}
			<-s.wake
			continue
		}
		s.step()
	}
}

func (s *Scheduler) idle() bool {
	for _, j := range s.active {
		if j != nil {
			return false
		}
	}
	return true
}

// admit drops the queued requests whose clients left and puts the first
// waiting ones on free slots.
func (s *Scheduler) admit() {
	s.mu.Lock()
	var started []*job
	q := s.queue[:0]
	for _, j := range s.queue {
		if j.ctx.Err() != nil {
			j.out.finish(Result{}, j.ctx.Err())
			continue
		}
		slot := s.pickSlot(j.req.Prompt)
		if slot < 0 {
			q = append(q, j)
			continue
		}
		j.slot = slot
		s.active[slot] = j
		s.running++
		started = append(started, j)
	}
	clear(s.queue[len(q):])
	s.queue = q
	s.mu.Unlock()

	for _, j := range started {
		p := j.req.Prompt
		// At least the prompt's last token is fed again, for its logits.
		keep := min(commonPrefix(s.cached[j.slot], p), len(p)-1)
		kept := s.slots.Keep(j.slot, keep)
		s.cached[j.slot] = s.cached[j.slot][:kept]
		j.start(s, p[kept:], kept)
	}
}

// pickSlot chooses the free slot whose cache shares the longest prefix with
// prompt, the longest idle among equals; -1 when none is free.
func (s *Scheduler) pickSlot(prompt []int32) int {
	best, bestLen := -1, -1
	for i, j := range s.active {
		if j != nil {
			continue
		}
		n := commonPrefix(s.cached[i], prompt)
		if n > bestLen || n == bestLen && s.lastUse[i] < s.lastUse[best] {
			best, bestLen = i, n
		}
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

// step feeds every busy slot (a prompt, or its last token), then chooses
// each one's next token.
func (s *Scheduler) step() {
	var work []Work
	for slot, j := range s.active {
		if j == nil {
			continue
		}
		if err := j.ctx.Err(); err != nil {
			s.free(j, err)
			continue
		}
		work = append(work, Work{Slot: slot, Tokens: j.feed})
	}
	if len(work) == 0 {
		return
	}
	if err := s.slots.Step(work); err != nil {
		// The caches of these slots are in doubt: empty them.
		for _, w := range work {
			s.slots.Keep(w.Slot, 0)
			s.cached[w.Slot] = s.cached[w.Slot][:0]
			s.free(s.active[w.Slot], err)
		}
		return
	}
	s.steps++
	for _, w := range work {
		s.cached[w.Slot] = append(s.cached[w.Slot], w.Tokens...)
		j := s.active[w.Slot]
		id, err := s.slots.Sample(w.Slot, j.sampler, j.history)
		if err != nil {
			s.free(j, err)
			continue
		}
		// A token the cache has no room for cannot be continued from.
		room := len(s.cached[w.Slot])+1 <= s.slots.Context()
		if done := j.accept(id, room); done {
			s.free(j, nil)
		}
	}
}

// free frees j's slot and ends j with err (nil: its result), in that order:
// a client told its request ended may send the next at once.
func (s *Scheduler) free(j *job, err error) {
	s.steps++
	s.lastUse[j.slot] = s.steps
	s.mu.Lock()
	s.active[j.slot] = nil
	s.running--
	s.mu.Unlock()
	j.end(err)
}

// job is one request on a slot: its sampler, the text decoded so far and
// the stop-string matcher.
type job struct {
	ctx       context.Context
	req       Request
	out       *Stream
	submitted time.Time

	slot    int
	sampler *sample.Sampler
	history []int32 // prompt and generated ids, for the repetition penalty
	feed    []int32 // what the next step feeds
	dec     *tokenizer.StreamDecoder
	stops   *engine.StopStrings
	isEnd   func(int32) bool
	res     Result
	first   time.Time
}

func (j *job) start(s *Scheduler, feed []int32, cached int) {
	r := j.req
	j.sampler = sample.New(r.Sampling, s.slots.Vocab())
	j.history = append(make([]int32, 0, len(r.Prompt)+64), r.Prompt...)
	j.feed = feed
	j.dec = s.tok.NewStreamDecoder()
	j.stops = engine.NewStopStrings(r.Stop)
	j.res = Result{PromptTokens: len(r.Prompt), CachedTokens: cached, Slot: j.slot}
	j.isEnd = func(id int32) bool { return false }
	if !r.IgnoreEOS {
		end := map[int32]bool{}
		for _, id := range r.EndTokens {
			end[id] = true
		}
		j.isEnd = func(id int32) bool { return s.isEOG(id) || end[id] }
	}
}

// accept takes the chosen token; room says the cache could feed it. It
// reports whether the generation is over.
func (j *job) accept(id int32, room bool) bool {
	if j.res.CompletionTokens == 0 {
		j.first = time.Now()
	}
	j.res.CompletionTokens++
	if j.isEnd(id) {
		j.res.Finish = FinishStop
		return true
	}
	text, stopped := j.stops.Add(j.dec.Add(id))
	j.out.push(text)
	if stopped {
		j.res.Finish = FinishStop
		return true
	}
	if !room || j.req.MaxTokens >= 0 && j.res.CompletionTokens >= j.req.MaxTokens {
		j.res.Finish = FinishLength
		return true
	}
	j.history = append(j.history, id)
	j.feed = j.history[len(j.history)-1:]
	return false
}

// end sends what the decoder and the stop strings held back (as the CLI
// prints it) and the result.
func (j *job) end(err error) {
	if err == nil && !j.stops.Stopped() {
		text, _ := j.stops.Add(j.dec.Flush())
		j.out.push(text + j.stops.Flush())
	}
	if !j.first.IsZero() {
		j.res.TTFT = j.first.Sub(j.submitted)
	}
	j.res.Elapsed = time.Since(j.submitted)
	j.out.finish(j.res, err)
}

// Stream is a generation's text as it is made, then its Result. The
// scheduler never waits for a reader: text piles up until it is read, so a
// slow client delays nobody else.
type Stream struct {
	mu   sync.Mutex
	text strings.Builder
	done bool
	res  Result
	err  error
	wake chan struct{}
}

func newStream() *Stream { return &Stream{wake: make(chan struct{}, 1)} }

func (s *Stream) push(text string) {
	if text == "" {
		return
	}
	s.mu.Lock()
	s.text.WriteString(text)
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) finish(res Result, err error) {
	s.mu.Lock()
	s.done, s.res, s.err = true, res, err
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next waits for text or the end. It returns the text made since the last
// call; once that is all read, done is true and err says why it ended
// (nil: it finished, see Result). It returns ctx's error if ctx ends first.
func (s *Stream) Next(ctx context.Context) (text string, done bool, err error) {
	for {
		s.mu.Lock()
		text = s.text.String()
		s.text.Reset()
		done, err = s.done, s.err
		s.mu.Unlock()
		if text != "" {
			return text, false, nil
		}
		if done {
			return "", true, err
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return "", true, ctx.Err()
		}
	}
}

// Result is the finished generation's result (valid once Next said done).
func (s *Stream) Result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// Wait waits for the end, dropping unread text, and returns the result.
func (s *Stream) Wait() Result {
	for {
		if _, done, _ := s.Next(context.Background()); done {
			return s.Result()
		}
	}
}
