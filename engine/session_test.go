package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/sample"
)

// gated is a model whose Decode waits for the test: it says when a step
// starts and runs it only when released, so a test can cancel mid-step.
type gated struct {
	engine.Model
	started chan int // the number of tokens of each step
	release chan struct{}
}

func (g *gated) Decode(batch []engine.Item) error {
	g.started <- len(batch)
	<-g.release
	return g.Model.Decode(batch)
}

// Cancelling stops a generation within one step: a context cancelled
// between steps runs no further step; one cancelled during a step lets that
// step finish (its tokens stay in the session, which stays consistent) and
// runs no other. The session then goes on as if nothing happened.
func TestCancelStopsWithinOneStep(t *testing.T) {
	g := &gated{Model: newCounter(64, 100, 1), started: make(chan int, 1), release: make(chan struct{})}
	e := newEngine(t, g)
	s := newSession(t, e, engine.SessionOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		tm  engine.Timing
		err error
	}
	done := make(chan result, 1)
	go func() {
		tm, err := s.Generate(ctx, []int32{1, 2, 3}, engine.Options{MaxTokens: 50})
		done <- result{tm, err}
	}()
	if n := <-g.started; n != 3 { // the prefill
		t.Fatalf("first step of %d tokens, want the prompt's 3", n)
	}
	g.release <- struct{}{}
	for range 3 { // three decode steps
		<-g.started
		g.release <- struct{}{}
	}
	<-g.started // the fifth step is under way: cancel it now
	cancel()
	g.release <- struct{}{}
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Generate after cancel: %v, want context.Canceled", r.err)
	}
	select {
	case n := <-g.started:
		t.Fatalf("a step of %d tokens ran after the cancel", n)
	default:
	}
	// prompt 3 + 4 chosen, of which 4 were fed; the fifth chosen token was
	// never chosen (its step's logits are dropped).
	if len(r.tm.Generated) != 4 || s.Len() != 3+4 {
		t.Fatalf("%d generated, session of %d; want 4 and 7", len(r.tm.Generated), s.Len())
	}
	// A context already cancelled runs nothing.
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on a cancelled context: %v", err)
	}
	go func() {
		_, err := s.Next(t.Context())
		done <- result{err: err}
	}()
	<-g.started
	g.release <- struct{}{}
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	if got := g.Model.(*counter).held(t, 0); len(got) != 7 { // the last chosen is pending
		t.Fatalf("cache holds %v after going on", got)
	}
}

// Sessions decoding together (continuous batching, here with every kind
// of work at once: prefills, greedy and sampled decoding, forks and
// truncations, from many goroutines) give each session the ids it gets
// alone. The model is quantised and the cache per-stream, so a row's bits
// do not depend on its batch-mates (quantised matmuls sum each row alone;
// a stream's cells sit where they sit alone) — the ids must be equal.
// Run with -race, this is the engine's concurrency test.
func TestSessionsTogetherMatchAlone(t *testing.T) {
	const seqs, n = 6, 24
	m := synthModel(t, "Q4_0", 7, layers.Options{Context: 96 * seqs, Seqs: seqs, Layout: kvcache.PerStream})
	e := newEngine(t, m)
	prompts := make([][]int32, seqs)
	params := make([]sample.Params, seqs)
	for i := range prompts {
		for j := range 3 + 5*i {
			prompts[i] = append(prompts[i], int32(1+(7*i+3*j)%250))
		}
		params[i] = sample.Params{Temp: 0, RepeatPenalty: 1}
		if i%2 == 1 {
			params[i] = sample.Params{Temp: 0.9, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, RepeatLastN: 16, Seed: uint64(i)}
		}
	}
	run := func(i int) ([]int32, error) {
		s, err := e.NewSession(engine.SessionOptions{})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		tm, err := s.Generate(t.Context(), prompts[i], engine.Options{MaxTokens: n, Sampler: sample.New(params[i], e.Vocab())})
		return tm.Generated, err
	}
	alone := make([][]int32, seqs)
	for i := range seqs {
		var err error
		if alone[i], err = run(i); err != nil {
			t.Fatal(err)
		}
	}
	together := make([][]int32, seqs)
	errs := make([]error, seqs)
	var wg sync.WaitGroup
	for i := range seqs {
		wg.Go(func() { together[i], errs[i] = run(i) })
	}
	wg.Wait()
	for i := range seqs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !slices.Equal(together[i], alone[i]) {
			t.Errorf("session %d: together %v\nalone %v", i, together[i], alone[i])
		}
	}
	// Fork and Truncate while others decode: a fork continues as its
	// parent does, and a truncated session regenerates what it had.
	var fails []string
	var mu sync.Mutex
	fail := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fails = append(fails, fmt.Sprintf(f, a...))
	}
	for i := range 3 {
		wg.Go(func() {
			s, err := e.NewSession(engine.SessionOptions{})
			if err != nil {
				fail("%v", err)
				return
			}
			defer s.Close()
			if _, err := s.Generate(t.Context(), prompts[2*i], engine.Options{MaxTokens: 5}); err != nil {
				fail("%v", err)
				return
			}
			f, err := s.Fork()
			if err != nil {
				fail("%v", err)
				return
			}
			defer f.Close()
			a, err1 := s.Generate(t.Context(), nil, engine.Options{MaxTokens: 8})
			b, err2 := f.Generate(t.Context(), nil, engine.Options{MaxTokens: 8})
			if err1 != nil || err2 != nil || !slices.Equal(a.Generated, b.Generated) || !slices.Equal(a.Generated, alone[2*i][5:13]) {
				fail("session %d: fork %v, parent %v, alone %v (%v, %v)", 2*i, b.Generated, a.Generated, alone[2*i][5:13], err1, err2)
			}
			if err := s.Truncate(len(prompts[2*i]) + 2); err != nil {
				fail("%v", err)
				return
			}
			c, err := s.Generate(t.Context(), nil, engine.Options{MaxTokens: 6})
			if err != nil || !slices.Equal(c.Generated, alone[2*i][2:8]) {
				fail("session %d truncated: %v, want %v (%v)", 2*i, c.Generated, alone[2*i][2:8], err)
			}
		})
	}
	wg.Wait()
	for _, f := range fails {
		t.Error(f)
	}
}

// A session's State, loaded into another session — of another engine
// over the same file — continues exactly as the original does (per-stream
// caches: the cells land where they were). States of another model, and
// truncated or padded ones, are refused with ErrState and change nothing.
func TestStateRoundTrip(t *testing.T) {
	o := layers.Options{Context: 128, Seqs: 2, Layout: kvcache.PerStream}
	e1 := newEngine(t, synthModel(t, "F32", 3, o))
	e2 := newEngine(t, synthModel(t, "F32", 3, o))
	other := newEngine(t, synthModel(t, "F32", 4, o))
	ctx := t.Context()
	a := newSession(t, e1, engine.SessionOptions{})
	if _, err := a.Generate(ctx, []int32{1, 5, 9, 12}, engine.Options{MaxTokens: 6}); err != nil {
		t.Fatal(err)
	}
	state, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	b := newSession(t, e2, engine.SessionOptions{})
	if err := b.LoadState(state); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Tokens(), b.Tokens()) {
		t.Fatalf("loaded tokens %v, want %v", b.Tokens(), a.Tokens())
	}
	la, lb := make([]float32, e1.Vocab()), make([]float32, e1.Vocab())
	for step := range 5 {
		if err := a.Logits(ctx, la); err != nil {
			t.Fatal(err)
		}
		if err := b.Logits(ctx, lb); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(la, lb) {
			t.Fatalf("step %d: the loaded session's logits differ", step)
		}
		next := []int32{sample.Argmax(la)}
		a.Prefill(ctx, next)
		b.Prefill(ctx, next)
	}
	c := newSession(t, other, engine.SessionOptions{})
	bad := map[string][]byte{
		"another model's":   state,
		"truncated":         state[:len(state)-3],
		"padded":            append(slices.Clone(state), 1, 2),
		"cut in the tokens": state[:20],
		"not a state":       []byte("GGUF and more bytes than a header"),
	}
	for name, st := range bad {
		target := b
		if name == "another model's" {
			target = c
		}
		before := target.Tokens()
		if err := target.LoadState(st); !errors.Is(err, engine.ErrState) {
			t.Errorf("%s state: %v, want ErrState", name, err)
		}
		if !slices.Equal(before, target.Tokens()) {
			t.Errorf("%s state changed the session", name)
		}
	}
	if err := b.Logits(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if err := a.Logits(ctx, la); err != nil || !slices.Equal(la, lb) {
		t.Fatalf("after the refused states the session differs (%v)", err)
	}
}

// The past/present form: running a sequence in chunks, each after the
// state the last returned (positions continuing at its length, the causal
// mask offset), gives the logits of running it whole, to F32 rounding.
func TestForwardChunked(t *testing.T) {
	e := newEngine(t, synthModel(t, "F32", 3, layers.Options{Context: 64}))
	ids := []int32{1, 40, 33, 7, 99, 12, 5, 61, 18, 2, 77}
	whole, _, err := e.Forward(t.Context(), nil, ids)
	if err != nil {
		t.Fatal(err)
	}
	var past []byte
	var got []float32
	for _, chunk := range [][]int32{ids[:4], ids[4:5], ids[5:9], ids[9:]} {
		if got, past, err = e.Forward(t.Context(), past, chunk); err != nil {
			t.Fatal(err)
		}
	}
	for i := range whole {
		if d := math.Abs(float64(got[i] - whole[i])); d > 1e-4 {
			t.Fatalf("logit %d: chunked %v, whole %v", i, got[i], whole[i])
		}
	}
}

// Sessions are bounded by the model's sequences, and a closed session's
// sequence is free again.
func TestSessionLimits(t *testing.T) {
	e := newEngine(t, newCounter(16, 10, 2))
	a := newSession(t, e, engine.SessionOptions{})
	b, err := e.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.NewSession(engine.SessionOptions{}); err == nil {
		t.Fatal("a third session on two sequences")
	}
	b.Close()
	c := newSession(t, e, engine.SessionOptions{})
	if a.Seq() == c.Seq() {
		t.Fatal("two open sessions share a sequence")
	}
	if err := a.Prefill(t.Context(), []int32{10}); err == nil {
		t.Fatal("a token outside the vocabulary was accepted")
	}
	if _, err := a.Next(t.Context()); err == nil {
		t.Fatal("Next of an empty session")
	}
}

// Continuous batching gathers: sessions generating side by side stay in
// one step — a step waits for the sessions the last one served, which ask
// again as soon as they have picked their token. (The wait is bounded by a
// fraction of a step; here it is long, so that the test does not depend on
// how fast goroutines wake.) Three sessions queue while a fourth's prefill
// holds the model; from then on every step holds all three.
func TestStepsGatherSessions(t *testing.T) {
	defer engine.SetGather(0)
	g := &gated{Model: newCounter(64, 100, 4), started: make(chan int, 1), release: make(chan struct{})}
	e := newEngine(t, g)
	step := func() int {
		select {
		case n := <-g.started:
			g.release <- struct{}{}
			return n
		case <-time.After(20 * time.Second):
			t.Fatal("no step for 20 s")
			return 0
		}
	}
	var ss []*engine.Session
	for i := range 3 {
		s := newSession(t, e, engine.SessionOptions{})
		go func() { step() }()
		if err := s.Prefill(t.Context(), []int32{int32(i), 1, 2}); err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	blocker := newSession(t, e, engine.SessionOptions{})
	done := make(chan error, 1)
	go func() {
		err := blocker.Prefill(t.Context(), []int32{9, 9})
		blocker.Close() // it will not ask again: no step waits for it
		done <- err
	}()
	if n := <-g.started; n != 2 {
		t.Fatalf("the blocker's step has %d tokens", n)
	}
	engine.SetGather(5 * time.Second)
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			for range 10 { // the first token comes from the prefill
				if _, err := s.Next(t.Context()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // let them queue behind the blocker
	g.release <- struct{}{}
	var sizes []int
	for total := 0; total < 27; {
		n := step()
		sizes = append(sizes, n)
		total += n
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		if n != 3 {
			t.Fatalf("steps of %v: want every one of the 3 sessions in each", sizes)
		}
	}
}

// A long prompt does not stall a session decoding beside it: it is fed in
// chunks of the step's budget, each sharing its step with the other
// session's token, which comes first. Stats count the steps and tokens.
func TestLongPromptSharesSteps(t *testing.T) {
	defer engine.SetGather(0)
	g := &gated{Model: newCounter(64, 100, 3), started: make(chan int, 1), release: make(chan struct{})}
	e := newEngine(t, g)
	e.SetStepTokens(16)
	step := func() int {
		select {
		case n := <-g.started:
			g.release <- struct{}{}
			return n
		case <-time.After(20 * time.Second):
			t.Fatal("no step for 20 s")
			return 0
		}
	}
	dec := newSession(t, e, engine.SessionOptions{})
	go func() { step() }()
	if err := dec.Prefill(t.Context(), []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	blocker := newSession(t, e, engine.SessionOptions{})
	done := make(chan error, 2)
	go func() {
		err := blocker.Prefill(t.Context(), []int32{9})
		blocker.Close()
		done <- err
	}()
	if n := <-g.started; n != 1 {
		t.Fatalf("the blocker's step has %d tokens", n)
	}
	engine.SetGather(5 * time.Second)
	long := newSession(t, e, engine.SessionOptions{})
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(1 + i%90)
	}
	go func() {
		err := long.Prefill(t.Context(), prompt)
		if err == nil && long.Fed() != len(prompt) {
			err = fmt.Errorf("the long session fed %d tokens of %d", long.Fed(), len(prompt))
		}
		long.Close() // it will not ask again: no step waits for it
		done <- err
	}()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 10 { // the first token comes from the prefill: 9 steps
			if _, err := dec.Next(t.Context()); err != nil {
				t.Error(err)
			}
		}
	})
	time.Sleep(50 * time.Millisecond) // let both queue behind the blocker
	before := e.Stats()
	g.release <- struct{}{}
	var sizes []int
	for total := 0; total < 9+len(prompt); {
		n := step()
		sizes = append(sizes, n)
		total += n
	}
	wg.Wait()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// 15 prompt tokens beside the decoding token, twice, then the last 10
	// beside it; then the decoding session alone.
	if want := []int{16, 16, 11, 1, 1, 1, 1, 1, 1}; !slices.Equal(sizes, want) {
		t.Fatalf("steps of %v tokens, want %v", sizes, want)
	}
	after := e.Stats()
	if d := (engine.Stats{Steps: after.Steps - before.Steps, Tokens: after.Tokens - before.Tokens}); d != (engine.Stats{Steps: 10, Tokens: 50}) {
		t.Errorf("stats moved by %+v over the blocker's step and these, want 10 steps of 50 tokens", d)
	}
}

// A decode step through a session allocates nothing: the request, its
// channel and the model's buffers are reused (the session's token lists
// grow by doubling, which AllocsPerRun's average rounds away).
func TestNextAllocatesNothing(t *testing.T) {
	e := newEngine(t, synthModel(t, "Q4_0", 7, layers.Options{Context: 256}))
	s := newSession(t, e, engine.SessionOptions{})
	if err := s.Prefill(t.Context(), []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Next(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per token", allocs)
	}
}
