package serve

import (
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

// modelSlots are slots over engine.Models, one sequence each: today's
// engine has one KV cache per loaded model, so --parallel N loads the model
// N times and steps their forward passes side by side.
type modelSlots struct {
	models []engine.Model
	logits [][]float32
}

// newModelSlots makes one slot per model; all must have the same context
// and vocabulary.
func newModelSlots(models []engine.Model) (*modelSlots, error) {
	if len(models) == 0 {
		return nil, errors.New("serve: no models")
	}
	s := &modelSlots{models: models, logits: make([][]float32, len(models))}
	for i, m := range models {
		if m.Context() != models[0].Context() || m.Vocab() != models[0].Vocab() {
			return nil, fmt.Errorf("serve: slot %d: context %d, vocab %d differ from slot 0's %d, %d",
				i, m.Context(), m.Vocab(), models[0].Context(), models[0].Vocab())
		}
	}
	return s, nil
}

func (s *modelSlots) Len() int     { return len(s.models) }
func (s *modelSlots) Context() int { return s.models[0].Context() }
func (s *modelSlots) Vocab() int   { return s.models[0].Vocab() }

// Keep keeps the whole cache or nothing: an engine.Model's cache only
// appends.
func (s *modelSlots) Keep(slot, n int) int {
	m := s.models[slot]
	if n >= m.Pos() {
		return m.Pos()
	}
	m.Reset()
	return 0
}

func (s *modelSlots) Step(work []Work) error {
	errs := make([]error, len(work))
	var wg sync.WaitGroup
	for i, w := range work {
		wg.Go(func() {
			if err := s.models[w.Slot].Eval(w.Tokens); err != nil {
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
	m := s.models[slot]
	if smp.Greedy() {
		return m.Argmax()
	}
	if s.logits[slot] == nil {
		s.logits[slot] = make([]float32, m.Vocab())
	}
	if err := m.Logits(s.logits[slot]); err != nil {
		return 0, err
	}
	return smp.Sample(s.logits[slot], history), nil
}
