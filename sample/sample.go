// Package sample picks the next token from logits the way llama.cpp's
// default sampler chain does: repetition penalty, top-k, top-p, min-p,
// temperature, then a seeded draw. Temperature 0 is greedy argmax.
package sample

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Params are the sampling settings; the zero value is not useful, start
// from Defaults.
type Params struct {
	Temp          float32 // ≤ 0: greedy
	TopK          int     // ≤ 0: off
	TopP          float32 // ≥ 1: off; ≤ 0: only the most probable token, as llama.cpp
	MinP          float32 // ≤ 0: off
	RepeatPenalty float32 // 1: off
	RepeatLastN   int     // how many recent tokens the penalty sees
	Seed          uint64
}

// Defaults are llama.cpp's.
func Defaults() Params {
	return Params{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
}

type cand struct {
	id int32
	p  float32 // logit, then probability
}

// Sampler holds the buffers and the random source; it allocates nothing per
// token.
type Sampler struct {
	P     Params
	rng   *rand.Rand
	cands []cand
}

// New returns a sampler for a vocabulary of vocab tokens.
func New(p Params, vocab int) *Sampler {
	return &Sampler{P: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15)), cands: make([]cand, vocab)}
}

// Greedy reports whether the choice is plain argmax of the raw logits, which
// a device backend can make without sending the logits back: a temperature
// of 0, or a top-p of 0, which keeps only the most probable token.
func (s *Sampler) Greedy() bool {
	return (s.P.Temp <= 0 || s.P.TopP <= 0) && s.P.RepeatPenalty == 1
}

// Sample chooses a token from logits (modified in place by the penalty);
// history is the tokens so far (prompt and generated), for the penalty.
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	c := s.dist(logits, history)
	if c == nil {
		return Argmax(logits)
	}
	r := s.rng.Float32()
	var cum float32
	for _, x := range c {
		cum += x.p
		if r < cum {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// SampleDraft is Sample for a token drafted by speculative decoding,
// proposed with certainty (a draft model's greedy choice, an n-gram's
// continuation): it accepts draft with probability p(draft) under the
// distribution Sample draws from, else draws from that distribution with
// draft removed, renormalised — speculative sampling's rule for a point
// mass, by which the token returned has exactly Sample's distribution. At
// temperature 0 it is the argmax, accepted when it is the draft.
func (s *Sampler) SampleDraft(logits []float32, history []int32, draft int32) (id int32, accepted bool) {
	c := s.dist(logits, history)
	if c == nil {
		id = Argmax(logits)
		return id, id == draft
	}
	var pd, rest float32
	for _, x := range c {
		if x.id == draft {
			pd = x.p
		} else {
			rest += x.p
		}
	}
	if pd > 0 && (rest == 0 || s.rng.Float32() < pd) {
		return draft, true
	}
	r := s.rng.Float32() * rest
	var cum float32
	id = -1
	for _, x := range c {
		if x.id == draft {
			continue
		}
		cum += x.p
		id = x.id
		if r < cum {
			break
		}
	}
	return id, false
}

// dist applies the penalty to logits and returns the candidates the draw
// is from, sorted best first, with their probabilities; nil at temperature
// 0 (the argmax of the penalised logits).
func (s *Sampler) dist(logits []float32, history []int32) []cand {
	if s.P.RepeatPenalty != 1 {
		s.penalize(logits, history)
	}
	if s.P.Temp <= 0 {
		return nil
	}
	c := s.cands[:len(logits)]
	for i, l := range logits {
		c[i] = cand{int32(i), l}
	}
	if k := s.P.TopK; k > 0 && k < len(c) {
		c = topK(c, k)
	} else {
		slices.SortFunc(c, byLogitDesc)
	}
	// From here c is sorted, best first.
	softmax(c, 1)
	// The most probable token always stays (llama.cpp's min_keep of 1), so
	// a top-p of 0 leaves only it.
	if s.P.TopP < 1 {
		var cum float32
		for i := range c {
			cum += c[i].p
			if cum >= s.P.TopP {
				c = c[:i+1]
				break
			}
		}
	}
	if s.P.MinP > 0 {
		lim := c[0].p * s.P.MinP
		for i := range c {
			if c[i].p < lim {
				c = c[:max(i, 1)]
				break
			}
		}
	}
	// Temperature on what survived; probabilities are renormalised from
	// the original logits so the order of the chain matches llama.cpp.
	for i := range c {
		c[i].p = logits[c[i].id]
	}
	softmax(c, s.P.Temp)
	return c
}

// penalize applies llama.cpp's repetition penalty: logits of recent tokens
// are divided by the penalty when positive, multiplied when negative.
func (s *Sampler) penalize(logits []float32, history []int32) {
	h := history
	if n := s.P.RepeatLastN; n >= 0 && len(h) > n {
		h = h[len(h)-n:]
	}
	for i, id := range h {
		if slices.Contains(h[:i], id) {
			continue // each token once
		}
		if id < 0 || int(id) >= len(logits) {
			continue
		}
		if logits[id] > 0 {
			logits[id] /= s.P.RepeatPenalty
		} else {
			logits[id] *= s.P.RepeatPenalty
		}
	}
}

func byLogitDesc(a, b cand) int {
	switch {
	case a.p > b.p:
		return -1
	case a.p < b.p:
		return 1
	}
	return int(a.id - b.id)
}

// topK moves the k best candidates to the front, sorted, in O(n log k).
func topK(c []cand, k int) []cand {
	h := c[:k]
	slices.SortFunc(h, byLogitDesc) // h[k-1] is the weakest kept
	for i := k; i < len(c); i++ {
		if byLogitDesc(c[i], h[k-1]) >= 0 {
			continue
		}
		// insert c[i] into sorted h, dropping the weakest
		x := c[i]
		j := k - 1
		for j > 0 && byLogitDesc(x, h[j-1]) < 0 {
			h[j] = h[j-1]
			j--
		}
		h[j] = x
	}
	return h
}

// softmax turns logits (sorted best first) into probabilities at temperature t.
func softmax(c []cand, t float32) {
	mx := c[0].p
	var sum float64
	for i := range c {
		e := math.Exp(float64((c[i].p - mx) / t))
		c[i].p = float32(e)
		sum += e
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
}

// Argmax is the index of the largest value, the first on ties.
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// TopGap returns the index of the largest value and its lead over the
// second largest: how close a greedy choice is to flipping.
func TopGap(x []float32) (int32, float64) {
	best := Argmax(x)
	second := math.Inf(-1)
	for i, v := range x {
		if int32(i) != best {
			second = math.Max(second, float64(v))
		}
	}
	return best, float64(x[best]) - second
}
