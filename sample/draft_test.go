package sample

import (
	"fmt"
	"slices"
	"testing"
)

// TestSampleDraftDistribution: a token returned by SampleDraft, whatever
// the draft, has Sample's distribution. Over a vocabulary of 8 with the
// whole chain on (penalty, top-k, top-p, min-p, temperature), 200 000
// draws of each are compared by a two-sample chi-square test, per draft:
// the most probable token, a middling one, and one the chain cuts (p = 0,
// always rejected). Fixed seeds make the test deterministic; the threshold
// is the 0.999 quantile of χ² with the categories' degrees of freedom, so
// a correct sampler fails it at one seed in a thousand, while the bias of
// accepting a draft unconditionally, or of not renormalising the
// remainder, is thousands of times larger.
func TestSampleDraftDistribution(t *testing.T) {
	logits := []float32{2.0, 1.6, 1.1, 0.9, 0.2, -0.4, -1.5, -4}
	history := []int32{1, 5}
	p := Params{Temp: 0.9, TopK: 6, TopP: 0.97, MinP: 0.02, RepeatPenalty: 1.2, RepeatLastN: 64}
	const n = 200_000
	plain := New(withSeed(p, 1), len(logits))
	want := make([]float64, len(logits))
	for range n {
		want[plain.Sample(slices.Clone(logits), history)]++
	}
	for _, draft := range []int32{0, 3, 7} {
		t.Run(fmt.Sprintf("draft=%d", draft), func(t *testing.T) {
			s := New(withSeed(p, 2+uint64(draft)), len(logits))
			got := make([]float64, len(logits))
			accepted := 0
			for range n {
				id, ok := s.SampleDraft(slices.Clone(logits), history, draft)
				if ok != (id == draft) {
					t.Fatalf("SampleDraft returned %d, accepted %v, for draft %d", id, ok, draft)
				}
				if ok {
					accepted++
				}
				got[id]++
			}
			chi, df := chiSquare2(got, want)
			// χ²'s 0.999 quantiles for 1…7 degrees of freedom.
			limit := []float64{10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32}[df-1]
			t.Logf("accepted %d of %d; χ² = %.2f with %d degrees of freedom (limit %.2f)", accepted, n, chi, df, limit)
			if chi > limit {
				t.Errorf("χ² = %.2f > %.2f: SampleDraft's distribution %v differs from Sample's %v", chi, limit, got, want)
			}
		})
	}
}

// TestSampleDraftGreedy: at temperature 0 SampleDraft is the argmax of the
// penalised logits, accepted exactly when it is the draft.
func TestSampleDraftGreedy(t *testing.T) {
	logits := []float32{0.5, 3, 2.9, -1}
	s := New(Params{Temp: 0, RepeatPenalty: 1.1, RepeatLastN: 64}, len(logits))
	for _, c := range []struct {
		draft, id int32
		ok        bool
	}{{2, 2, true}, {1, 2, false}, {3, 2, false}} {
		// The penalty on token 1 (3/1.1 < 2.9) makes 2 the argmax.
		id, ok := s.SampleDraft(slices.Clone(logits), []int32{1}, c.draft)
		if id != c.id || ok != c.ok {
			t.Errorf("draft %d: got %d (accepted %v), want %d (%v)", c.draft, id, ok, c.id, c.ok)
		}
	}
}

func withSeed(p Params, seed uint64) Params {
	p.Seed = seed
	return p
}

// chiSquare2 is the two-sample chi-square statistic of two histograms of
// equal totals, over the categories either one has, and its degrees of
// freedom.
func chiSquare2(a, b []float64) (float64, int) {
	var chi float64
	k := 0
	for i := range a {
		if a[i]+b[i] == 0 {
			continue
		}
		d := a[i] - b[i]
		chi += d * d / (a[i] + b[i])
		k++
	}
	return chi, max(k-1, 1)
}
