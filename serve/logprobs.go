package serve

import (
	"math"
	"strings"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/tokenizer"
)

// MaxTopLogprobs is the most alternatives a step reports (OpenAI's
// top_logprobs limit).
const MaxTopLogprobs = 20

// Bias is one "logit_bias" entry: added to the token's logit before the
// sampler, as OpenAI's (-100 bans it in effect, +100 forces it).
type Bias struct {
	ID   int32
	Bias float32
}

// Logprob is a token and its log-probability.
type Logprob struct {
	ID      int32
	Logprob float64
}

// TokenLogprob is one chosen token's log-probability and the most
// probable tokens of its step, most probable first.
type TokenLogprob struct {
	ID      int32
	Logprob float64
	Top     []Logprob
}

// logprobHooks are a request's engine hooks: the log-probabilities of
// each step (top alternatives per token, < 0: none) reported to out, and
// the logit bias.
//
// The log-probabilities are the log-softmax of the model's logits as they
// come (what generate --dump-logits writes), before the bias, the
// repetition penalty and the temperature: the model's distribution, as
// OpenAI reports it, not the sampler's (llama-server's default n_probs).
func logprobHooks(bias []Bias, top int, vocab int, out func(TokenLogprob)) engine.Hooks {
	var h engine.Hooks
	var raw []float32
	var lse float64
	var best []Logprob
	if top >= 0 {
		raw = make([]float32, vocab)
		best = make([]Logprob, 0, top)
	}
	if len(bias) > 0 || top >= 0 {
		h.Logits = func(logits []float32) error {
			if raw != nil {
				copy(raw, logits)
				lse = logSumExp(logits)
				best = topLogits(best[:0], logits, top)
				for i := range best {
					best[i].Logprob -= lse
				}
			}
			for _, b := range bias {
				logits[b.ID] += b.Bias
			}
			return nil
		}
	}
	if top >= 0 {
		h.Chosen = func(_ []float32, id int32) error {
			t := TokenLogprob{ID: id, Logprob: float64(raw[id]) - lse}
			if len(best) > 0 {
				t.Top = append([]Logprob(nil), best...)
			}
			out(t)
			return nil
		}
	}
	return h
}

// logSumExp is log Σ exp(x), in float64 about the largest value so that
// nothing overflows; -Inf entries (masked tokens) add nothing.
func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, float64(v))
	}
	if math.IsInf(mx, -1) {
		return mx
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(sum)
}

// topLogits appends the n largest logits to dst, largest first (ties: the
// lower id first), by one pass that keeps them in order: O(len(x)) for
// the common case that an entry does not beat the n-th, with no sort of
// the vocabulary.
func topLogits(dst []Logprob, x []float32, n int) []Logprob {
	if n <= 0 {
		return dst
	}
	for i, v := range x {
		f := float64(v)
		if len(dst) == n && f <= dst[n-1].Logprob {
			continue
		}
		if len(dst) < n {
			dst = append(dst, Logprob{})
		}
		j := len(dst) - 1
		for j > 0 && f > dst[j-1].Logprob {
			dst[j] = dst[j-1]
			j--
		}
		dst[j] = Logprob{ID: int32(i), Logprob: f}
	}
	return dst
}

// tokenJSON is a token as OpenAI's logprobs show it: its text and bytes
// (the bytes of a piece that is not whole UTF-8 are in bytes only).
func tokenJSON(t *tokenizer.Tokenizer, id int32) (string, []int) {
	p := t.SpecialPiece(id)
	bs := make([]int, len(p))
	for i, c := range p {
		bs[i] = int(c)
	}
	return tokenText(t, id), bs
}

// tokenText is a token's text as JSON can carry it: a run of bytes that
// is not UTF-8 (part of a character) is one U+FFFD.
func tokenText(t *tokenizer.Tokenizer, id int32) string {
	return strings.ToValidUTF8(string(t.SpecialPiece(id)), "\uFFFD")
}

// chatTop is one alternative of a chat logprobs entry.
type chatTop struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// chatLogprob is one entry of a chat choice's logprobs.content.
type chatLogprob struct {
	chatTop
	TopLogprobs []chatTop `json:"top_logprobs"`
}

// chatLogprobs is a chat choice's "logprobs".
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
	Refusal []chatLogprob `json:"refusal"`
}

// jsonLogprob is a log-probability JSON can carry: -Inf (a token masked
// out) is OpenAI's -9999, its floor for the unlikely.
func jsonLogprob(x float64) float64 {
	if math.IsNaN(x) || x < -9999 {
		return -9999
	}
	return x
}

func chatLogprobsOf(t *tokenizer.Tokenizer, lps []TokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatLogprob, len(lps)), Refusal: []chatLogprob{}}
	for i, lp := range lps {
		e := chatLogprob{TopLogprobs: make([]chatTop, len(lp.Top))}
		e.Token, e.Bytes = tokenJSON(t, lp.ID)
		e.Logprob = jsonLogprob(lp.Logprob)
		for k, a := range lp.Top {
			e.TopLogprobs[k].Token, e.TopLogprobs[k].Bytes = tokenJSON(t, a.ID)
			e.TopLogprobs[k].Logprob = jsonLogprob(a.Logprob)
		}
		out.Content[i] = e
	}
	return out
}

// legacyLogprobs is a completion choice's "logprobs", OpenAI's legacy
// shape. TextOffset is the byte offset in the completion's text where each
// token's text starts (a control token's is empty, as the text has it).
type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// legacyLogprobsOf shapes lps, the first of them at byte offset *off of
// the completion, which it advances.
func legacyLogprobsOf(t *tokenizer.Tokenizer, lps []TokenLogprob, off *int) *legacyLogprobs {
	out := &legacyLogprobs{Tokens: make([]string, len(lps)), TokenLogprobs: make([]float64, len(lps)),
		TopLogprobs: make([]map[string]float64, len(lps)), TextOffset: make([]int, len(lps))}
	for i, lp := range lps {
		out.Tokens[i], out.TokenLogprobs[i], out.TextOffset[i] = tokenText(t, lp.ID), jsonLogprob(lp.Logprob), *off
		*off += len(t.Piece(lp.ID))
		top := make(map[string]float64, len(lp.Top))
		for _, a := range lp.Top {
			// Two tokens of one text: the more probable one stands.
			if _, ok := top[tokenText(t, a.ID)]; !ok {
				top[tokenText(t, a.ID)] = jsonLogprob(a.Logprob)
			}
		}
		out.TopLogprobs[i] = top
	}
	return out
}
