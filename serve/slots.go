package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/sample"
)

// Slots are the sequences a Scheduler decodes: Len of them, each a KV cache
// of the tokens fed to it so far. The scheduler owns the bookkeeping of
// which tokens each slot holds; an implementation only runs the forward
// passes. Step takes the work of every busy slot at once, so that an
// implementation over a batched forward decodes them together.
type Slots interface {
	// Len is the number of slots.
	Len() int
	// Context is the most tokens one slot holds.
	Context() int
	// Vocab is the number of logits per token.
	Vocab() int
	// Keep cuts the slot's sequence to at most its first n tokens and
	// returns how many it kept: n, or fewer (0: emptied) where the cache
	// cannot drop a suffix.
	Keep(slot, n int) int
	// Step feeds each listed slot its tokens (a prompt, or one generated
	// token), at most one Work per slot, and readies each one's last
	// logits for Sample.
	Step(work []Work) error
	// Sample chooses a slot's next token from its ready logits: on the
	// device where the choice is greedy, else with s over history.
	Sample(slot int, s *sample.Sampler, history []int32) (int32, error)
}

// Work is what one slot is fed in a step.
type Work struct {
	Slot   int
	Tokens []int32
}

// modelSlots are slots over engine sessions, one per loaded model: today
// --parallel N loads the model N times, one sequence each, and steps their
// forward passes side by side.
type modelSlots struct {
	sessions []*engine.Session
	logits   [][]float32
	vocab    int
	context  int
}

// newModelSlots makes one slot per session; all must have the same context
// and vocabulary.
func newModelSlots(sessions []*engine.Session, vocab, context int) (*modelSlots, error) {
	if len(sessions) == 0 {
		return nil, errors.New("serve: no models")
	}
	return &modelSlots{sessions: sessions, logits: make([][]float32, len(sessions)), vocab: vocab, context: context}, nil
}

func (s *modelSlots) Len() int     { return len(s.sessions) }
func (s *modelSlots) Context() int { return s.context }
func (s *modelSlots) Vocab() int   { return s.vocab }

// Keep drops the slot's tokens after the first n.
func (s *modelSlots) Keep(slot, n int) int {
	sess := s.sessions[slot]
	n = min(n, sess.Len())
	if err := sess.Truncate(n); err != nil {
		sess.Truncate(0)
		return 0
	}
	return n
}

func (s *modelSlots) Step(work []Work) error {
	errs := make([]error, len(work))
	var wg sync.WaitGroup
	for i, w := range work {
		wg.Go(func() {
			if err := s.sessions[w.Slot].Prefill(context.Background(), w.Tokens); err != nil {
				errs[i] = fmt.Errorf("slot %d: %w", w.Slot, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Sample decides between the device's argmax and the host's sampler as
// engine.Generate does, so that greedy requests give the CLI's tokens.
func (s *modelSlots) Sample(slot int, smp *sample.Sampler, history []int32) (int32, error) {
	sess := s.sessions[slot]
	if smp.Greedy() {
		return sess.Argmax(context.Background())
	}
	if s.logits[slot] == nil {
		s.logits[slot] = make([]float32, s.vocab)
	}
	if err := sess.Logits(context.Background(), s.logits[slot]); err != nil {
		return 0, err
	}
	return smp.Sample(s.logits[slot], history), nil
}
