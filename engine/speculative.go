package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/glint-llm/glint/sample"
)

// Drafter proposes the tokens likely to follow a generation's: a draft
// model, an n-gram lookup over the context. Speculative decoding verifies
// them with the target model in one step, so a draft only ever costs or
// saves time; it never changes a token.
type Drafter interface {
	// Draft returns up to max tokens to follow tokens (the session's,
	// the token chosen last included); none when it has no guess.
	Draft(ctx context.Context, tokens []int32, max int) ([]int32, error)
}

// Speculative configures speculative decoding of a generation (llama.cpp's
// --draft-max, --draft-min).
type Speculative struct {
	Drafter Drafter
	// Max is the most tokens one step drafts; a draft shorter than Min is
	// not verified (the step decodes one token as without drafts).
	Max, Min int
	// Adaptive drafts, each step, the length up to Max that the
	// acceptance and the verification's cost measured so far say yields
	// most tokens per second (tune); otherwise always up to Max.
	Adaptive bool
}

// Speculating says whether the generation drafts, and if not, why not
// (empty when it does, or was not asked to).
func (g *Generator) Speculating() (bool, string) {
	return g.o.Speculative != nil && g.specOff == "", g.specOff
}

// specCheck returns why o's speculation cannot run on s ("" when it can).
func specCheck(s *Session, o Options) string {
	sp := o.Speculative
	switch {
	case sp == nil:
		return ""
	case sp.Drafter == nil || sp.Max <= 0:
		return "no drafter, or --draft-max 0"
	case !s.e.CanVerify():
		return "the model cannot verify drafts as decode steps"
	case o.Hooks.Chosen != nil && len(o.Stop) > 0:
		// A stop string found inside an accepted run would leave Chosen
		// told of tokens after it, which plain decoding never chooses.
		return "stop strings with a per-token hook (log-probabilities)"
	}
	return ""
}

// speculate drafts after the session's tokens, verifies the draft in one
// step and returns the tokens chosen from it: the drafts accepted, then
// the token chosen where the first was rejected (or after the last). The
// session then holds all of them but the last, which is the caller's to
// Choose. nil: no draft this step (choose one token as without drafts).
//
// Each row's logits go through the hooks and the sampler in order, as
// plain decoding's steps would, stopping at the first rejection: greedy,
// a row's choice is the argmax, so the tokens are plain decoding's to the
// bit (Verify gives each row a decode step's logits); sampling, a draft is
// accepted by sample.SampleDraft's rule, which keeps the distribution.
func (g *Generator) speculate(ctx context.Context) ([]int32, error) {
	s, sp := g.s, g.o.Speculative
	if len(s.pending) != 1 {
		return nil, nil
	}
	k := min(sp.Max, s.VerifyRoom())
	if g.tune != nil {
		k = g.tune.length(k)
	}
	if g.o.MaxTokens >= 0 {
		k = min(k, g.o.MaxTokens-len(g.tm.Generated)-1)
	}
	if k <= 0 || k < sp.Min {
		return nil, nil
	}
	drafts, err := sp.Drafter.Draft(ctx, s.Tokens(), k)
	if err != nil {
		return nil, fmt.Errorf("generate: draft: %w", err)
	}
	drafts = drafts[:min(len(drafts), k)]
	for i, id := range drafts {
		if id < 0 || int(id) >= s.e.Vocab() {
			drafts = drafts[:i] // a draft vocabulary's extra tokens
			break
		}
	}
	if len(drafts) == 0 || len(drafts) < sp.Min {
		return nil, nil
	}
	n, v := len(drafts)+1, s.e.Vocab()
	var ids []int32
	var rows []float32
	if g.logits == nil {
		g.specIDs = slices.Grow(g.specIDs[:0], n)[:n]
		ids = g.specIDs
	} else {
		g.specRows = slices.Grow(g.specRows[:0], n*v)[:n*v]
		rows = g.specRows
	}
	base := s.Len()
	start := time.Now()
	if err := s.Verify(ctx, drafts, ids, rows); err != nil {
		return nil, err
	}
	took := time.Since(start)
	g.tm.Passes++
	g.tm.Drafted += len(drafts)
	ready, nAcc := g.ready[:0], 0
	for i := range n {
		var t int32
		accepted := false
		if ids != nil {
			t = ids[i]
			accepted = i < len(drafts) && t == drafts[i]
		} else {
			if t, accepted, err = g.pick(rows[i*v:(i+1)*v], ready, drafts, i); err != nil {
				return nil, err
			}
		}
		ready = append(ready, t)
		if accepted {
			g.tm.Accepted++
			nAcc++
		}
		if !accepted || g.isEnd(t) {
			break
		}
	}
	if g.tune != nil {
		g.tune.verified(len(drafts), nAcc, took)
	}
	// The drafts after the last accepted leave the cache (and the token
	// chosen last is Chosen by Next, as a plain step's).
	if err := s.Truncate(base + len(ready) - 1); err != nil {
		return nil, err
	}
	return ready, nil
}

// pick chooses row i's token of a verification from its logits, through
// the hooks and the sampler as choose does, given the tokens chosen from
// the rows before it (ready), and reports whether it is drafts[i].
func (g *Generator) pick(logits []float32, ready, drafts []int32, i int) (int32, bool, error) {
	if h := g.o.Hooks.Logits; h != nil {
		if err := h(logits); err != nil {
			return 0, false, err
		}
	}
	var id int32
	accepted := false
	switch sm := g.o.Sampler; {
	case sm != nil:
		hist := g.history
		if sm.P.RepeatPenalty != 1 && len(ready) > 0 {
			g.specHist = append(append(g.specHist[:0], g.history...), ready...)
			hist = g.specHist
		}
		if i < len(drafts) {
			id, accepted = sm.SampleDraft(logits, hist, drafts[i])
		} else {
			id = sm.Sample(logits, hist)
		}
	default:
		id = sample.Argmax(logits)
		accepted = i < len(drafts) && id == drafts[i]
	}
	if h := g.o.Hooks.Chosen; h != nil && !g.isEnd(id) {
		if err := h(logits, id); err != nil {
			return 0, false, err
		}
	}
	return id, accepted, nil
}

// NgramSimple drafts by lookup in the context, as llama.cpp's ngram-simple
// (common_ngram_simple_draft): the last N tokens are looked for earlier in
// the context, the newest match first, and up to M tokens that followed it
// are the draft. Where the last N tokens occur nowhere else, shorter
// patterns are tried, down to Min tokens (prompt-lookup decoding's
// fallback, which llama-lookup's n-grams of 1 to 4 tokens also have): a
// story repeats its phrases far more often than its sentences.
type NgramSimple struct {
	N, M, Min int
}

// Defaults of llama.cpp's --spec-ngram-size-n and --spec-ngram-size-m.
const (
	NgramSizeN   = 12
	NgramSizeM   = 48
	NgramSizeMin = 1
)

// Draft implements Drafter.
func (d NgramSimple) Draft(_ context.Context, tokens []int32, max int) ([]int32, error) {
	n, m, lo := d.N, d.M, d.Min
	if lo <= 0 {
		lo = n
	}
	if n <= 0 || m <= 0 || lo > n {
		return nil, fmt.Errorf("ngram-simple: sizes n %d, m %d, min %d: want 0 < min ≤ n and m > 0", n, m, lo)
	}
	for k := min(n, len(tokens)-1); k >= lo; k-- {
		pattern := tokens[len(tokens)-k:]
		// The newest earlier occurrence that something follows.
		for j := len(tokens) - k - 1; j >= 0; j-- {
			if slices.Equal(tokens[j:j+k], pattern) {
				end := min(j+k+m, len(tokens), j+k+max)
				return slices.Clone(tokens[j+k : end]), nil
			}
		}
	}
	return nil, nil
}

// ModelDrafter drafts with a draft model's greedy choices (llama.cpp's
// common_speculative_gen_draft): its session follows the target's tokens,
// fed again from where they part, then picks the draft model's most
// probable token until Max, stopping after one whose probability among
// the ten most probable is below PMin (--draft-p-min).
type ModelDrafter struct {
	s      *Session
	PMin   float32
	logits []float32
}

// NewModelDrafter drafts on a session of the draft model's engine (the
// drafter uses it alone, and closes it with Close).
func NewModelDrafter(s *Session, pMin float32) *ModelDrafter {
	return &ModelDrafter{s: s, PMin: pMin, logits: make([]float32, s.e.Vocab())}
}

// Close closes the draft session.
func (d *ModelDrafter) Close() error { return d.s.Close() }

// Draft implements Drafter. A draft model whose context is full drafts
// nothing.
func (d *ModelDrafter) Draft(ctx context.Context, tokens []int32, max int) ([]int32, error) {
	if len(tokens) == 0 || max <= 0 {
		return nil, nil
	}
	have := d.s.Tokens()
	p := 0
	for p < len(have) && p < len(tokens) && have[p] == tokens[p] {
		p++
	}
	// The last token is fed again when it is all that is left: its
	// logits are where the draft starts.
	p = min(p, len(tokens)-1)
	if err := d.s.Truncate(p); err != nil {
		return nil, err
	}
	if err := d.s.Prefill(ctx, tokens[p:]); err != nil {
		if errors.Is(err, ErrContextFull) {
			return nil, nil
		}
		return nil, err
	}
	var out []int32
	for len(out) < max {
		if err := d.s.Logits(ctx, d.logits); err != nil {
			if errors.Is(err, ErrContextFull) {
				break
			}
			return nil, err
		}
		id, prob := top10(d.logits)
		out = append(out, id)
		if len(out) >= max || prob < d.PMin {
			break
		}
		d.s.Choose(id)
	}
	return out, nil
}

// top10 is the most probable token (the first on ties) and its
// probability in the softmax of the ten largest logits, as llama.cpp's
// draft sampler (top-k 10) reports it.
func top10(logits []float32) (int32, float32) {
	var top [10]float32
	k := 0
	for _, l := range logits {
		if k < len(top) {
			top[k] = l
			k++
			for j := k - 1; j > 0 && top[j] > top[j-1]; j-- {
				top[j], top[j-1] = top[j-1], top[j]
			}
			continue
		}
		if l > top[k-1] {
			top[k-1] = l
			for j := k - 1; j > 0 && top[j] > top[j-1]; j-- {
				top[j], top[j-1] = top[j-1], top[j]
			}
		}
	}
	var sum float64
	for _, l := range top[:k] {
		sum += math.Exp(float64(l - top[0]))
	}
	return sample.Argmax(logits), float32(1 / sum)
}
