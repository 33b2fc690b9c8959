package report

import (
	"math"
	"math/rand/v2"
	"testing"
)

// naiveRank counts, for value v, how many of xs are ≤ v: the definition the
// nearest-rank percentile and the median are checked against.
func naiveRank(xs []float64, v float64) (le, lt int) {
	for _, x := range xs {
		if x <= v {
			le++
		}
		if x < v {
			lt++
		}
	}
	return le, lt
}

func TestMedianAndPercentile(t *testing.T) {
	tests := []struct {
		xs       []float64
		med, p90 float64
	}{
		{[]float64{5}, 5, 5},
		{[]float64{3, 1}, 2, 3},
		{[]float64{9, 1, 5}, 5, 9},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5.5, 9},
		{[]float64{4, 4, 4, 1}, 4, 4},
	}
	for _, tc := range tests {
		if got := median(tc.xs); got != tc.med {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.med)
		}
		if got := percentile(tc.xs, 90); got != tc.p90 {
			t.Errorf("p90(%v) = %v, want %v", tc.xs, got, tc.p90)
		}
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(percentile(nil, 50)) {
		t.Error("statistics of nothing are not NaN")
	}
	// Random samples against the definition: the p-th percentile is a member
	// with at least p% of the values at or below it and fewer strictly below.
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		xs := make([]float64, 1+r.IntN(40))
		for i := range xs {
			xs[i] = float64(r.IntN(20))
		}
		for _, p := range []float64{10, 50, 90, 100} {
			v := percentile(xs, p)
			le, lt := naiveRank(xs, v)
			need := int(math.Ceil(p / 100 * float64(len(xs))))
			if le < need || lt >= need {
				t.Fatalf("p%v of %v = %v: %d values ≤, %d <, need rank %d", p, xs, v, le, lt, need)
			}
		}
	}
}

func TestSummarizeAndPerIndex(t *testing.T) {
	b := Backend{TTFTUs: []int64{3000, 1000, 2000}, GapsUs: [][]int64{{100, 400}, {300, 200}, {500, 600}}}
	s := summarize(&b)
	want := Summary{TTFTMsMedian: 2, TTFTMsMin: 1, TTFTMsMax: 3, TBTMsMedian: 0.35, TBTMsP90: 0.6, TBTMsMin: 0.1, TBTMsMax: 0.6}
	want.TokensPerSec = 1000 / want.TBTMsMedian
	if !summaryClose(*s, want) {
		t.Errorf("summary %+v, want %+v", *s, want)
	}
	if got := perIndexMedian(b.GapsUs); len(got) != 2 || got[0] != 0.3 || got[1] != 0.4 {
		t.Errorf("per-index medians %v, want [0.3 0.4]", got)
	}
	if summarize(&Backend{}) != nil {
		t.Error("summary of no runs")
	}
}

func TestNiceScale(t *testing.T) {
	for _, max := range []float64{0.003, 0.9, 1, 7.3, 42, 999, 12345} {
		top, step := niceScale(max)
		ticks := top / step
		m := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
		if top < max || ticks < 1 || ticks > 10.5 || (math.Abs(m-1) > 1e-9 && math.Abs(m-2) > 1e-9 && math.Abs(m-5) > 1e-9) {
			t.Errorf("niceScale(%v) = %v, %v", max, top, step)
		}
	}
}

// summaryClose compares summaries to rounding (they are sums and quotients of
// exact microsecond counts).
func summaryClose(a, b Summary) bool {
	av := []float64{a.TTFTMsMedian, a.TTFTMsMin, a.TTFTMsMax, a.TBTMsMedian, a.TBTMsP90, a.TBTMsMin, a.TBTMsMax, a.TokensPerSec}
	bv := []float64{b.TTFTMsMedian, b.TTFTMsMin, b.TTFTMsMax, b.TBTMsMedian, b.TBTMsP90, b.TBTMsMin, b.TBTMsMax, b.TokensPerSec}
	for i := range av {
		if math.Abs(av[i]-bv[i]) > 1e-9*math.Max(1, math.Abs(bv[i])) {
			return false
		}
	}
	return true
}
