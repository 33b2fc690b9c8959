package grammar

import (
	"errors"
	"math"
	"testing"

	"github.com/glint-llm/glint/engine"
)

// TestConstrain drives the hooks by hand: forbidden tokens get -Inf, the
// end token only where the text is complete, and nothing but it once
// nothing may follow.
func TestConstrain(t *testing.T) {
	const eog = 4
	vocab := [][]byte{[]byte("y"), []byte("e"), []byte("s"), []byte("yes"), nil, []byte("no"), []byte(" ")}
	o := engine.Options{EOG: func(id int32) bool { return id == eog }}
	var chosen []int32
	o.Hooks.Chosen = func(_ []float32, id int32) error { chosen = append(chosen, id); return nil }
	m := NewMatcher(mustParse(t, `root ::= "yes" " "?`), NewTrie(vocab))
	if err := Constrain(&o, m); err != nil {
		t.Fatal(err)
	}
	step := func(want ...int32) []float32 {
		t.Helper()
		logits := make([]float32, len(vocab))
		for i := range logits {
			logits[i] = float32(i)
		}
		if err := o.Hooks.Logits(logits); err != nil {
			t.Fatal(err)
		}
		for i, l := range logits {
			finite := !math.IsInf(float64(l), -1)
			allowed := false
			for _, w := range want {
				allowed = allowed || w == int32(i)
			}
			if finite != allowed || finite && l != float32(i) {
				t.Errorf("after %v: token %d logit %v, allowed %v", chosen, i, l, allowed)
			}
		}
		return logits
	}
	logits := step(0, 3)
	if err := o.Hooks.Chosen(logits, 5); !errors.Is(err, ErrRejected) {
		t.Errorf("a forbidden token: %v", err)
	}
	if err := o.Hooks.Chosen(logits, 3); err != nil {
		t.Fatal(err)
	}
	logits = step(6, eog)
	if err := o.Hooks.Chosen(logits, 6); err != nil {
		t.Fatal(err)
	}
	step(eog)
	if len(chosen) != 2 || chosen[0] != 3 || chosen[1] != 6 {
		t.Errorf("the earlier Chosen hook saw %v, want [3 6]", chosen)
	}

	// Without end tokens, a finished text is an error, not a silent -Inf row.
	o = engine.Options{}
	m = NewMatcher(mustParse(t, `root ::= "yes"`), NewTrie(vocab))
	if err := Constrain(&o, m); err != nil {
		t.Fatal(err)
	}
	m.Accept([]byte("yes"))
	if err := o.Hooks.Logits(make([]float32, len(vocab))); !errors.Is(err, ErrNoEnd) {
		t.Errorf("done without an end token: %v", err)
	}
}

// TestTrim: a matcher whose caches overflow starts them afresh and goes
// on exactly as before.
func TestTrim(t *testing.T) {
	defer func(n int) { maxStates = n }(maxStates)
	maxStates = 8
	g := JSONObject()
	vocab := smallVocab()
	trie := NewTrie(vocab)
	doc := []byte(`{"a": [1, 2.5, {"b": [true, null, "x\u00e9"]}], "c": {}}`)
	m := NewMatcher(g, trie)
	mask, ref := NewMask(len(vocab)), NewMask(len(vocab))
	for i := range doc {
		if err := m.Accept(doc[i : i+1]); err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
		m.Allowed(mask)
		fresh := NewMatcher(g, trie)
		if err := fresh.Accept(doc[:i+1]); err != nil {
			t.Fatal(err)
		}
		fresh.Allowed(ref)
		for w := range mask {
			if mask[w] != ref[w] {
				t.Fatalf("after %q: masks differ", doc[:i+1])
			}
		}
	}
	if !m.IsComplete() || len(m.states) > 4*maxStates {
		t.Errorf("complete %v, %d states", m.IsComplete(), len(m.states))
	}
}
