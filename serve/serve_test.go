package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/sample"
)

// The tests run a real server on 127.0.0.1 (an ephemeral port) and talk to
// it with the official OpenAI client, or with plain HTTP where the client
// cannot send what is tested (malformed bodies). Expectations come from
// engine.Generate on a separately loaded model: the loop the CLI runs.

const testCtx = 512

var glintOpts = glint.Options{Backend: "cpu", Threads: 1, Context: testCtx}

// syncBuffer is the server's log, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testServer struct {
	url    string // http://127.0.0.1:PORT
	m      *Model
	srv    *Server
	log    *syncBuffer
	client openai.Client
}

// load serves path with the test's glint options (keeping lo's step budget
// and backend wrapper).
func load(t *testing.T, path string, lo LoadOptions) *Model {
	t.Helper()
	o := glintOpts
	o.StepTokens, o.Wrap = lo.StepTokens, lo.Wrap
	lo.Options = o
	m, err := Load(path, lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// start serves m (nil: a server still loading) until the test ends.
func start(t *testing.T, m *Model, o Options) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{url: "http://" + ln.Addr().String(), m: m, log: &syncBuffer{}}
	o.Log = ts.log
	ts.srv = New(o)
	if m != nil {
		ts.srv.SetModel(m)
	}
	done := make(chan error, 1)
	go func() { done <- ts.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ts.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	ts.client = openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("unused"),
		option.WithMaxRetries(0), option.WithRequestTimeout(2*time.Minute))
	return ts
}

// post sends body to path and returns the status and the body.
func (ts *testServer) post(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	code, b, err := postErr(ts.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, b
}

func postErr(url, body string) (int, []byte, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// reference is the CLI's greedy text: engine.Generate on a fresh model,
// decoded as the CLI decodes it; n tokens, end-of-generation ignored.
func reference(t *testing.T, path string, prompt []int32, n int) string {
	t.Helper()
	return referenceWith(t, path, glintOpts, engine.SessionOptions{}, prompt, n)
}

// referenceWith is reference on a model opened with o, in a session with
// so (context shift).
func referenceWith(t *testing.T, path string, o glint.Options, so engine.SessionOptions, prompt []int32, n int) string {
	t.Helper()
	m, err := glint.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dec := m.Tokenizer.NewStreamDecoder()
	var b strings.Builder
	_, err = engine.Generate(t.Context(), m.Engine, prompt, engine.Options{MaxTokens: n, Sampler: sample.New(sample.Params{RepeatPenalty: 1}, m.Vocab()),
		OnToken: func(tk engine.Token) error { b.WriteString(dec.Add(tk.ID)); return nil }, Session: so})
	if err != nil {
		t.Fatal(err)
	}
	return b.String() + dec.Flush()
}

func stories(t *testing.T) string {
	return shared.Models(t, "stories260K/stories260K.gguf")
}

// greedy is a request's extra fields for greedy text to the token limit.
var greedy = []option.RequestOption{option.WithJSONSet("ignore_eos", true)}

func completionParams(prompt string, n int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{Model: "any", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(n), Temperature: openai.Float(0)}
}

// streamCompletion collects a streamed completion's text and its end.
func streamCompletion(t *testing.T, ts *testServer, p openai.CompletionNewParams, opts ...option.RequestOption) (string, string, openai.CompletionUsage) {
	t.Helper()
	text, finish, u, err := streamCompletionErr(ts, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return text, finish, u
}

func streamCompletionErr(ts *testServer, p openai.CompletionNewParams, opts ...option.RequestOption) (string, string, openai.CompletionUsage, error) {
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := ts.client.Completions.NewStreaming(context.Background(), p, opts...)
	defer s.Close()
	var text, finish string
	var u openai.CompletionUsage
	for s.Next() {
		c := s.Current()
		for _, ch := range c.Choices {
			text += ch.Text
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
		if c.Usage.TotalTokens > 0 {
			u = c.Usage
		}
	}
	return text, finish, u, s.Err()
}

// TestCompletionsGreedy: the server's greedy completions, whole and
// streamed, are the CLI's text, with usage and finish_reason.
func TestCompletionsGreedy(t *testing.T) {
	path := stories(t)
	ts := start(t, load(t, path, LoadOptions{}), Options{})
	tok := ts.m.Tokenizer
	for _, prompt := range []string{"Once upon a time", "Tom and Lily went to the park", "The cat"} {
		const n = 48
		want := reference(t, path, tok.Encode(prompt, true), n)
		got, err := ts.client.Completions.New(context.Background(), completionParams(prompt, n), greedy...)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Text != want {
			t.Errorf("%q: completion\n%q, the CLI's\n%q", prompt, got.Choices[0].Text, want)
		}
		if fr := got.Choices[0].FinishReason; fr != "length" {
			t.Errorf("%q: finish_reason %q, want length", prompt, fr)
		}
		if u := got.Usage; u.PromptTokens != int64(len(tok.Encode(prompt, true))) || u.CompletionTokens != n || u.TotalTokens != u.PromptTokens+n {
			t.Errorf("%q: usage %+v", prompt, u)
		}
		text, finish, u := streamCompletion(t, ts, completionParams(prompt, n), greedy...)
		if text != want || finish != "length" || u.CompletionTokens != n {
			t.Errorf("%q: streamed %q (finish %q, %d tokens), want %q", prompt, text, finish, u.CompletionTokens, want)
		}
	}
}

// referenceIDs are the CLI's greedy ids.
func referenceIDs(t *testing.T, path string, prompt []int32, n int) []int32 {
	t.Helper()
	m, err := glint.Open(path, glintOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tm, err := engine.Generate(t.Context(), m.Engine, prompt, engine.Options{MaxTokens: n, Sampler: sample.New(sample.Params{RepeatPenalty: 1}, m.Vocab())})
	if err != nil {
		t.Fatal(err)
	}
	return tm.Generated
}

// TestEndTokenStops: a token that ends the generation (here one the greedy
// text is known to reach, named as a chat template's end of turn) ends it
// with finish_reason stop; it is counted, as llama-server counts it, but
// not sent. With IgnoreEOS it is generated like any other.
func TestEndTokenStops(t *testing.T) {
	path := stories(t)
	m := load(t, path, LoadOptions{})
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	ids := referenceIDs(t, path, prompt, 20)
	const k = 11
	end := ids[k]
	if slices.Contains(ids[:k], end) {
		t.Fatalf("token %d occurs before step %d in %v", end, k, ids)
	}
	for _, ignore := range []bool{false, true} {
		st, err := m.Sched.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 20, EndTokens: []int32{end}, IgnoreEOS: ignore,
			Sampling: sample.Params{RepeatPenalty: 1}})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for {
			s, done, err := st.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if done {
				break
			}
			text.WriteString(s.Text)
		}
		res := st.Result()
		want, finish, count := m.Tokenizer.Decode(ids[:k]), FinishStop, k+1
		if ignore {
			want, finish, count = m.Tokenizer.Decode(ids), FinishLength, 20
		}
		if text.String() != want || res.Finish != finish || res.CompletionTokens != count {
			t.Errorf("ignore_eos %v: %q, finish %s after %d tokens; want %q, %s after %d", ignore, text.String(), res.Finish, res.CompletionTokens, want, finish, count)
		}
	}
}

// TestStopStrings: a stop string ends the text before it, as the CLI's
// --stop does, and the finish reason is stop.
func TestStopStrings(t *testing.T) {
	path := stories(t)
	ts := start(t, load(t, path, LoadOptions{}), Options{})
	full := reference(t, path, ts.m.Tokenizer.Encode("Once upon a time", true), 64)
	cut := strings.Index(full, "Lily")
	if cut < 0 {
		t.Fatalf("the reference %q has no Lily", full)
	}
	p := completionParams("Once upon a time", 64)
	p.Stop = openai.CompletionNewParamsStopUnion{OfStringArray: []string{"zebra", "Lily"}}
	got, err := ts.client.Completions.New(context.Background(), p, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != full[:cut] || got.Choices[0].FinishReason != "stop" {
		t.Errorf("stopped at %q (%s), want %q", got.Choices[0].Text, got.Choices[0].FinishReason, full[:cut])
	}
	text, finish, _ := streamCompletion(t, ts, p, greedy...)
	if text != full[:cut] || finish != "stop" {
		t.Errorf("streamed, stopped at %q (%s), want %q", text, finish, full[:cut])
	}
}

// TestChatGreedy: chat completions render the model's template, and the
// greedy reply is the CLI's text for the rendered prompt.
func TestChatGreedy(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	ts := start(t, load(t, path, LoadOptions{}), Options{})
	msgs := []chattemplate.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "What is 2+2?"}}
	mt, err := chattemplate.FromModel(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chattemplate.Resolve(chattemplate.Choice{}, mt)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tmpl.RenderPrompt(context.Background(), ts.m.Tokenizer, chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, BOS: mt.BOS, EOS: mt.EOS}, false)
	if err != nil {
		t.Fatal(err)
	}
	prompt := p.Encode(ts.m.Tokenizer, true)
	const n = 24
	want := reference(t, path, prompt, n)

	params := openai.ChatCompletionNewParams{Model: "any", MaxTokens: openai.Int(n), Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(msgs[0].Content), openai.UserMessage(msgs[1].Content)}}
	got, err := ts.client.Chat.Completions.New(context.Background(), params, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.Message.Content != want || c.FinishReason != "length" || c.Message.Role != "assistant" {
		t.Errorf("chat reply %q (%s, role %q), the CLI's %q", c.Message.Content, c.FinishReason, c.Message.Role, want)
	}
	if got.Usage.PromptTokens != int64(len(prompt)) || got.Usage.CompletionTokens != n {
		t.Errorf("usage %+v, want %d prompt and %d completion tokens", got.Usage, len(prompt), n)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := ts.client.Chat.Completions.NewStreaming(context.Background(), params, greedy...)
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for s.Next() {
		acc.AddChunk(s.Current())
		chunks++
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "length" {
		t.Fatalf("streamed chat (%d chunks): %+v, want %q", chunks, acc.Choices, want)
	}
	if acc.Usage.CompletionTokens != n || acc.Usage.PromptTokens != int64(len(prompt)) {
		t.Errorf("streamed usage %+v", acc.Usage)
	}
}

// TestConcurrentEqualsSolo: eight greedy requests at once on four slots of
// one model (so some queue), decoded in shared batches and their prompts
// fed in chunks of 8 tokens beside the others' decoding, each give the
// text they give alone, which is the CLI's. Two seeded sampled requests
// run among them to their full length through the sampler's path (their
// text is not compared: a float model's batched logits differ from a lone
// step's in the last bits, which may move a sample, not a greedy choice).
func TestConcurrentEqualsSolo(t *testing.T) {
	path := stories(t)
	m := load(t, path, LoadOptions{Parallel: 4, Queue: 8, Options: glint.Options{StepTokens: 8}})
	if st := m.Sched.Status(); st.Slots != 4 || m.Sched.e.Seqs() != 4 || m.Sched.Context() != testCtx/4 {
		t.Fatalf("%d slots on an engine of %d sequences of %d tokens, want 4 of %d", st.Slots, m.Sched.e.Seqs(), m.Sched.Context(), testCtx/4)
	}
	ts := start(t, m, Options{})
	type req struct {
		p       openai.CompletionNewParams
		sampled bool
	}
	var reqs []req
	prompts := []string{"Once upon a time", "The dog", "Lily had a red ball and she liked to play with it in the park",
		"One day", "Tom was sad because his big toy car was broken", "The sun", "Mom and dad went to the big shop in the town",
		"A bird", "Sue saw a cat", "The boy ran"}
	for i, prompt := range prompts {
		r := req{p: completionParams(prompt, int64(24+6*i)), sampled: i >= 8}
		if r.sampled {
			r.p.Temperature = openai.Float(0.9)
			r.p.Seed = openai.Int(int64(100 + i))
		}
		reqs = append(reqs, r)
	}
	complete := func(r req, streamed bool) (string, int64, error) {
		if streamed {
			text, _, u, err := streamCompletionErr(ts, r.p, greedy...)
			return text, u.CompletionTokens, err
		}
		c, err := ts.client.Completions.New(context.Background(), r.p, greedy...)
		if err != nil {
			return "", 0, err
		}
		return c.Choices[0].Text, c.Usage.CompletionTokens, nil
	}
	solo := make([]string, len(reqs))
	for i, r := range reqs {
		var err error
		if solo[i], _, err = complete(r, false); err != nil {
			t.Fatal(err)
		}
		if r.sampled {
			continue
		}
		if want := reference(t, path, ts.m.Tokenizer.Encode(prompts[i], true), int(r.p.MaxTokens.Value)); solo[i] != want {
			t.Fatalf("%q: solo %q, the CLI's %q", prompts[i], solo[i], want)
		}
	}
	var wg sync.WaitGroup
	got := make([]string, len(reqs))
	n := make([]int64, len(reqs))
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		wg.Go(func() { got[i], n[i], errs[i] = complete(r, i%3 == 2) })
	}
	wg.Wait()
	for i, r := range reqs {
		switch {
		case errs[i] != nil:
			t.Errorf("request %d: %v", i, errs[i])
		case n[i] != r.p.MaxTokens.Value:
			t.Errorf("request %d: %d tokens, want %d", i, n[i], r.p.MaxTokens.Value)
		case !r.sampled && got[i] != solo[i]:
			t.Errorf("request %d concurrent:\n%q\nsolo:\n%q", i, got[i], solo[i])
		}
	}
}

// logValues are the values of key (slot, cached, shifts, …) in the
// server's request lines, in the order the requests ended.
func logValues(t *testing.T, log, key string) []int {
	t.Helper()
	var out []int
	for _, l := range strings.Split(log, "\n") {
		k := strings.Index(l, " "+key+"=")
		if k < 0 {
			continue
		}
		var v int
		if _, err := fmt.Sscan(l[k+len(key)+2:], &v); err != nil {
			t.Fatalf("log line %q: %s: %v", l, key, err)
		}
		out = append(out, v)
	}
	return out
}

// TestPrefixReuse: a prompt that extends what a slot holds goes to that
// slot and prefills only the new tokens — the engine feeds no others —
// and continues as a cold slot's prefill of the whole prompt does. An
// unrelated prompt in between goes to the slot idle longest, leaving that
// cache alone.
func TestPrefixReuse(t *testing.T) {
	path := stories(t)
	m := load(t, path, LoadOptions{Parallel: 2})
	ts := start(t, m, Options{})
	tok := ts.m.Tokenizer
	const n = 16
	complete := func(prompt []int32) *openai.Completion {
		t.Helper()
		c, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: "any",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: toInt64(prompt)},
			MaxTokens: openai.Int(n), Temperature: openai.Float(0)}, greedy...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := tok.Encode("Once upon a time", true)
	a := complete(first)
	// The slot holds the prompt and every reply token but the last; send
	// them back with more.
	ids := referenceIDs(t, path, first, n)
	if tok.Decode(ids) != a.Choices[0].Text {
		t.Fatalf("reply %q, the CLI's %q", a.Choices[0].Text, tok.Decode(ids))
	}
	complete(tok.Encode("The dog ran", true))
	second := append(append(slices.Clone(first), ids...), tok.Encode(" The end", false)...)
	before := m.Sched.e.Stats()
	b := complete(second)
	after := m.Sched.e.Stats()
	cached := len(first) + n - 1
	if c := b.Usage.PromptTokensDetails.CachedTokens; c != int64(cached) {
		t.Errorf("second request reused %d tokens, want the %d the slot holds", c, cached)
	}
	// A cold slot feeds the whole prompt and all but the last reply token.
	if fed, want := after.Tokens-before.Tokens, int64(len(second)-cached+n-1); fed != want {
		t.Errorf("the engine fed %d tokens for the second request, want %d (a cold slot: %d)", fed, want, len(second)+n-1)
	}
	if want := reference(t, path, second, n); b.Choices[0].Text != want {
		t.Errorf("continued on the cache: %q, fresh: %q", b.Choices[0].Text, want)
	}
	waitFor(t, "the log lines", func() bool { return len(logValues(t, ts.log.String(), "slot")) == 3 })
	if s := logValues(t, ts.log.String(), "slot"); s[0] == s[1] || s[2] != s[0] {
		t.Errorf("slots %v: want the first and last request on one slot, the unrelated one on the other", s)
	}
}

func toInt64(ids []int32) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// TestContextShift: with context shift on, each slot shifts its own
// context — a slot holds -c / --parallel = 128 tokens here — as the CLI
// does on a context of that size: two generations of 300 tokens side by
// side, each through several shifts, give the CLI's text. A request with
// no token limit stops at the model's training context, and a prompt over
// a slot's context is cut as llama-server cuts it. With context shift
// off, a generation ends at the full context and such a prompt is refused.
func TestContextShift(t *testing.T) {
	path := stories(t)
	const slotCtx = testCtx / 4
	o := glintOpts
	o.Context = slotCtx
	shifting := engine.SessionOptions{ContextShift: true, Keep: 1} // the CLI's: the BOS
	m := load(t, path, LoadOptions{Parallel: 4, ContextShift: true})
	ts := start(t, m, Options{})
	tok := m.Tokenizer
	prompts := []string{"Once upon a time", "Tom and Lily went to the park"}
	var wg sync.WaitGroup
	got := make([]string, len(prompts))
	errs := make([]error, len(prompts))
	for i, prompt := range prompts {
		wg.Go(func() {
			if i == 1 {
				got[i], _, _, errs[i] = streamCompletionErr(ts, completionParams(prompt, 300), greedy...)
				return
			}
			c, err := ts.client.Completions.New(context.Background(), completionParams(prompt, 300), greedy...)
			if errs[i] = err; err == nil {
				got[i] = c.Choices[0].Text
			}
		})
	}
	wg.Wait()
	for i, prompt := range prompts {
		if want := referenceWith(t, path, o, shifting, tok.Encode(prompt, true), 300); errs[i] != nil || got[i] != want {
			t.Errorf("%q through shifts: %q (%v), the CLI's on -c %d: %q", prompt, got[i], errs[i], slotCtx, want)
		}
	}
	waitFor(t, "the log lines", func() bool { return len(logValues(t, ts.log.String(), "shifts")) == 2 })
	for _, s := range logValues(t, ts.log.String(), "shifts") {
		if s < 3 {
			t.Errorf("%d shifts in 300 tokens on a context of %d", s, slotCtx)
		}
	}

	// A prompt of 200 tokens: llama-server keeps n_keep (0) of them and
	// drops whole blocks of (128 - 0) / 2 = 64 tokens, (200 - 64) / 64 = 2
	// of them, keeping the last 72.
	long := tok.Encode(strings.Repeat("Lily and Tom play with a ball. ", 40), true)[:200]
	c, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: "any",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: toInt64(long)},
		MaxTokens: openai.Int(8), Temperature: openai.Float(0)}, greedy...)
	if err != nil {
		t.Fatal(err)
	}
	if want := referenceWith(t, path, o, shifting, long[128:], 8); c.Usage.PromptTokens != 72 || c.Choices[0].Text != want {
		t.Errorf("a prompt over the context: %d prompt tokens, %q; want 72, %q", c.Usage.PromptTokens, c.Choices[0].Text, want)
	}

	// No token limit: the generation stops where prompt and reply reach the
	// training context (stories260K's is 2048; a scheduler told 200 stands
	// in for it, to keep the test short).
	m2 := load(t, path, LoadOptions{Parallel: 4})
	m2.Sched.Close()
	if m2.Sched, err = NewScheduler(m2.model.Engine, m2.Tokenizer, SchedulerOptions{ContextShift: true, Trained: 200}); err != nil {
		t.Fatal(err)
	}
	ts2 := start(t, m2, Options{})
	prompt := tok.Encode(prompts[0], true)
	c, err = ts2.client.Completions.New(context.Background(), completionParams(prompts[0], -1), greedy...)
	if err != nil {
		t.Fatal(err)
	}
	if n := 200 - len(prompt); c.Usage.CompletionTokens != int64(n) || c.Choices[0].FinishReason != "length" ||
		c.Choices[0].Text != referenceWith(t, path, o, shifting, prompt, n) {
		t.Errorf("without a limit: %d tokens (%s), want the CLI's %d", c.Usage.CompletionTokens, c.Choices[0].FinishReason, n)
	}

	// Context shift off: the reply ends at the full slot, as the CLI's on
	// -c 128 with --no-context-shift (its last token chosen from the last
	// cell's logits), and the long prompt is refused.
	ts3 := start(t, load(t, path, LoadOptions{Parallel: 4}), Options{})
	c, err = ts3.client.Completions.New(context.Background(), completionParams(prompts[0], 300), greedy...)
	if err != nil {
		t.Fatal(err)
	}
	if n := slotCtx - len(prompt) + 1; c.Usage.CompletionTokens != int64(n) || c.Choices[0].FinishReason != "length" ||
		c.Choices[0].Text != referenceWith(t, path, o, engine.SessionOptions{}, prompt, 300) {
		t.Errorf("context shift off: %d tokens (%s), want the CLI's %d", c.Usage.CompletionTokens, c.Choices[0].FinishReason, n)
	}
	code, body := ts3.post(t, "/v1/completions", fmt.Sprintf(`{"prompt": %s, "max_tokens": 4}`, strings.Join(strings.Fields(fmt.Sprint(long)), ",")))
	checkError(t, "a prompt over the slot's context", code, body, 400, "does not fit the context of 128")
}

// stepBackend runs hook before every Embedding — one per forward pass of a
// batch — so that a test can slow the engine's steps or hold them.
type stepBackend struct {
	backend.Backend
	hook func()
}

func (b *stepBackend) Embedding(dst, table, ids backend.Tensor, n int) {
	b.hook()
	b.Backend.Embedding(dst, table, ids, n)
}

func stepHook(hook func()) func(backend.Backend) backend.Backend {
	return func(b backend.Backend) backend.Backend { return &stepBackend{b, hook} }
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDroppedStreamFreesSlot: a client that goes away mid-stream, or while
// it waits for a whole reply, cancels its generation within a step: its
// slot is freed and the engine stops stepping. The slot keeps the tokens it
// fed, its KV cells hold exactly those, and the next request on the only
// slot reuses them and gives the CLI's text.
func TestDroppedStreamFreesSlot(t *testing.T) {
	path := stories(t)
	m := load(t, path, LoadOptions{Queue: 4, Options: glint.Options{Wrap: stepHook(func() { time.Sleep(2 * time.Millisecond) })}})
	ts := start(t, m, Options{})
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	want := reference(t, path, prompt, 12)
	p := completionParams("Once upon a time", -1) // until the context is full: 511 tokens, over a second
	for i, streamed := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		if streamed {
			s := ts.client.Completions.NewStreaming(ctx, p, greedy...)
			for k := 0; k < 3 && s.Next(); k++ {
			}
			cancel()
			s.Close()
		} else {
			done := make(chan error, 1)
			go func() {
				_, err := ts.client.Completions.New(ctx, p, greedy...)
				done <- err
			}()
			waitFor(t, "the request on the slot", func() bool { return m.Sched.Status().Processing == 1 })
			time.Sleep(20 * time.Millisecond)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("the dropped request: %v", err)
			}
		}
		waitFor(t, "the slot to be freed", func() bool { return m.Sched.Status().Processing == 0 })
		steps := m.Sched.e.Stats().Steps
		time.Sleep(50 * time.Millisecond)
		if now := m.Sched.e.Stats().Steps; now != steps {
			t.Errorf("streamed %v: %d engine steps after the slot was freed", streamed, now-steps)
		}
		waitFor(t, "the request's log line", func() bool { return strings.Count(ts.log.String(), "ended=") == i+1 })
		if gen := logValues(t, ts.log.String(), "gen"); gen[len(gen)-1] >= testCtx-5 {
			t.Errorf("streamed %v: the dropped request generated %d tokens: it was not cancelled", streamed, gen[len(gen)-1])
		}
		got, err := ts.client.Completions.New(context.Background(), completionParams("Once upon a time", 12), greedy...)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Text != want || got.Usage.PromptTokensDetails.CachedTokens != int64(len(prompt)-1) {
			t.Errorf("after the drop: %q (%d cached), want %q (%d cached)", got.Choices[0].Text, got.Usage.PromptTokensDetails.CachedTokens, want, len(prompt)-1)
		}
		// The slot's cells hold its tokens and nothing of the dropped
		// reply: its state (which records the last cell's position) loads
		// back, which it does only when the cells end at its last token.
		m.Sched.Status() // the request's slot work happened before this
		sess := m.Sched.slots[0].sess
		state, err := sess.State()
		if err == nil {
			err = sess.LoadState(state)
		}
		if err != nil || sess.Fed() != len(prompt)+11 {
			t.Errorf("the slot after the drop: %d tokens fed, want %d (%v)", sess.Fed(), len(prompt)+11, err)
		}
	}
}

// TestQueueFull: with every slot busy and the queue full, a request gets
// 503 at once; the queued one runs when the slot frees.
func TestQueueFull(t *testing.T) {
	path := stories(t)
	var gate atomic.Pointer[chan struct{}]
	m := load(t, path, LoadOptions{Queue: 1, Options: glint.Options{Wrap: stepHook(func() {
		if g := gate.Load(); g != nil {
			<-*g
		}
	})}})
	g := make(chan struct{})
	gate.Store(&g)
	ts := start(t, m, Options{})
	body := `{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}`
	codes := make(chan int, 2)
	send := func() { c, _, _ := postErr(ts.url+"/v1/completions", body); codes <- c }
	go send()
	waitFor(t, "the first request on the slot", func() bool { return m.Sched.Status().Processing == 1 })
	go send()
	waitFor(t, "the second request in the queue", func() bool { return m.Sched.Status().Queued == 1 })
	code, b := ts.post(t, "/v1/completions", body)
	checkError(t, "queue full", code, b, 503, "busy")
	// The official client sees the same.
	_, err := ts.client.Completions.New(context.Background(), completionParams("x", 1))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Errorf("openai client: %v, want a 503 *openai.Error", err)
	}
	close(g)
	for range 2 {
		if c := <-codes; c != 200 {
			t.Errorf("a request that got in: status %d", c)
		}
	}
}

func checkError(t *testing.T, what string, code int, body []byte, wantCode int, wantMsg string) {
	t.Helper()
	var e struct {
		Error struct {
			Message *string `json:"message"`
			Type    *string `json:"type"`
		} `json:"error"`
	}
	if code != wantCode {
		t.Errorf("%s: status %d, want %d (%s)", what, code, wantCode, body)
		return
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == nil || e.Error.Type == nil || *e.Error.Type == "" {
		t.Errorf("%s: body %s is not an OpenAI error {\"error\": {\"message\", \"type\"}}", what, body)
		return
	}
	if !strings.Contains(*e.Error.Message, wantMsg) {
		t.Errorf("%s: message %q lacks %q", what, *e.Error.Message, wantMsg)
	}
}

// tinyModel is a synthetic model (no staged files needed) served with a
// built-in chat template.
func tinyModel(t *testing.T) *Model {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 2, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	return load(t, p, LoadOptions{Template: chattemplate.Choice{Builtin: "chatml"}})
}

// TestBadInput: every malformed request gets its status and an OpenAI
// error body naming what is wrong, and the server keeps serving.
func TestBadInput(t *testing.T) {
	ts := start(t, tinyModel(t), Options{MaxBody: 4096})
	long := strings.Repeat("word ", 2*testCtx)
	cases := []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"malformed JSON", "POST", "/v1/completions", `{"prompt": "x",`, 400, "malformed JSON"},
		{"not an object", "POST", "/v1/completions", `["x"]`, 400, "JSON object"},
		{"empty body", "POST", "/v1/chat/completions", ``, 400, "JSON object"},
		{"missing prompt", "POST", "/v1/completions", `{"max_tokens": 3}`, 400, `"prompt" is required`},
		{"missing messages", "POST", "/v1/chat/completions", `{"model": "m"}`, 400, `"messages"`},
		{"empty messages", "POST", "/v1/chat/completions", `{"messages": []}`, 400, `"messages"`},
		{"message without role", "POST", "/v1/chat/completions", `{"messages": [{"content": "hi"}]}`, 400, `no "role"`},
		{"messages of the wrong type", "POST", "/v1/chat/completions", `{"messages": "hi"}`, 400, `want an array`},
		{"content of the wrong type", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": 5}]}`, 400, `content`},
		{"image content", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, 400, `only text`},
		{"temperature a string", "POST", "/v1/completions", `{"prompt": "x", "temperature": "hot"}`, 400, `"temperature": want a number`},
		{"max_tokens a fraction", "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 1.5}`, 400, `"max_tokens": want an integer`},
		{"stream a string", "POST", "/v1/completions", `{"prompt": "x", "stream": "yes"}`, 400, `"stream": want a boolean`},
		{"stop a number", "POST", "/v1/completions", `{"prompt": "x", "stop": 5}`, 400, `"stop"`},
		{"prompt an object", "POST", "/v1/completions", `{"prompt": {"a": 1}}`, 400, `"prompt"`},
		{"prompt ids not integers", "POST", "/v1/completions", `{"prompt": [1.5, 2]}`, 400, `"prompt"`},
		{"prompt id outside the vocabulary", "POST", "/v1/completions", `{"prompt": [1, 99999999]}`, 400, "outside the vocabulary"},
		{"several prompts", "POST", "/v1/completions", `{"prompt": ["a", "b"]}`, 400, "prompts in one request"},
		{"empty prompt", "POST", "/v1/completions", `{"prompt": []}`, 400, "empty"},
		{"prompt over the context", "POST", "/v1/completions", fmt.Sprintf(`{"prompt": %q}`, long[:3000]), 400, "does not fit the context"},
		{"temperature above 2", "POST", "/v1/completions", `{"prompt": "x", "temperature": 3}`, 400, "out of range"},
		{"negative top_p", "POST", "/v1/completions", `{"prompt": "x", "top_p": -0.1}`, 400, "out of range"},
		{"min_p above 1", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "min_p": 1.5}`, 400, "out of range"},
		{"negative top_k", "POST", "/v1/completions", `{"prompt": "x", "top_k": -1}`, 400, "top_k"},
		{"zero max_tokens", "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 0}`, 400, "max_tokens"},
		{"max_completion_tokens below -1", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -5}`, 400, "max_completion_tokens"},
		{"seed below -1", "POST", "/v1/completions", `{"prompt": "x", "seed": -2}`, 400, "seed"},
		{"zero repeat_penalty", "POST", "/v1/completions", `{"prompt": "x", "repeat_penalty": 0}`, 400, "repeat_penalty"},
		{"repeat_last_n below -1", "POST", "/v1/completions", `{"prompt": "x", "repeat_last_n": -3}`, 400, "repeat_last_n"},
		{"n_keep below -1", "POST", "/v1/completions", `{"prompt": "x", "n_keep": -2}`, 400, "n_keep"},
		{"huge integer", "POST", "/v1/completions", `{"prompt": "x", "max_tokens": 1e40}`, 400, "max_tokens"},
		{"n of 2", "POST", "/v1/completions", `{"prompt": "x", "n": 2}`, 400, "one choice"},
		{"top_logprobs without logprobs", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}`, 400, `"top_logprobs" needs "logprobs": true`},
		{"top_logprobs over 20", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}`, 400, `"top_logprobs": 21 is out of range`},
		{"chat logprobs a number", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "logprobs": 3}`, 400, `"logprobs": want a boolean`},
		{"completion logprobs over 5", "POST", "/v1/completions", `{"prompt": "x", "logprobs": 6}`, 400, `"logprobs": 6 is out of range`},
		{"completion logprobs a boolean", "POST", "/v1/completions", `{"prompt": "x", "logprobs": true}`, 400, `"logprobs": want an integer`},
		{"top_logprobs on completions", "POST", "/v1/completions", `{"prompt": "x", "top_logprobs": 2}`, 400, `"top_logprobs" is not a field of /v1/completions`},
		{"logit_bias outside the vocabulary", "POST", "/v1/completions", `{"prompt": "x", "logit_bias": {"5": 1, "1000000": -100}}`, 400, `"logit_bias": token id 1000000 is outside the vocabulary`},
		{"logit_bias negative id", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"-1": 5}}`, 400, `"logit_bias": token id -1 is outside`},
		{"logit_bias key not an id", "POST", "/v1/completions", `{"prompt": "x", "logit_bias": {"the": 5}}`, 400, `"logit_bias": key "the"`},
		{"logit_bias over 100", "POST", "/v1/completions", `{"prompt": "x", "logit_bias": {"5": 101}}`, 400, `bias 101 is out of range`},
		{"logit_bias an array", "POST", "/v1/completions", `{"prompt": "x", "logit_bias": [[5, 1]]}`, 400, `"logit_bias": want an object`},
		{"tool_choice unknown", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}`, 400, `"tool_choice": function "g" is not among "tools"`},
		{"response_format without a schema", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {}}}`, 400, `needs "json_schema"`},
		{"store true", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "store": true}`, 400, `"store" is not supported`},
		{"tools on completions", "POST", "/v1/completions", `{"prompt": "x", "tools": []}`, 400, `"tools" is not a field of /v1/completions`},
		{"unknown field", "POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "temprature": 0}`, 400, `"temprature" is not a field of /v1/chat/completions`},
		{"field in the wrong case", "POST", "/v1/completions", `{"prompt": "x", "Temperature": 0}`, 400, `"Temperature" is not a field`},
		{"mirostat", "POST", "/v1/completions", `{"prompt": "x", "mirostat": 2}`, 400, `"mirostat" is not supported`},
		{"presence_penalty", "POST", "/v1/completions", `{"prompt": "x", "presence_penalty": 0.5}`, 400, "presence_penalty"},
		{"echo", "POST", "/v1/completions", `{"prompt": "x", "echo": true}`, 400, "echo"},
		{"body over the limit", "POST", "/v1/completions", fmt.Sprintf(`{"prompt": %q}`, strings.Repeat("x", 5000)), 413, "limit"},
		{"unknown route", "POST", "/v1/audio/speech", `{}`, 404, "no route"},
		{"root", "GET", "/", ``, 404, "no route"},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, "takes POST"},
		{"wrong method on models", "DELETE", "/v1/models", ``, 405, "takes GET"},
		{"tokenize content a number", "POST", "/tokenize", `{"content": 5}`, 400, `"content"`},
		{"tokenize ids outside the vocabulary", "POST", "/tokenize", `{"content": ["a", -1]}`, 400, "outside the vocabulary"},
		{"detokenize a string", "POST", "/detokenize", `{"tokens": "abc"}`, 400, `"tokens": want an array`},
		{"detokenize ids outside the vocabulary", "POST", "/detokenize", `{"tokens": [1, 1000000]}`, 400, "outside the vocabulary"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, ts.url+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		checkError(t, c.name, resp.StatusCode, b, c.code, c.msg)
		if c.code == 405 && resp.Header.Get("Allow") == "" {
			t.Errorf("%s: 405 without an Allow header", c.name)
		}
	}
	// The official client gets a typed error for an out-of-range field.
	p := completionParams("x", 4)
	p.Temperature = openai.Float(5)
	_, err := ts.client.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "temperature") {
		t.Errorf("openai client: %v, want a 400 naming temperature", err)
	}
	// Still serving, with every slot free.
	resp, err := http.Get(ts.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || ts.m.Sched.Status().Processing != 0 {
		t.Errorf("after the bad requests: health %d, %d slots busy", resp.StatusCode, ts.m.Sched.Status().Processing)
	}
	// Every request made one log line (as its handler returned, just after
	// the client read the reply).
	waitFor(t, "the log lines", func() bool { return strings.Count(ts.log.String(), "\n") >= len(cases)+2 })
	if lines := strings.Count(ts.log.String(), "\n"); lines != len(cases)+2 {
		t.Errorf("%d log lines for %d requests:\n%s", lines, len(cases)+2, ts.log.String())
	}
}

// TestLoading: before the model is ready every route says 503.
func TestLoading(t *testing.T) {
	ts := start(t, nil, Options{})
	for _, path := range []string{"/health", "/v1/models"} {
		resp, err := http.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		checkError(t, "loading "+path, resp.StatusCode, b, 503, "loading")
	}
	code, b := ts.post(t, "/v1/completions", `{"prompt": "x"}`)
	checkError(t, "loading completions", code, b, 503, "loading")
	ts.srv.SetModel(tinyModel(t))
	resp, err := http.Get(ts.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health after loading: %d", resp.StatusCode)
	}
}

// TestModelsAndTokenize: /v1/models lists the model; /tokenize and
// /detokenize take llama-server's shapes and invert each other.
func TestModelsAndTokenize(t *testing.T) {
	ts := start(t, load(t, stories(t), LoadOptions{Name: "stories"}), Options{})
	page, err := ts.client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "stories" || page.Data[0].Object != "model" {
		t.Errorf("models: %+v", page.Data)
	}
	tok := ts.m.Tokenizer
	text := "Lily saw a big dog."
	for _, special := range []bool{false, true} {
		code, body := ts.post(t, "/tokenize", fmt.Sprintf(`{"content": %q, "add_special": %v}`, text, special))
		var got struct{ Tokens []int32 }
		if code != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("tokenize: %d %s", code, body)
		}
		if want := tok.Encode(text, special); fmt.Sprint(got.Tokens) != fmt.Sprint(want) {
			t.Errorf("tokenize (add_special %v): %v, want %v", special, got.Tokens, want)
		}
		code, body = ts.post(t, "/detokenize", fmt.Sprintf(`{"tokens": %s}`, strings.Join(strings.Fields(fmt.Sprint(got.Tokens)), ",")))
		var dt struct{ Content string }
		if code != 200 || json.Unmarshal(body, &dt) != nil {
			t.Fatalf("detokenize: %d %s", code, body)
		}
		// SentencePiece puts a space before the text; BOS renders as its text.
		want := " " + text
		if special {
			want = tok.Token(tok.BOS()) + want
		}
		if dt.Content != want {
			t.Errorf("detokenize: %q, want %q", dt.Content, want)
		}
	}
	code, body := ts.post(t, "/tokenize", `{"content": ["Lily", 13, " ran"], "with_pieces": true}`)
	var wp struct {
		Tokens []struct {
			ID    int32
			Piece any
		}
	}
	if code != 200 || json.Unmarshal(body, &wp) != nil {
		t.Fatalf("tokenize with pieces: %d %s", code, body)
	}
	want := append(append(tok.Encode("Lily", false), 13), tok.Encode(" ran", false)...)
	if len(wp.Tokens) != len(want) {
		t.Fatalf("tokenize mixed: %s, want ids %v", body, want)
	}
	for i, p := range wp.Tokens {
		if s, ok := p.Piece.(string); !ok || p.ID != want[i] || s != string(tok.SpecialPiece(p.ID)) {
			t.Errorf("token %d: %d %v, want %d %q", i, p.ID, p.Piece, want[i], tok.SpecialPiece(want[i]))
		}
	}
}

// TestOpenCL: the server on the OpenCL backend (two slots decoding together
// on one device model) gives the CPU CLI's greedy text, as the CLI on OpenCL does.
func TestOpenCL(t *testing.T) {
	if _, err := opencl.Devices(); err != nil {
		t.Skipf("no OpenCL device: %s", strings.SplitN(err.Error(), "\n", 2)[0])
	}
	path := stories(t)
	o := glintOpts
	o.Backend = "opencl"
	m, err := Load(path, LoadOptions{Options: o, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ts := start(t, m, Options{})
	prompts := []string{"Once upon a time", "The dog"}
	var wg sync.WaitGroup
	got := make([]string, len(prompts))
	errs := make([]error, len(prompts))
	for i, prompt := range prompts {
		wg.Go(func() {
			c, err := ts.client.Completions.New(context.Background(), completionParams(prompt, 32), greedy...)
			if errs[i] = err; err == nil {
				got[i] = c.Choices[0].Text
			}
		})
	}
	wg.Wait()
	for i, prompt := range prompts {
		if want := reference(t, path, m.Tokenizer.Encode(prompt, true), 32); errs[i] != nil || got[i] != want {
			t.Errorf("%q on OpenCL: %q (%v), the CPU's %q", prompt, got[i], errs[i], want)
		}
	}
}
