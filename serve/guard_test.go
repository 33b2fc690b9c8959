package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/glint-llm/glint"
)

// do sends one request with headers and returns the response's status,
// headers and body.
func do(t *testing.T, method, url, body string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

var jsonHeader = map[string]string{"Content-Type": "application/json"}

// TestAPIKeys: with keys set every route but /health wants one, as a
// Bearer token (401 in OpenAI's shape otherwise); a slot's cached prompt
// is reused and reported only for the key that filled it, and another
// key's request recomputes the whole prompt and gives the same text.
func TestAPIKeys(t *testing.T) {
	path := stories(t)
	m := load(t, path, LoadOptions{})
	ts := start(t, m, Options{APIKeys: []string{"key-one", "key-two"}})
	body := `{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}`
	for _, c := range []struct {
		name, auth string
		code       int
		msg        string
	}{
		{"no key", "", 401, "API key is required"},
		{"wrong key", "Bearer key-three", 401, "not valid"},
		{"a prefix of a key", "Bearer key-on", 401, "not valid"},
		{"not Bearer", "Basic key-one", 401, "not valid"},
		{"right key", "Bearer key-one", 200, ""},
		{"other key, lower-case scheme", "bearer key-two", 200, ""},
	} {
		h := map[string]string{"Content-Type": "application/json"}
		if c.auth != "" {
			h["Authorization"] = c.auth
		}
		code, hdr, b := do(t, "POST", ts.url+"/v1/completions", body, h)
		if c.code == 200 {
			if code != 200 {
				t.Errorf("%s: %d %s", c.name, code, b)
			}
			continue
		}
		checkError(t, c.name, code, b, c.code, c.msg)
		if !strings.Contains(string(b), `"type":"authentication_error"`) || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %s (WWW-Authenticate %q), want an authentication_error", c.name, b, hdr.Get("WWW-Authenticate"))
		}
	}
	if code, _, b := do(t, "GET", ts.url+"/v1/models", "", nil); code != 401 {
		t.Errorf("models without a key: %d %s", code, b)
	}
	if code, _, b := do(t, "GET", ts.url+"/health", "", nil); code != 200 {
		t.Errorf("health without a key: %d %s", code, b)
	}

	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	prompt := m.Tokenizer.Encode("Once upon a time there was", true)
	want := reference(t, path, prompt, 6)
	run := func(key string) (string, int64, int64) {
		t.Helper()
		fed := m.Sched.e.Stats().Tokens
		c := client(key)
		got, err := c.Completions.New(context.Background(), completionParams("Once upon a time there was", 6), greedy...)
		if err != nil {
			t.Fatal(err)
		}
		return got.Choices[0].Text, got.Usage.PromptTokensDetails.CachedTokens, m.Sched.e.Stats().Tokens - fed
	}
	// One slot: key one fills it, then reuses it.
	run("key-one")
	text, cached, fed := run("key-one")
	if text != want || cached != int64(len(prompt)-1) {
		t.Errorf("key one again: %q with %d cached, want %q with %d", text, cached, want, len(prompt)-1)
	}
	// Key two sends the same prompt: nothing of key one's is reused.
	text, cached, fed2 := run("key-two")
	if text != want || cached != 0 || fed2 != fed+int64(len(prompt)-1) {
		t.Errorf("key two: %q with %d cached and %d tokens fed, want %q with 0 cached and %d fed (the whole prompt)",
			text, cached, fed2, want, fed+int64(len(prompt)-1))
	}
}

// TestBrowserGuards: POSTs must be JSON (a browser's cross-site text/plain
// POST gets 415); a loopback server without keys answers only loopback
// Host names (DNS rebinding) and refuses other origins; --cors-origin
// answers preflights and sets Access-Control-Allow-Origin for its origins
// only.
func TestBrowserGuards(t *testing.T) {
	m := tinyModel(t)
	ts := start(t, m, Options{})
	body := `{"content": "hi"}`
	for _, c := range []struct {
		name   string
		header map[string]string
		code   int
	}{
		{"json", jsonHeader, 200},
		{"json with charset", map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, 415},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"no type", map[string]string{}, 415},
		{"localhost", map[string]string{"Content-Type": "application/json", "Host": "localhost:8080"}, 200},
		{"[::1]", map[string]string{"Content-Type": "application/json", "Host": "[::1]:80"}, 200},
		{"127.1.2.3", map[string]string{"Content-Type": "application/json", "Host": "127.1.2.3"}, 200},
		{"rebound name", map[string]string{"Content-Type": "application/json", "Host": "attacker.example:8080"}, 403},
		{"other origin", map[string]string{"Content-Type": "application/json", "Origin": "https://attacker.example"}, 403},
		{"own origin", map[string]string{"Content-Type": "application/json", "Origin": ts.url}, 200},
	} {
		code, _, b := do(t, "POST", ts.url+"/tokenize", body, c.header)
		if code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, b, c.code)
		}
	}
	code, hdr, _ := do(t, "OPTIONS", ts.url+"/v1/chat/completions", "", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
	if code < 400 || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight without --cors-origin: %d, Allow-Origin %q", code, hdr.Get("Access-Control-Allow-Origin"))
	}

	cors := start(t, m, Options{CORSOrigins: []string{"https://app.example"}, AllowedHosts: []string{"glint.internal"}})
	code, hdr, _ = do(t, "OPTIONS", cors.url+"/v1/chat/completions", "", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
	if code != 204 || hdr.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", code, hdr)
	}
	code, hdr, b := do(t, "POST", cors.url+"/tokenize", body, map[string]string{"Content-Type": "application/json", "Origin": "https://app.example"})
	if code != 200 || hdr.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("CORS POST: %d %s, Allow-Origin %q", code, b, hdr.Get("Access-Control-Allow-Origin"))
	}
	if code, hdr, _ := do(t, "POST", cors.url+"/tokenize", body, map[string]string{"Content-Type": "application/json", "Origin": "https://other.example"}); code != 403 || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS POST from another origin: %d, Allow-Origin %q", code, hdr.Get("Access-Control-Allow-Origin"))
	}
	if code, _, b := do(t, "POST", cors.url+"/tokenize", body, map[string]string{"Content-Type": "application/json", "Host": "glint.internal:8080"}); code != 200 {
		t.Errorf("an allowed host: %d %s", code, b)
	}
	if code, _, _ := do(t, "POST", cors.url+"/tokenize", body, map[string]string{"Content-Type": "application/json", "Host": "attacker.example"}); code != 403 {
		t.Errorf("a host not allowed: %d", code)
	}
	// With keys, any Host: the key is what a rebinding page lacks.
	keyed := start(t, m, Options{APIKeys: []string{"k"}})
	if code, _, b := do(t, "POST", keyed.url+"/tokenize", body, map[string]string{"Content-Type": "application/json", "Host": "glint.example", "Authorization": "Bearer k"}); code != 200 {
		t.Errorf("keyed server, another Host: %d %s", code, b)
	}
}

// TestLimits: the per-request caps answer 413 or 400 naming the field.
func TestLimits(t *testing.T) {
	ts := start(t, tinyModel(t), Options{Limits: Limits{TokenizeBytes: 100, DetokenizeIDs: 10, ResponseBytes: 5,
		Stops: 2, StopBytes: 10, Messages: 2, MaxTokens: 50}})
	msgs := func(n int) string {
		return `[` + strings.Repeat(`{"role": "user", "content": "x"},`, n-1) + `{"role": "user", "content": "x"}]`
	}
	for _, c := range []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"tokenize content", "/tokenize", fmt.Sprintf(`{"content": %q}`, strings.Repeat("a", 100)), 413, `"content"`},
		{"detokenize ids", "/detokenize", `{"tokens": [1,1,1,1,1,1,1,1,1,1,1]}`, 413, `"tokens": 11 ids`},
		{"detokenize text", "/detokenize", `{"tokens": [100,101,102,103,104,105,106,107,108,109]}`, 413, "limit of 5 bytes"},
		{"stop count", "/v1/completions", `{"prompt": "x", "stop": ["a", "b", "c"]}`, 400, `"stop": 3 strings`},
		{"stop bytes", "/v1/completions", `{"prompt": "x", "stop": ["abcdef", "ghijkl"]}`, 400, `"stop": 12 bytes`},
		{"max_tokens", "/v1/completions", `{"prompt": "x", "max_tokens": 51}`, 400, `"max_tokens": 51`},
		{"n_predict", "/v1/completions", `{"prompt": "x", "n_predict": 1000000}`, 400, `"n_predict"`},
		{"messages", "/v1/chat/completions", `{"messages": ` + msgs(3) + `}`, 400, `"messages": 3 messages`},
		{"no content", "/v1/chat/completions", `{"messages": [{"role": "system", "content": "s"}, {"role": "user"}]}`, 400, `"messages[1]": no "content"`},
		{"null content", "/v1/chat/completions", `{"messages": [{"role": "user", "content": null}]}`, 400, `"messages[0]": no "content"`},
	} {
		code, b := ts.post(t, c.path, c.body)
		checkError(t, c.name, code, b, c.code, c.msg)
	}
	for _, body := range []string{
		`{"content": "short"}`,
		`{"prompt": "x", "stop": ["a", "b"], "max_tokens": 50}`,
		`{"messages": ` + msgs(2) + `, "max_tokens": 2}`,
		// An assistant turn of tool calls has no content.
		`{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}], "max_tokens": 2}`,
	} {
		path := "/v1/completions"
		switch {
		case strings.Contains(body, "messages"):
			path = "/v1/chat/completions"
		case strings.Contains(body, "content"):
			path = "/tokenize"
		}
		if code, b := ts.post(t, path, body); code != 200 {
			t.Errorf("%s %s: %d %s", path, body, code, b)
		}
	}
}

// TestWorkBudget: a request reserves its work's memory from its declared
// body size before reading it; one that does not fit beside those under
// way gets 503 with Retry-After at once, while small requests still fit.
func TestWorkBudget(t *testing.T) {
	const body = 1 << 20
	ts := start(t, tinyModel(t), Options{MaxBody: body, WorkMemory: (body + 4096) * workCost * 3 / 2})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A big body on its way (it stops after its first byte).
	fmt.Fprintf(conn, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", body)
	waitFor(t, "the slow body's reservation", func() bool {
		ts.srv.work.mu.Lock()
		defer ts.srv.work.mu.Unlock()
		return ts.srv.work.used > 0
	})
	big := fmt.Sprintf(`{"content": %q}`, strings.Repeat("a", body-20))
	code, hdr, b := do(t, "POST", ts.url+"/tokenize", big, jsonHeader)
	checkError(t, "a second big body", code, b, 503, "busy")
	if hdr.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	if code, b := ts.post(t, "/tokenize", `{"content": "small"}`); code != 200 {
		t.Errorf("a small request beside the big one: %d %s", code, b)
	}
	conn.Close()
	waitFor(t, "the reservation's release", func() bool {
		ts.srv.work.mu.Lock()
		defer ts.srv.work.mu.Unlock()
		return ts.srv.work.used == 0
	})
	if code, _, b := do(t, "POST", ts.url+"/tokenize", big, jsonHeader); code != 200 {
		t.Errorf("the big body alone: %d %.200s", code, b)
	}
}

// TestSlowClients: a client that sends part of its headers, or of its
// body, and then nothing is cut off after the timeouts; the server keeps
// answering.
func TestSlowClients(t *testing.T) {
	ts := start(t, tinyModel(t), Options{ReadHeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(ts.url, "http://")
	for _, c := range []struct{ name, sent, status string }{
		{"headers", "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n", ""},
		{"body", "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", "HTTP/1.1 408"},
		{"chunked body", "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", "HTTP/1.1 408"},
		{"GET with a body", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n{", ""},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		io.WriteString(conn, c.sent)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		reply, err := io.ReadAll(bufio.NewReader(conn))
		conn.Close()
		if !strings.HasPrefix(string(reply), c.status) {
			t.Errorf("%s: the reply starts %.40q, want %q", c.name, reply, c.status)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: the connection was still open after 20 s", c.name)
		} else if d := time.Since(begin); d > 10*time.Second {
			t.Errorf("%s: cut off after %v", c.name, d)
		}
	}
	if code, b := ts.post(t, "/tokenize", `{"content": "still here"}`); code != 200 {
		t.Errorf("after the slow clients: %d %s", code, b)
	}
}

// TestLogLineInjection: a path with an escaped newline makes one log line
// that shows it quoted, not a forged second line.
func TestLogLineInjection(t *testing.T) {
	ts := start(t, tinyModel(t), Options{})
	resp, err := http.Get(ts.url + "/x%0a2026/01/01%2000:00:00%20GET%20/v1/models%20200")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the log line", func() bool { return strings.Contains(ts.log.String(), "\n") })
	log := ts.log.String()
	if n := strings.Count(log, "\n"); n != 1 || !strings.Contains(log, `"/x\n2026/01/01 00:00:00 GET /v1/models 200" 404`) {
		t.Errorf("%d log lines:\n%s", n, log)
	}
}

// TestPanicRecovered: a panic on a slot's goroutine answers that request
// with 500 and a log line; the slot is freed and the next request served.
func TestPanicRecovered(t *testing.T) {
	m := tinyModel(t)
	m.Sched.testHook = func(j *job) {
		if j.req.MaxTokens == 7 {
			panic("injected")
		}
	}
	ts := start(t, m, Options{})
	code, b := ts.post(t, "/v1/completions", `{"prompt": "x", "max_tokens": 7}`)
	checkError(t, "panicking request", code, b, 500, "panic on slot 0: injected")
	code, b = ts.post(t, "/v1/completions", `{"prompt": "x", "max_tokens": 7, "stream": true}`)
	if code != 200 || !strings.Contains(string(b), "injected") || !strings.Contains(string(b), "server_error") {
		t.Errorf("panicking stream: %d %s, want an error event", code, b)
	}
	if code, b := ts.post(t, "/v1/completions", `{"prompt": "x", "max_tokens": 3}`); code != 200 {
		t.Errorf("after the panics: %d %s", code, b)
	}
	waitFor(t, "the log lines", func() bool { return strings.Count(ts.log.String(), "\n") >= 3 })
	if !strings.Contains(ts.log.String(), "500") || !strings.Contains(ts.log.String(), "injected") {
		t.Errorf("the log does not show the panic:\n%s", ts.log.String())
	}
}

// TestStepPanicRecovered: a panic inside an engine step (here the
// backend's first op) fails the requests of that step with 500; the
// engine goes on, and the next request on the slot gives the CLI's text.
func TestStepPanicRecovered(t *testing.T) {
	path := stories(t)
	var boom atomic.Bool
	m := load(t, path, LoadOptions{Options: glint.Options{Wrap: stepHook(func() {
		if boom.CompareAndSwap(true, false) {
			panic("in a step")
		}
	})}})
	ts := start(t, m, Options{})
	boom.Store(true)
	code, b := ts.post(t, "/v1/completions", `{"prompt": "Once upon a time", "max_tokens": 4}`)
	checkError(t, "a step that panics", code, b, 500, "panic in a step")
	prompt := m.Tokenizer.Encode("Once upon a time", true)
	got, err := ts.client.Completions.New(context.Background(), completionParams("Once upon a time", 8), greedy...)
	if err != nil {
		t.Fatal(err)
	}
	if want := reference(t, path, prompt, 8); got.Choices[0].Text != want {
		t.Errorf("after the panic: %q, want %q", got.Choices[0].Text, want)
	}
}
