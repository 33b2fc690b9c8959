package serve

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/sample"
	"github.com/openai/openai-go/v3"
)

// TestTopLogits: the partial selection is the head of a full sort (ties:
// the lower id first).
func TestTopLogits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		x := make([]float32, 1+rng.IntN(300))
		for i := range x {
			x[i] = float32(rng.IntN(40)) / 4 // many ties
		}
		ids := make([]int32, len(x))
		for i := range ids {
			ids[i] = int32(i)
		}
		slices.SortStableFunc(ids, func(a, b int32) int {
			if x[a] != x[b] {
				if x[a] > x[b] {
					return -1
				}
				return 1
			}
			return 0
		})
		n := trial % (MaxTopLogprobs + 1)
		got := topLogits(nil, x, n)
		if len(got) != min(n, len(x)) {
			t.Fatalf("trial %d: %d of %d, want %d", trial, len(got), len(x), min(n, len(x)))
		}
		for i, g := range got {
			if g.ID != ids[i] || g.Logprob != float64(x[ids[i]]) {
				t.Fatalf("trial %d: entry %d is %+v, the sort's %d (%v)", trial, i, g, ids[i], x[ids[i]])
			}
		}
	}
}

// logSoftmax is the log-softmax of one step's logits in float64, by the
// definition (no shared code with the server's).
func logSoftmax(x []float32) []float64 {
	var sum float64
	mx := float64(slices.Max(x))
	for _, v := range x {
		sum += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - mx - math.Log(sum)
	}
	return out
}

// ranked are the ids of one step, most probable first.
func ranked(lp []float64) []int32 {
	ids := make([]int32, len(lp))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case lp[a] > lp[b]:
			return -1
		case lp[a] < lp[b]:
			return 1
		}
		return 0
	})
	return ids
}

// refSteps are greedy ids and each step's log-softmax as the engine gives
// them in-process, through the Logits hook --dump-logits uses.
func refSteps(t *testing.T, path string, prompt []int32, n int) ([]int32, [][]float64) {
	t.Helper()
	m, err := glint.Open(path, glintOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var lps [][]float64
	var ids []int32
	_, err = engine.Generate(t.Context(), m.Engine, prompt, engine.Options{MaxTokens: n,
		Sampler: sample.New(sample.Params{RepeatPenalty: 1}, m.Vocab()),
		Hooks:   engine.Hooks{Logits: func(l []float32) error { lps = append(lps, logSoftmax(l)); return nil }},
		OnToken: func(tk engine.Token) error { ids = append(ids, tk.ID); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return ids, lps
}

// tinyPath writes the synthetic model of tinyModel and serves it.
func tinyPath(t *testing.T) (string, *Model) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 2, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	return p, load(t, p, LoadOptions{Template: chattemplate.Choice{Builtin: "chatml"}})
}

// 1e-5: the server and the reference compute the same float32 logits
// (one request alone in the batch); what is left is float64 summation
// order.
const lpTol = 1e-5

func near(a, b float64) bool { return math.Abs(a-b) <= lpTol }

// shown is a token's text as JSON shows it (a byte that is not UTF-8 is
// U+FFFD, and the legacy map's key).
func shown(tok interface{ SpecialPiece(int32) []byte }, id int32) string {
	return strings.ToValidUTF8(string(tok.SpecialPiece(id)), "\uFFFD")
}

func bytesOf(b []byte) []int64 {
	out := make([]int64, len(b))
	for i, c := range b {
		out[i] = int64(c)
	}
	return out
}

// TestChatLogprobs: greedy chat with top_logprobs 3, whole and streamed,
// through the official client: each entry is the chosen token with the
// model's log-probability of it, and the three most probable, equal to an
// independent log-softmax of the engine's logits for the same prompt.
func TestChatLogprobs(t *testing.T) {
	path, m := tinyPath(t)
	ts := start(t, m, Options{})
	const n, top = 12, 3
	req := &chatRequest{Messages: []chatMessage{{Role: "user", Content: []byte(`"Tell me a story"`)}}}
	prompt, err := req.prompt(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	ids, want := refSteps(t, path, prompt, n)
	params := openai.ChatCompletionNewParams{Model: "any", MaxTokens: openai.Int(n), Temperature: openai.Float(0),
		Logprobs: openai.Bool(true), TopLogprobs: openai.Int(top),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story")}}
	got, err := ts.client.Chat.Completions.New(context.Background(), params, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	content := got.Choices[0].Logprobs.Content
	check := func(what string, content []openai.ChatCompletionTokenLogprob) {
		t.Helper()
		if len(content) != n {
			t.Fatalf("%s: %d entries, want %d", what, len(content), n)
		}
		for i, e := range content {
			tok := m.Tokenizer
			if !slices.Equal(e.Bytes, bytesOf(tok.SpecialPiece(ids[i]))) || e.Token != shown(tok, ids[i]) {
				t.Errorf("%s: step %d: token %q %v, the reference chose %d (%q)", what, i, e.Token, e.Bytes, ids[i], tok.SpecialPiece(ids[i]))
			}
			if !near(e.Logprob, want[i][ids[i]]) || e.Logprob > 0 {
				t.Errorf("%s: step %d: logprob %v, the reference's %v", what, i, e.Logprob, want[i][ids[i]])
			}
			best := ranked(want[i])[:top]
			if len(e.TopLogprobs) != top {
				t.Fatalf("%s: step %d: %d top entries, want %d", what, i, len(e.TopLogprobs), top)
			}
			if e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob {
				t.Errorf("%s: step %d: the first top entry %+v is not the greedy choice %q %v", what, i, e.TopLogprobs[0], e.Token, e.Logprob)
			}
			for k, a := range e.TopLogprobs {
				if !slices.Equal(a.Bytes, bytesOf(tok.SpecialPiece(best[k]))) || !near(a.Logprob, want[i][best[k]]) {
					t.Errorf("%s: step %d: top %d is %q %v, the reference's %d (%q) %v", what, i, k, a.Token, a.Logprob, best[k], tok.SpecialPiece(best[k]), want[i][best[k]])
				}
				if k > 0 && a.Logprob > e.TopLogprobs[k-1].Logprob {
					t.Errorf("%s: step %d: top entries not in descending order: %v after %v", what, i, a.Logprob, e.TopLogprobs[k-1].Logprob)
				}
			}
		}
	}
	check("whole", content)

	s := ts.client.Chat.Completions.NewStreaming(context.Background(), params, greedy...)
	defer s.Close()
	var streamed []openai.ChatCompletionTokenLogprob
	for s.Next() {
		for _, ch := range s.Current().Choices {
			streamed = append(streamed, ch.Logprobs.Content...)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	check("streamed", streamed)
}

// TestCompletionLogprobs: the legacy shape, against the same reference.
func TestCompletionLogprobs(t *testing.T) {
	path, m := tinyPath(t)
	ts := start(t, m, Options{})
	const n, top = 10, 5
	tok := m.Tokenizer
	prompt := tok.Encode("Once upon a time", true)
	ids, want := refSteps(t, path, prompt, n)
	p := completionParams("Once upon a time", n)
	p.Logprobs = openai.Int(top)
	got, err := ts.client.Completions.New(context.Background(), p, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	lp := got.Choices[0].Logprobs
	if len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
		t.Fatalf("logprobs of %d, %d, %d, %d entries, want %d", len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TopLogprobs), len(lp.TextOffset), n)
	}
	off := 0
	for i, id := range ids {
		if lp.Tokens[i] != shown(tok, id) || !near(lp.TokenLogprobs[i], want[i][id]) {
			t.Errorf("step %d: %q %v, the reference's %q %v", i, lp.Tokens[i], lp.TokenLogprobs[i], tok.SpecialPiece(id), want[i][id])
		}
		if lp.TextOffset[i] != int64(off) {
			t.Errorf("step %d: text_offset %d, want %d", i, lp.TextOffset[i], off)
		}
		off += len(tok.Piece(id))
		// Tokens of one text: the map keeps the more probable.
		wantTop := map[string]float64{}
		for _, b := range ranked(want[i])[:top] {
			if _, ok := wantTop[shown(tok, b)]; !ok {
				wantTop[shown(tok, b)] = want[i][b]
			}
		}
		if len(lp.TopLogprobs[i]) != len(wantTop) {
			t.Errorf("step %d: top %v, want %v", i, lp.TopLogprobs[i], wantTop)
		}
		for k, v := range wantTop {
			if g, ok := lp.TopLogprobs[i][k]; !ok || !near(g, v) {
				t.Errorf("step %d: top %q: %v, want %v", i, k, g, v)
			}
		}
	}
}

// TestLogitBias: -100 on the greedy first token makes the next most
// probable one (by the reference's logits) come first, on both routes;
// +100 on an unlikely token makes it every token. The log-probabilities
// stay the model's own.
func TestLogitBias(t *testing.T) {
	path, m := tinyPath(t)
	ts := start(t, m, Options{})
	tok := m.Tokenizer
	prompt := tok.Encode("Once upon a time", true)
	ids, want := refSteps(t, path, prompt, 1)
	order := ranked(want[0])
	if order[0] != ids[0] {
		t.Fatalf("the reference chose %d, its most probable is %d", ids[0], order[0])
	}
	// unique: a token whose text no other token has, so that the text
	// names it.
	unique := func(id int32) bool {
		for k := range tok.VocabSize() {
			if int32(k) != id && shown(tok, int32(k)) == shown(tok, id) {
				return false
			}
		}
		return len(tok.SpecialPiece(id)) > 0 && utf8.Valid(tok.SpecialPiece(id))
	}
	bias := func(id int32, b int64) map[string]int64 { return map[string]int64{strconv.Itoa(int(id)): b} }

	p := completionParams("Once upon a time", 1)
	p.Logprobs, p.LogitBias = openai.Int(0), bias(ids[0], -100)
	got, err := ts.client.Completions.New(context.Background(), p, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	lp := got.Choices[0].Logprobs
	if len(lp.Tokens) != 1 || lp.Tokens[0] != shown(tok, order[1]) || !near(lp.TokenLogprobs[0], want[0][order[1]]) {
		t.Errorf("completions, %d banned: %q %v, want the runner-up %d %q %v", ids[0], lp.Tokens, lp.TokenLogprobs, order[1], tok.SpecialPiece(order[1]), want[0][order[1]])
	}

	chatReq := &chatRequest{Messages: []chatMessage{{Role: "user", Content: []byte(`"hi"`)}}}
	chatPrompt, err := chatReq.prompt(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	cids, cwant := refSteps(t, path, chatPrompt, 1)
	corder := ranked(cwant[0])
	cp := openai.ChatCompletionNewParams{Model: "any", MaxTokens: openai.Int(1), Temperature: openai.Float(0),
		Logprobs: openai.Bool(true), LogitBias: bias(cids[0], -100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	cgot, err := ts.client.Chat.Completions.New(context.Background(), cp, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	if c := cgot.Choices[0].Logprobs.Content; len(c) != 1 || !slices.Equal(c[0].Bytes, bytesOf(tok.SpecialPiece(corder[1]))) || !near(c[0].Logprob, cwant[0][corder[1]]) {
		t.Errorf("chat, %d banned: %+v, want the runner-up %d %q %v", cids[0], c, corder[1], tok.SpecialPiece(corder[1]), cwant[0][corder[1]])
	}

	// Force the least probable token with a text of its own.
	var forced int32 = -1
	for i := len(order) - 1; i >= 0 && forced < 0; i-- {
		if unique(order[i]) && !tok.IsEOG(order[i]) {
			forced = order[i]
		}
	}
	p = completionParams("Once upon a time", 3)
	p.Logprobs, p.LogitBias = openai.Int(0), bias(forced, 100)
	got, err = ts.client.Completions.New(context.Background(), p, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	lp = got.Choices[0].Logprobs
	if want := []string{shown(tok, forced), shown(tok, forced), shown(tok, forced)}; !slices.Equal(lp.Tokens, want) {
		t.Errorf("%d forced: tokens %q, want %q", forced, lp.Tokens, want)
	}
	if len(lp.TokenLogprobs) > 0 && !near(lp.TokenLogprobs[0], want[0][forced]) {
		t.Errorf("%d forced: logprob %v, the model's %v", forced, lp.TokenLogprobs[0], want[0][forced])
	}
}
