package sample

import (
	"math"
	"slices"
	"testing"
)

// naiveProbs is the reference for the sampler's distribution: softmax at
// temperature t over the tokens that survive top-k, top-p and min-p, each
// filter computed directly from its definition.
func naiveProbs(logits []float32, p Params) []float64 {
	n := len(logits)
	rank := func(i int) int { // how many tokens beat i (ties by lower id)
		r := 0
		for j := range logits {
			if logits[j] > logits[i] || (logits[j] == logits[i] && j < i) {
				r++
			}
		}
		return r
	}
	soft := func(keep []bool, t float64) []float64 {
		mx := math.Inf(-1)
		for i, k := range keep {
			if k {
				mx = math.Max(mx, float64(logits[i]))
			}
		}
		out := make([]float64, n)
		var s float64
		for i, k := range keep {
			if k {
				out[i] = math.Exp((float64(logits[i]) - mx) / t)
				s += out[i]
			}
		}
		for i := range out {
			out[i] /= s
		}
		return out
	}
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = p.TopK <= 0 || rank(i) < p.TopK
	}
	if p.TopP < 1 {
		pr := soft(keep, 1)
		for i := range keep {
			if !keep[i] {
				continue
			}
			// kept when the mass of strictly better tokens is below TopP;
			// the best token has none better and always stays
			var better float64
			nBetter := 0
			for j := range keep {
				if keep[j] && rank(j) < rank(i) {
					better += pr[j]
					nBetter++
				}
			}
			keep[i] = nBetter == 0 || better < float64(p.TopP)
		}
	}
	if p.MinP > 0 {
		pr := soft(keep, 1)
		mx := 0.0
		for _, v := range pr {
			mx = math.Max(mx, v)
		}
		for i := range keep {
			keep[i] = keep[i] && pr[i] >= mx*float64(p.MinP)
		}
	}
	return soft(keep, float64(p.Temp))
}

func TestDistribution(t *testing.T) {
	logits := []float32{1.5, 0.2, 3.1, -1, 2.9, 0.7, 2.2, -3}
	cases := []struct {
		name string
		p    Params
	}{
		{"temp1", Params{Temp: 1, TopP: 1, RepeatPenalty: 1}},
		{"temp0.5", Params{Temp: 0.5, TopP: 1, RepeatPenalty: 1}},
		{"topk3", Params{Temp: 1, TopK: 3, TopP: 1, RepeatPenalty: 1}},
		{"topp0.8", Params{Temp: 1, TopP: 0.8, RepeatPenalty: 1}},
		{"minp0.2", Params{Temp: 1.3, TopP: 1, MinP: 0.2, RepeatPenalty: 1}},
		{"topp0", Params{Temp: 1, TopP: 0, RepeatPenalty: 1}},
		{"topp0 topk3 hot", Params{Temp: 2, TopK: 3, TopP: 0, MinP: 0.01, RepeatPenalty: 1}},
		{"topp0.3", Params{Temp: 1, TopP: 0.3, RepeatPenalty: 1}},
		{"defaults", Defaults()},
	}
	const draws = 200000
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := naiveProbs(logits, tc.p)
			tc.p.Seed = 42
			s := New(tc.p, len(logits))
			got := make([]float64, len(logits))
			buf := make([]float32, len(logits))
			for range draws {
				copy(buf, logits)
				got[s.Sample(buf, nil)]++
			}
			for i := range got {
				got[i] /= draws
				// 5 binomial standard deviations, plus a floor for p≈0
				tol := 5*math.Sqrt(want[i]*(1-want[i])/draws) + 1e-4
				if math.Abs(got[i]-want[i]) > tol {
					t.Errorf("token %d: frequency %.4f, want %.4f ± %.4f", i, got[i], want[i], tol)
				}
			}
		})
	}
}

func TestGreedyAndSeed(t *testing.T) {
	logits := []float32{0.1, 5, 5, -2} // tie: first index wins
	g := New(Params{Temp: 0, RepeatPenalty: 1}, 4)
	if !g.Greedy() {
		t.Fatal("temp 0 should be greedy")
	}
	if id := g.Sample(append([]float32(nil), logits...), nil); id != 1 {
		t.Fatalf("greedy = %d, want 1", id)
	}
	// top-p 0 keeps only the most probable token, as llama.cpp's top-p
	// sampler does (it always keeps one): greedy at any temperature.
	for _, seed := range []uint64{1, 2, 3} {
		p := New(Params{Temp: 1.5, TopK: 40, TopP: 0, RepeatPenalty: 1, Seed: seed}, 4)
		if !p.Greedy() {
			t.Fatal("top-p 0 should be greedy")
		}
		for range 20 {
			if id := p.Sample(append([]float32(nil), logits...), nil); id != 1 {
				t.Fatalf("top-p 0 drew %d, want 1", id)
			}
		}
	}
	draw := func(seed uint64) []int32 {
		s := New(Params{Temp: 1, TopP: 1, RepeatPenalty: 1, Seed: seed}, 4)
		var out []int32
		for range 50 {
			out = append(out, s.Sample([]float32{1, 1.2, 0.9, 1.1}, nil))
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different draws")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave the same 50 draws")
	}
}

func TestRepeatPenalty(t *testing.T) {
	s := New(Params{Temp: 0, RepeatPenalty: 2, RepeatLastN: 2}, 4)
	logits := []float32{4, 3, -1, 2}
	// token 0 is outside the last 2, token 2 is seen twice but penalised once
	s.Sample(logits, []int32{0, 2, 2})
	want := []float32{4, 3, -2, 2}
	for i := range want {
		if logits[i] != want[i] {
			t.Fatalf("penalised logits %v, want %v", logits, want)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	logits := make([]float32, 50000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	s := New(Defaults(), len(logits))
	hist := []int32{1, 2, 3}
	if a := testing.AllocsPerRun(10, func() { s.Sample(logits, hist) }); a != 0 {
		t.Fatalf("%v allocations per sample", a)
	}
}
