package layers_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/cltest"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/sample"
	"github.com/glint-llm/glint/tokenizer"
)

// specPair is a target model and the draft model that drafts for it.
type specPair struct{ name, target, draft string }

// specPairs writes the synth models of the speculative tests: an F16
// target drafted by its Q4_0 quantisation, and a Q8_0 one drafted by the
// same Q4_0 file (one seed: the same weights before rounding).
func specPairs(t *testing.T) []specPair {
	dir := t.TempDir()
	path := func(typ string) string {
		p := filepath.Join(dir, typ+".gguf")
		if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: typ, Seed: 11, Std: 0.08}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	q4 := path("Q4_0")
	return []specPair{{"F16-by-Q4_0", path("F16"), q4}, {"Q8_0-by-Q4_0", path("Q8_0"), q4}}
}

// engineOn loads path on b with a cache of ct and starts an engine over it
// (which owns the model from then on).
func engineOn(t *testing.T, b backend.Backend, path string, ct dtype.Type) *engine.Engine {
	t.Helper()
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: 128, CacheK: ct, CacheV: ct, MaxOutputs: 8})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(m)
	t.Cleanup(func() { e.Close() })
	return e
}

// TestSpeculativeGreedyExact: greedy speculative decoding, a draft model's
// drafts verified in one step each, chooses plain decoding's ids over 32
// tokens, and every token's logits are plain decoding's to the bit —
// drafts accepted and rejected alike — on the CPU and on every OpenCL
// device, over f32 and f16 caches. The expectation is the same target
// decoded one token at a time.
func TestSpeculativeGreedyExact(t *testing.T) {
	pairs := specPairs(t)
	for _, ct := range []dtype.Type{dtype.F32, dtype.F16} {
		for _, p := range pairs {
			t.Run(fmt.Sprintf("cpu/%s/%v", p.name, ct), func(t *testing.T) {
				newB := func() backend.Backend {
					b := cpu.New(2)
					t.Cleanup(func() { b.Close() })
					return b
				}
				testSpeculativeGreedy(t, newB, p, ct, 32)
			})
		}
	}
	cltest.Run(t, func(t *testing.T, d opencl.DeviceInfo) {
		// PoCL is slow to launch: one pair, shorter on a second device.
		steps := 32
		if cltest.Trim(t, d) {
			steps = 12
		}
		for _, ct := range []dtype.Type{dtype.F32, dtype.F16} {
			t.Run(fmt.Sprintf("%s/%v", pairs[0].name, ct), func(t *testing.T) {
				testSpeculativeGreedy(t, func() backend.Backend { return cltest.New(t, d) }, pairs[0], ct, steps)
			})
		}
	})
}

func testSpeculativeGreedy(t *testing.T, newB func() backend.Backend, p specPair, ct dtype.Type, steps int) {
	ctx := context.Background()
	target := engineOn(t, newB(), p.target, ct)
	draft := engineOn(t, newB(), p.draft, ct)
	prompt := []int32{1, 20, 31, 42, 53, 64}

	// Plain decoding, one token a step, each step's logits kept.
	s, err := target.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prefill(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	var ids []int32
	var logits [][]float32
	for range steps {
		l := make([]float32, target.Vocab())
		if err := s.Logits(ctx, l); err != nil {
			t.Fatal(err)
		}
		id := sample.Argmax(l)
		ids, logits = append(ids, id), append(logits, l)
		s.Choose(id)
	}
	s.Close()

	for _, hooked := range []bool{false, true} {
		ds, err := draft.NewSession(engine.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		md := engine.NewModelDrafter(ds, 0)
		var seen [][]float32
		o := engine.Options{MaxTokens: steps, Speculative: &engine.Speculative{Drafter: md, Max: 5}}
		if hooked {
			// A hook reads every token's logits: the host's argmax of
			// them, not the device's, chooses.
			o.Hooks.Logits = func(l []float32) error {
				seen = append(seen, slices.Clone(l))
				return nil
			}
		}
		tm, err := engine.Generate(ctx, target, prompt, o)
		md.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tm.Generated, ids) {
			t.Fatalf("hooks %v: speculative ids\n%v\nplain\n%v", hooked, tm.Generated, ids)
		}
		if tm.Accepted == 0 || tm.Accepted == tm.Drafted {
			t.Errorf("hooks %v: %d of %d drafts accepted: the test wants both verdicts", hooked, tm.Accepted, tm.Drafted)
		}
		t.Logf("hooks %v: %d tokens in %d passes (drafted %d, accepted %d)", hooked, len(tm.Generated), tm.Passes, tm.Drafted, tm.Accepted)
		if !hooked {
			continue
		}
		if len(seen) != len(logits) {
			t.Fatalf("the hook saw %d rows of logits, plain decoding %d", len(seen), len(logits))
		}
		for i := range logits {
			for j := range logits[i] {
				if math.Float32bits(seen[i][j]) != math.Float32bits(logits[i][j]) {
					t.Fatalf("token %d: logit %d is %g, plain decoding's %g", i, j, seen[i][j], logits[i][j])
				}
			}
		}
	}
}

// TestSpeculativeSampledDistribution: sampling with drafts verified by
// speculative sampling's rule gives plain sampling's distribution of whole
// continuations. An F16 target drafted by its Q4_0 quantisation samples
// three tokens (temperature 1, top-k 3, a repetition penalty of 1.1, which a
// verification must apply with the drafts accepted before each row) 3000
// times each way; the continuations' histograms are compared by a
// two-sample chi-square test, categories with fewer than 10 draws between
// them pooled, against the 0.999 quantile (Wilson–Hilferty): fixed seeds
// make it deterministic, and a correct generator fails it at one seed in a
// thousand.
func TestSpeculativeSampledDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("3000 generations each way")
	}
	p := specPairs(t)[0]
	ctx := context.Background()
	newB := func() backend.Backend {
		b := cpu.New(1)
		t.Cleanup(func() { b.Close() })
		return b
	}
	target := engineOn(t, newB(), p.target, dtype.F32)
	draft := engineOn(t, newB(), p.draft, dtype.F32)
	ds, err := draft.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	md := engine.NewModelDrafter(ds, 0)
	defer md.Close()
	prompt := []int32{1, 20, 31, 42}
	const n = 3000
	var drafted, accepted [2]int
	counts := func(spec bool) map[[3]int32]float64 {
		h := map[[3]int32]float64{}
		for i := range n {
			seed := uint64(i)
			o := engine.Options{MaxTokens: 3}
			if spec {
				seed += 1 << 32
				o.Speculative = &engine.Speculative{Drafter: md, Max: 3}
			}
			o.Sampler = sample.New(sample.Params{Temp: 1, TopK: 3, TopP: 1, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: seed}, target.Vocab())
			tm, err := engine.Generate(ctx, target, prompt, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(tm.Generated) != 3 {
				t.Fatalf("%d tokens, want 3", len(tm.Generated))
			}
			h[[3]int32(tm.Generated)]++
			drafted[b01(spec)] += tm.Drafted
			accepted[b01(spec)] += tm.Accepted
		}
		return h
	}
	plain, spec := counts(false), counts(true)
	var rest [2]float64
	var stat float64
	k := 0
	keys := map[[3]int32]bool{}
	for c := range plain {
		keys[c] = true
	}
	for c := range spec {
		keys[c] = true
	}
	for c := range keys {
		a, b := plain[c], spec[c]
		if a+b < 10 {
			rest[0] += a
			rest[1] += b
			continue
		}
		stat += (a - b) * (a - b) / (a + b)
		k++
	}
	if rest[0]+rest[1] > 0 {
		stat += (rest[0] - rest[1]) * (rest[0] - rest[1]) / (rest[0] + rest[1])
		k++
	}
	df := float64(max(k-1, 1))
	const z = 3.090 // the normal's 0.999 quantile
	limit := df * math.Pow(1-2/(9*df)+z*math.Sqrt(2/(9*df)), 3)
	t.Logf("speculative: drafted %d, accepted %d", drafted[1], accepted[1])
	if accepted[1] == 0 || accepted[1] == drafted[1] {
		t.Errorf("%d of %d drafts accepted: the test wants both verdicts", accepted[1], drafted[1])
	}
	t.Logf("%d continuations: χ² = %.2f with %.0f degrees of freedom (limit %.2f)", len(keys), stat, df, limit)
	if stat > limit {
		t.Errorf("χ² = %.2f > %.2f: speculative sampling's continuations are not plain sampling's", stat, limit)
	}
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSpeculativeBesideOthers: a session verifying drafts shares the
// engine's steps with another session's long prompt and its decoding; both
// choose the ids each chooses alone (Q8_0 weights, whose rows do not
// depend on the batch), and the prompt is not starved by the
// verifications, which take no prompt chunk into their steps.
func TestSpeculativeBesideOthers(t *testing.T) {
	p := specPairs(t)[1]
	ctx := context.Background()
	newB := func() backend.Backend {
		b := cpu.New(2)
		t.Cleanup(func() { b.Close() })
		return b
	}
	load := func(path string) *engine.Engine {
		f, err := load.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		m, err := layers.Load(newB(), f.Config, f.Source, layers.Options{Context: 512, Seqs: 2, MaxOutputs: 8})
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(m)
		e.SetStepTokens(16) // the long prompt takes many steps
		t.Cleanup(func() { e.Close() })
		return e
	}
	target, draft := load(p.target), load(p.draft)
	short := []int32{1, 20, 31, 42}
	long := make([]int32, 120)
	for i := range long {
		long[i] = int32(3 + i*7%200)
	}
	gen := func(prompt []int32, spec bool) []int32 {
		o := engine.Options{MaxTokens: 32}
		if spec {
			ds, err := draft.NewSession(engine.SessionOptions{})
			if err != nil {
				t.Error(err)
				return nil
			}
			md := engine.NewModelDrafter(ds, 0)
			defer md.Close()
			o.Speculative = &engine.Speculative{Drafter: md, Max: 4}
		}
		tm, err := engine.Generate(ctx, target, prompt, o)
		if err != nil {
			t.Error(err)
		}
		if spec && tm.Drafted == 0 {
			t.Error("nothing drafted")
		}
		return tm.Generated
	}
	aloneShort, aloneLong := gen(short, false), gen(long, false)
	var both [2][]int32
	done := make(chan struct{})
	go func() {
		both[1] = gen(long, false)
		close(done)
	}()
	both[0] = gen(short, true)
	<-done
	if !slices.Equal(both[0], aloneShort) {
		t.Errorf("speculative session beside a prompt: %v, alone %v", both[0], aloneShort)
	}
	if !slices.Equal(both[1], aloneLong) {
		t.Errorf("the prompt's session beside a speculative one: %v, alone %v", both[1], aloneLong)
	}
}

// TestVerifyErrors: Verify refuses what it cannot run, with an error
// naming it, and leaves the session usable.
func TestVerifyErrors(t *testing.T) {
	p := specPairs(t)[1]
	b := cpu.New(1)
	t.Cleanup(func() { b.Close() })
	e := engineOn(t, b, p.target, dtype.F32)
	ctx := context.Background()
	s, err := e.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Prefill(ctx, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	v := e.Vocab()
	ids := make([]int32, 3)
	for _, c := range []struct {
		name   string
		drafts []int32
		ids    []int32
		want   string
	}{
		{"nothing chosen", []int32{4, 5}, ids, "pending"},
	} {
		if err := s.Verify(ctx, c.drafts, c.ids, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
	s.Choose(7)
	for _, c := range []struct {
		name   string
		drafts []int32
		ids    []int32
		want   string
	}{
		{"draft outside the vocabulary", []int32{4, int32(v)}, ids, "outside the vocabulary"},
		{"ids of the wrong length", []int32{4, 5}, ids[:2], "into 2 ids"},
		{"more drafts than a step reads", make([]int32, 8), make([]int32, 9), "room for 7"},
	} {
		if err := s.Verify(ctx, c.drafts, c.ids, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
	if err := s.Verify(ctx, []int32{4, 5}, ids, nil); err != nil {
		t.Fatalf("a good verification after the bad ones: %v", err)
	}
	if s.Len() != 6 {
		t.Errorf("the session holds %d tokens after verifying 2 drafts after 4, want 6", s.Len())
	}
}

// TestSpeculativeEnds: a generation that ends inside a run of accepted
// drafts (at a stop string) or at its end (an end token, the token limit)
// hands out plain decoding's tokens and leaves the session holding plain
// decoding's tokens, so that a continuation goes on from the same place.
func TestSpeculativeEnds(t *testing.T) {
	// The model drafts for itself: every draft is accepted, so runs are
	// long; weights of a larger spread make its choices varied.
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteGGUF(path, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 3, Std: 0.5}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	newB := func() backend.Backend {
		b := cpu.New(1)
		t.Cleanup(func() { b.Close() })
		return b
	}
	target, draft := engineOn(t, newB(), path, dtype.F32), engineOn(t, newB(), path, dtype.F32)
	f, err := load.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.GGUF)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{1, 20, 31, 42}
	run := func(o engine.Options, spec bool) ([]int32, []int32) {
		if spec {
			ds, err := draft.NewSession(engine.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			md := engine.NewModelDrafter(ds, 0)
			defer md.Close()
			o.Speculative = &engine.Speculative{Drafter: md, Max: 6}
		}
		s, err := target.NewSession(engine.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		tm, err := s.Generate(ctx, prompt, o)
		if err != nil {
			t.Fatal(err)
		}
		// One more plain token: the session goes on as it would have.
		next, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tm.Generated, append(s.Tokens()[:s.Len()-1:s.Len()-1], next)
	}
	all, _ := run(engine.Options{MaxTokens: 24}, false)
	type ending struct {
		name string
		o    engine.Options
	}
	var cases []ending
	for i := 3; i < 20; i++ {
		// An end token first met after i others (some inside a run of
		// accepted drafts, some at its last).
		if !slices.Contains(all[:i], all[i]) {
			cases = append(cases, ending{fmt.Sprintf("end token %d", all[i]), engine.Options{MaxTokens: 24, EOG: func(id int32) bool { return id == all[i] }}})
		}
		cases = append(cases, ending{fmt.Sprintf("length %d", i), engine.Options{MaxTokens: i}})
		// A stop string completed by token i: the tokens after it in
		// its run leave the session.
		if s := tok.Decode(all[i : i+1]); strings.TrimSpace(s) != "" && !strings.Contains(tok.Decode(all[:i]), s) {
			cases = append(cases, ending{fmt.Sprintf("stop %q", s), engine.Options{MaxTokens: 24, Tokenizer: tok, Stop: []string{s}}})
		}
	}
	for _, c := range cases {
		wantIDs, wantSess := run(c.o, false)
		gotIDs, gotSess := run(c.o, true)
		if !slices.Equal(gotIDs, wantIDs) || !slices.Equal(gotSess, wantSess) {
			t.Errorf("%s: speculative ids %v, session then %v; plain %v, %v", c.name, gotIDs, gotSess, wantIDs, wantSess)
		}
	}
}
