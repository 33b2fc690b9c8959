package glint_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/synth"
)

// TestNgramSimpleStories: ngram-simple drafts (--draft-max 8) on the real
// stories260K give plain greedy decoding's 200 ids after "Once upon a time",
// with the default sizes (patterns of 12 tokens down to 1) and with
// twelve-token patterns alone, as llama.cpp's ngram-simple looks up. The
// defaults take at least 1.3 tokens per target pass, the figure
// llama-lookup reaches on the same prompt (1.31) with its n-grams of 1 to 4
// tokens; twelve-token patterns alone rarely recur in 200 tokens of this
// story (1.06).
func TestNgramSimpleStories(t *testing.T) {
	path := shared.Models(t, "stories260K/stories260K.gguf")
	ctx := context.Background()
	var plain []int32
	for _, n := range []int{0, 12} {
		m, err := glint.Open(path, glint.Options{Threads: 2, Spec: glint.SpecOptions{Type: "ngram-simple", DraftMax: 8, NgramN: n, NgramMin: n}})
		if err != nil {
			t.Fatal(err)
		}
		prompt := m.Tokenizer.Encode("Once upon a time", true)
		if plain == nil {
			tm, err := engine.Generate(ctx, m.Engine, prompt, engine.Options{MaxTokens: 200})
			if err != nil {
				t.Fatal(err)
			}
			plain = tm.Generated
		}
		sp, done, err := m.Speculation()
		if err != nil {
			t.Fatal(err)
		}
		spec, err := engine.Generate(ctx, m.Engine, prompt, engine.Options{MaxTokens: 200, Speculative: sp})
		done()
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(spec.Generated, plain) {
			t.Fatalf("n=%d: speculative ids differ from plain decoding's:\n%v\n%v", n, spec.Generated, plain)
		}
		perPass := float64(len(spec.Generated)) / float64(spec.Passes)
		t.Logf("--spec-ngram-size-n %d: %d tokens in %d target passes (drafted %d, accepted %d): %.2f tokens per pass",
			n, len(spec.Generated), spec.Passes, spec.Drafted, spec.Accepted, perPass)
		if n == 0 && perPass < 1.3 {
			t.Errorf("%.2f tokens per target pass, want ≥ 1.3", perPass)
		}
	}
}

// TestDraftModelIncompatible: a draft model whose vocabulary is not the
// target's is refused at Open with the difference named, as llama.cpp's
// speculative example refuses it.
func TestDraftModelIncompatible(t *testing.T) {
	dir := t.TempDir()
	target, draft := dir+"/t.gguf", dir+"/d.gguf"
	if err := synth.WriteGGUF(target, synth.Options{Shape: "tiny", Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(draft, synth.Options{Shape: "tiny", Seed: 1, VocabGGUF: shared.Models(t, "stories260K/stories260K.gguf")}); err != nil {
		t.Fatal(err)
	}
	_, err := glint.Open(target, glint.Options{Threads: 1, Spec: glint.SpecOptions{DraftModel: draft}})
	if err == nil || !strings.Contains(err.Error(), "draft model") || !strings.Contains(err.Error(), "tokenizer:") {
		t.Fatalf("Open with an incompatible draft: %v, want the tokenizer's difference", err)
	}
	m, err := glint.Open(target, glint.Options{Threads: 1, Spec: glint.SpecOptions{DraftModel: target}})
	if err != nil {
		t.Fatalf("Open drafted by itself: %v", err)
	}
	m.Close()
	if _, err := glint.Open(target, glint.Options{Spec: glint.SpecOptions{Type: "eagle"}}); err == nil || !strings.Contains(err.Error(), "spec-type") {
		t.Fatalf("unknown --spec-type: %v", err)
	}
}

// fixedDrafter drafts the next tokens of a known continuation, or, wrong,
// tokens that are not it.
type fixedDrafter struct {
	prompt, want []int32
	wrong        bool
}

func (d fixedDrafter) Draft(_ context.Context, tokens []int32, max int) ([]int32, error) {
	at := len(tokens) - len(d.prompt) // generated so far
	var out []int32
	for i := at; i < len(d.want) && len(out) < max; i++ {
		t := d.want[i]
		if d.wrong {
			t = (t + 1) % 512
		}
		out = append(out, t)
	}
	return out, nil
}

// TestAdaptiveDraftLength: with Adaptive, drafts that are always rejected
// shrink to the occasional probe, drafts that are always right stay at
// Max, and both give plain decoding's ids.
func TestAdaptiveDraftLength(t *testing.T) {
	path := shared.Models(t, "stories260K/stories260K.gguf")
	m, err := glint.Open(path, glint.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	const n = 96
	plain, err := engine.Generate(ctx, m.Engine, prompt, engine.Options{MaxTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		wrong, adaptive bool
	}{{true, false}, {true, true}, {false, false}, {false, true}} {
		sp := &engine.Speculative{Drafter: fixedDrafter{prompt, plain.Generated, c.wrong}, Max: 8, Adaptive: c.adaptive}
		tm, err := engine.Generate(ctx, m.Engine, prompt, engine.Options{MaxTokens: n, Speculative: sp})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tm.Generated, plain.Generated) {
			t.Fatalf("wrong %v adaptive %v: ids differ from plain decoding's", c.wrong, c.adaptive)
		}
		t.Logf("wrong %v adaptive %v: %d passes, drafted %d, accepted %d", c.wrong, c.adaptive, tm.Passes, tm.Drafted, tm.Accepted)
		switch {
		case c.wrong && c.adaptive && tm.Drafted > n/4:
			t.Errorf("always-rejected drafts: %d drafted in %d tokens, want the length to shrink to probes", tm.Drafted, n)
		case !c.wrong && c.adaptive && tm.Passes > n/8+4: // a few steps to learn the drafts are good
			t.Errorf("always-accepted drafts: %d passes for %d tokens, want drafts of 8 kept", tm.Passes, n)
		case c.wrong && !c.adaptive && tm.Drafted < n*6:
			t.Errorf("fixed length: %d drafted, want 8 a step", tm.Drafted)
		}
	}
}
