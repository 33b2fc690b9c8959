package report

import (
	"math"
	"slices"
)

// median of xs (the mean of the middle two for an even count); NaN if empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile is the nearest-rank percentile (p in (0, 100]): the smallest
// value with at least p% of the values at or below it. Unlike interpolation
// it always names a gap that was actually measured.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

func usToMs(us []int64) []float64 {
	out := make([]float64, len(us))
	for i, v := range us {
		out[i] = float64(v) / 1000
	}
	return out
}

// summarize derives the Summary from the raw timings (nil without them).
func summarize(b *Backend) *Summary {
	if len(b.TTFTUs) == 0 {
		return nil
	}
	ttft := usToMs(b.TTFTUs)
	var gaps []float64
	for _, g := range b.GapsUs {
		gaps = append(gaps, usToMs(g)...)
	}
	s := &Summary{
		TTFTMsMedian: median(ttft),
		TTFTMsMin:    slices.Min(ttft),
		TTFTMsMax:    slices.Max(ttft),
	}
	if len(gaps) > 0 {
		s.TBTMsMedian = median(gaps)
		s.TBTMsP90 = percentile(gaps, 90)
		s.TBTMsMin = slices.Min(gaps)
		s.TBTMsMax = slices.Max(gaps)
		if s.TBTMsMedian > 0 {
			s.TokensPerSec = 1000 / s.TBTMsMedian
		}
	}
	return s
}

// perIndexMedian returns, for each gap index, the median across runs of
// that gap in milliseconds (runs shorter than an index are left out of it).
func perIndexMedian(gaps [][]int64) []float64 {
	n := 0
	for _, g := range gaps {
		n = max(n, len(g))
	}
	out := make([]float64, n)
	col := make([]float64, 0, len(gaps))
	for i := range out {
		col = col[:0]
		for _, g := range gaps {
			if i < len(g) {
				col = append(col, float64(g[i])/1000)
			}
		}
		out[i] = median(col)
	}
	return out
}
