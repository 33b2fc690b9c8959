package engine

import (
	"math"
	"time"
)

// tune chooses each step's draft length from what the generation has
// measured (Speculative.Adaptive): the chance a, from the drafts accepted so
// far, that a draft token is accepted after its predecessors were, and the
// cost c of one more row in a verification relative to a plain step. A
// draft of k tokens then yields (1−a^(k+1))/(1−a) tokens for 1 + c·k plain
// steps' time; the k ≤ Max that yields most per unit of time is drafted.
// On a CPU, where a 9-row step costs two to three plain ones, low
// acceptance makes short drafts (or none) pay best; on a GPU, where c is
// near 0, the longest do.
type tune struct {
	hits, trials float64 // accepted drafts and drafts tried, decayed
	plain        float64 // seconds of a plain step, averaged
	c            float64 // a verification row's cost relative to a plain step
	idle         int     // steps since a draft was last tried
}

const (
	tuneDecay = 0.9 // weight of the past in each average
	tuneProbe = 8   // with drafts off, one of each tuneProbe steps drafts one token
)

func newTune() *tune { return &tune{hits: 1, trials: 2, c: 0.25} }

// length is the draft length to try now, at most max.
func (t *tune) length(max int) int {
	a := t.hits / t.trials
	best, bestRate := 0, 1.0
	for k := 1; k <= max; k++ {
		gain := float64(k + 1)
		if a < 1 {
			gain = (1 - math.Pow(a, float64(k+1))) / (1 - a)
		}
		if rate := gain / (1 + t.c*float64(k)); rate > bestRate*(1+1e-9) {
			best, bestRate = k, rate
		}
	}
	if best == 0 {
		if t.idle++; t.idle >= tuneProbe {
			t.idle = 0
			return min(1, max) // keep measuring: acceptance may rise
		}
	}
	return best
}

// plainStep records a plain (one-token) step's time.
func (t *tune) plainStep(d time.Duration) {
	s := d.Seconds()
	if t.plain == 0 {
		t.plain = s
		return
	}
	t.plain = tuneDecay*t.plain + (1-tuneDecay)*s
}

// verified records a verification of drafted tokens, accepted of them,
// which took d.
func (t *tune) verified(drafted, accepted int, d time.Duration) {
	tried := accepted
	if accepted < drafted {
		tried++ // the first rejected
	}
	t.hits = tuneDecay*t.hits + float64(accepted)
	t.trials = tuneDecay*t.trials + float64(tried)
	if t.plain > 0 && drafted > 0 {
		c := (d.Seconds()/t.plain - 1) / float64(drafted)
		t.c = tuneDecay*t.c + (1-tuneDecay)*max(c, 0)
	}
}
