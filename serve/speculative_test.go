package serve

import (
	"context"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/internal/shared"
)

// TestSpeculativeSlots: a server whose slots draft with ngram-simple gives
// each concurrent greedy completion the CLI's text (plain decoding), the
// verifications batched with the other slots' steps, and reports the
// drafts in usage.completion_tokens_details as accepted and rejected
// prediction tokens.
func TestSpeculativeSlots(t *testing.T) {
	speculativeSlots(t, glint.SpecOptions{Type: "ngram-simple", DraftMax: 8, NgramN: 1, NgramM: 8}, 2,
		[]string{"Once upon a time", "Lily had a red ball and she liked to play with it in the park", "The dog", "One day"})
}

// TestSpeculativeDraftSlots: the same with a draft model (-md: stories260K's
// Q4_0 drafting its float original), 8 concurrent requests on 8 slots.
func TestSpeculativeDraftSlots(t *testing.T) {
	draft := shared.Models(t, "stories260K/stories260K-Q4_0.gguf")
	speculativeSlots(t, glint.SpecOptions{DraftModel: draft, DraftMax: 8}, 8,
		[]string{"Once upon a time", "Lily had a red ball", "The dog", "One day", "Tom and Sue", "The sun was", "A little bird", "Mom said"})
}

func speculativeSlots(t *testing.T, spec glint.SpecOptions, parallel int, prompts []string) {
	path := stories(t)
	o := glintOpts
	o.StepTokens = 16
	o.Context = 128 * parallel // every prompt and its 64 tokens at once
	o.Spec = spec
	m, err := Load(path, LoadOptions{Options: o, Parallel: parallel, Queue: 2 * parallel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ts := start(t, m, Options{})
	const n = 64
	type out struct {
		text string
		u    openai.CompletionUsage
		err  error
	}
	got := make([]out, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			c, err := ts.client.Completions.New(context.Background(), completionParams(p, n), greedy...)
			if err != nil {
				got[i].err = err
				return
			}
			got[i] = out{text: c.Choices[0].Text, u: c.Usage}
		})
	}
	wg.Wait()
	accepted := int64(0)
	for i, p := range prompts {
		if got[i].err != nil {
			t.Fatalf("%q: %v", p, got[i].err)
		}
		if want := reference(t, path, m.Tokenizer.Encode(p, true), n); got[i].text != want {
			t.Errorf("%q: speculative completion\n%q, the CLI's\n%q", p, got[i].text, want)
		}
		d := got[i].u.CompletionTokensDetails
		if got[i].u.CompletionTokens != n {
			t.Errorf("%q: %d completion tokens, want %d", p, got[i].u.CompletionTokens, n)
		}
		accepted += d.AcceptedPredictionTokens
		t.Logf("%q: accepted %d, rejected %d prediction tokens", p, d.AcceptedPredictionTokens, d.RejectedPredictionTokens)
	}
	if accepted == 0 {
		t.Error("no draft accepted: the test wants verifications that keep drafts")
	}
}
