package grammar

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/glint-llm/glint/engine"
)

// ErrNoEnd is returned (wrapped) by a step whose text is complete, with
// nothing more the grammar allows, when the generation has no end token
// to choose (--ignore-eos).
var ErrNoEnd = errors.New("grammar: the text is complete and no end token may end it")

// Constrain makes the generation o configures follow m: each step's
// logits of tokens the grammar forbids become -Inf, the end tokens (o.EOG,
// o.EndTokens) are allowed only where the text is complete, and are the
// only choice once nothing else may follow; each chosen token advances m.
// Hooks already in o.Hooks keep running: Logits before the mask (it sees
// the model's logits), Chosen after m accepted the token. m's vocabulary
// (its Trie) must be the model's.
func Constrain(o *engine.Options, m *Matcher) error {
	if m.trie == nil {
		return errors.New("grammar: the matcher has no vocabulary (NewMatcher with a Trie)")
	}
	n := m.trie.Size()
	var ends []int32
	for id := range int32(n) {
		if o.EOG != nil && o.EOG(id) || slices.Contains(o.EndTokens, id) {
			ends = append(ends, id)
		}
	}
	mask := NewMask(n)
	saved := make([]float32, len(ends))
	prevLogits, prevChosen := o.Hooks.Logits, o.Hooks.Chosen
	o.Hooks.Logits = func(logits []float32) error {
		if prevLogits != nil {
			if err := prevLogits(logits); err != nil {
				return err
			}
		}
		if len(logits) != n {
			return fmt.Errorf("grammar: %d logits for a vocabulary of %d tokens", len(logits), n)
		}
		for i, e := range ends {
			saved[i] = logits[e]
		}
		if m.Done() {
			clear(mask)
		} else {
			m.Allowed(mask)
		}
		if err := m.Err(); err != nil {
			return err
		}
		anyText := applyMask(logits, mask)
		if m.IsComplete() {
			for i, e := range ends {
				logits[e] = saved[i]
			}
			if len(ends) == 0 && !anyText {
				return ErrNoEnd
			}
		} else if !anyText {
			return fmt.Errorf("grammar: no token of the vocabulary can continue the text")
		}
		return nil
	}
	o.Hooks.Chosen = func(logits []float32, id int32) error {
		if err := m.AcceptToken(id); err != nil {
			return err
		}
		if prevChosen != nil {
			return prevChosen(logits, id)
		}
		return nil
	}
	return nil
}

// applyMask sets the logits of the tokens not in mask to -Inf and reports
// whether any token is in it.
func applyMask(logits []float32, mask Mask) bool {
	inf := float32(math.Inf(-1))
	anyIn := false
	for w, bits := range mask {
		if bits == ^uint64(0) {
			anyIn = true
			continue
		}
		anyIn = anyIn || bits != 0
		base := w << 6
		for b := range 64 {
			if i := base + b; bits>>b&1 == 0 && i < len(logits) {
				logits[i] = inf
			}
		}
	}
	return anyIn
}
