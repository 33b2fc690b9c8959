package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/glint-llm/glint/internal/shared"
)

// servedProcess is `generate serve` running as a child process (this test
// binary as the command, see TestMain).
type servedProcess struct {
	cmd    *exec.Cmd
	addr   string
	client openai.Client
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan error
}

func (p *servedProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startServe runs generate serve with args on an ephemeral loopback port
// and waits until it is ready.
func startServe(t *testing.T, args ...string) *servedProcess {
	t.Helper()
	return startServeEnv(t, nil, args...)
}

// startServeEnv is startServe with env added to the environment.
func startServeEnv(t *testing.T, env []string, args ...string) *servedProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startServeExe(t, exe, env, args...)
}

// startServeExe is startServeEnv with the generate binary exe (the test
// binary itself, which runs main() when mainEnv is set, or a built one).
func startServeExe(t *testing.T, exe string, env []string, args ...string) *servedProcess {
	t.Helper()
	p := &servedProcess{exited: make(chan error, 1)}
	p.cmd = exec.Command(exe, append([]string{"serve", "--host", "127.0.0.1", "--port", "0", "-t", "1"}, args...)...)
	p.cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	r, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if a, ok := strings.CutPrefix(line, "ready on http://"); ok {
				ready <- a
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case p.addr = <-ready:
	case err := <-p.exited:
		t.Fatalf("generate serve exited (%v) before it was ready:\n%s", err, p.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("generate serve not ready after 2 minutes:\n%s", p.log())
	}
	p.client = openai.NewClient(option.WithBaseURL("http://"+p.addr+"/v1/"), option.WithAPIKey("unused"),
		option.WithMaxRetries(0), option.WithRequestTimeout(2*time.Minute))
	return p
}

// cliText is the CLI's greedy text: generate ARGS --temp 0 --ignore-eos.
func cliText(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, code := run(t, append(args, "--temp", "0", "--ignore-eos", "-t", "1")...)
	if code != 0 {
		t.Fatalf("generate %v: exit %d: %s", args, code, stderr)
	}
	return out
}

var ignoreEOS = option.WithJSONSet("ignore_eos", true)

// streamedText collects a streamed completion.
func streamedText(c openai.Client, p openai.CompletionNewParams) (string, openai.CompletionUsage, error) {
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Completions.NewStreaming(context.Background(), p, ignoreEOS)
	defer s.Close()
	var text string
	var u openai.CompletionUsage
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text += ch.Text
		}
		if s.Current().Usage.TotalTokens > 0 {
			u = s.Current().Usage
		}
	}
	return text, u, s.Err()
}

func greedyCompletion(prompt string, n int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{Model: "stories", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(n), Temperature: openai.Float(0)}
}

// TestServeCompletions: the built command serves greedy completions,
// whole and streamed, equal to the CLI's text; concurrent requests on two
// slots (more than there are slots, so some queue) each equal the CLI's.
func TestServeCompletions(t *testing.T) {
	path := shared.Models(t, "stories260K/stories260K.gguf")
	p := startServe(t, "-m", path, "--parallel", "2", "--queue", "16")
	prompts := []string{"Once upon a time", "The little bird", "Tom had a toy car", "It was a sunny day", "Lily"}
	want := make([]string, len(prompts))
	for i, pr := range prompts {
		want[i] = cliText(t, "-m", path, "-p", pr, "-n", fmt.Sprint(20+10*i))
	}
	got, err := p.client.Completions.New(context.Background(), greedyCompletion(prompts[0], 20), ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != want[0] || got.Choices[0].FinishReason != "length" || got.Usage.CompletionTokens != 20 {
		t.Errorf("completion %q (%s, %d tokens), the CLI's %q", got.Choices[0].Text, got.Choices[0].FinishReason, got.Usage.CompletionTokens, want[0])
	}
	text, u, err := streamedText(p.client, greedyCompletion(prompts[0], 20))
	if err != nil || text != want[0] || u.CompletionTokens != 20 {
		t.Errorf("streamed %q (%d tokens, %v), the CLI's %q", text, u.CompletionTokens, err, want[0])
	}

	// A bounded load: 3 rounds of every prompt, 15 requests at once (all
	// fit the queue), half of them streamed.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for round := range 3 {
		for i, pr := range prompts {
			wg.Go(func() {
				params := greedyCompletion(pr, int64(20+10*i))
				var text string
				var err error
				if (i+round)%2 == 0 {
					text, _, err = streamedText(p.client, params)
				} else {
					var c *openai.Completion
					if c, err = p.client.Completions.New(ctx, params, ignoreEOS); err == nil {
						text = c.Choices[0].Text
					}
				}
				if err != nil || text != want[i] {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("round %d, %q: %q (%v), want %q", round, pr, text, err, want[i]))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	// One log line per request, 2 + 15, written as each handler returns
	// (just after its client has read the end).
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(p.log(), "POST /v1/completions 200") < 17 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(p.log(), "POST /v1/completions 200"); n != 17 {
		t.Errorf("%d request lines in the log, want 17:\n%s", n, p.log())
	}
}

// TestServeChat: a chat completion through the built command renders the
// model's template and replies with the CLI's greedy text for the prompt
// that `generate template` and `generate tokenize` make.
func TestServeChat(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	msgs := filepath.Join(t.TempDir(), "msgs.json")
	if err := os.WriteFile(msgs, []byte(`[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered, stderr, code := run(t, "template", "-m", path, "--messages", msgs)
	if code != 0 {
		t.Fatalf("generate template: %s", stderr)
	}
	ids, stderr, code := run(t, "tokenize", "-m", path, "-p", rendered, "--no-bos")
	if code != 0 {
		t.Fatalf("generate tokenize: %s", stderr)
	}
	const n = 20
	want := cliText(t, "-m", path, "--prompt-ids", strings.TrimSpace(ids), "-n", fmt.Sprint(n))

	p := startServe(t, "-m", path)
	params := openai.ChatCompletionNewParams{Model: "llama3-tiny", MaxCompletionTokens: openai.Int(n), Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Name a colour.")}}
	got, err := p.client.Chat.Completions.New(context.Background(), params, ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Choices[0]; c.Message.Content != want || c.FinishReason != "length" {
		t.Errorf("chat %q (%s), the CLI's %q", c.Message.Content, c.FinishReason, want)
	}
	if np := len(strings.Fields(ids)); got.Usage.PromptTokens != int64(np) {
		t.Errorf("prompt_tokens %d, generate tokenize made %d", got.Usage.PromptTokens, np)
	}
	s := p.client.Chat.Completions.NewStreaming(context.Background(), params, ignoreEOS)
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if text.String() != want {
		t.Errorf("streamed chat %q, the CLI's %q", text.String(), want)
	}
}

// TestServeBadInputAndSIGTERM: bad requests through the built command get
// their status and an error body; SIGTERM lets the running stream finish,
// refuses new connections, and exits 0.
func TestServeBadInputAndSIGTERM(t *testing.T) {
	path := shared.Models(t, "stories260K/stories260K.gguf")
	p := startServe(t, "-m", path, "-c", "2048", "--max-body", "2000", "--no-context-shift", "--shutdown-timeout", "2m")
	base := "http://" + p.addr
	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/v1/completions", `{"prompt": `, 400},
		{"POST", "/v1/completions", `{"prompt": "x", "top_k": "many"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`, 400}, // no template
		{"POST", "/v1/completions", `{"prompt": "` + strings.Repeat("a", 3000) + `"}`, 413},
		{"GET", "/v1/nothing", ``, 404},
		{"PUT", "/tokenize", `{}`, 405},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !bytes.Contains(b, []byte(`"error"`)) || !bytes.Contains(b, []byte(`"message"`)) {
			t.Errorf("%s %s: %d %s, want %d and an error body", c.method, c.path, resp.StatusCode, b, c.code)
		}
	}

	// A stream to the end of the 2048-token context (--no-context-shift:
	// it ends there), SIGTERM after its first chunk.
	params := greedyCompletion("Once upon a time", -1)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := p.client.Completions.NewStreaming(context.Background(), params, ignoreEOS)
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// New connections are refused while the stream goes on.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 30 s after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var u openai.CompletionUsage
	for s.Next() {
		if s.Current().Usage.TotalTokens > 0 {
			u = s.Current().Usage
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("the running stream broke: %v", err)
	}
	s.Close()
	// As the CLI, the last token is chosen from the last cell's logits.
	if want := 2048 - u.PromptTokens + 1; u.CompletionTokens != want {
		t.Errorf("the drained stream made %d tokens, want %d (to the end of the context)", u.CompletionTokens, want)
	}
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		if err != nil && errors.As(err, &ee) {
			t.Errorf("exit status %d after SIGTERM, want 0:\n%s", ee.ExitCode(), p.log())
		} else if err != nil {
			t.Error(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGTERM:\n%s", p.log())
	}
	log := p.log()
	drain, line := strings.Index(log, "draining"), strings.LastIndex(log, "POST /v1/completions 200")
	if drain < 0 || line < drain {
		t.Errorf("the log does not show the stream finishing after the drain began:\n%s", log)
	}
}

// TestServeShutdownDeadline: SIGTERM with a client stuck in the middle of
// its request body and a generation running to the end of a long context:
// after --shutdown-timeout the server cancels both and exits 0.
func TestServeShutdownDeadline(t *testing.T) {
	path := shared.Models(t, "stories260K/stories260K.gguf")
	p := startServe(t, "-m", path, "-c", "65536", "--no-context-shift", "--shutdown-timeout", "2s")
	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	s := p.client.Completions.NewStreaming(context.Background(), greedyCompletion("Once upon a time", -1), ignoreEOS)
	defer s.Close()
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	begin := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0:\n%s", err, p.log())
		}
		if d := time.Since(begin); d > 15*time.Second {
			t.Errorf("exited %v after SIGTERM, want within 15 s", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15 s after SIGTERM:\n%s", p.log())
	}
	if !strings.Contains(p.log(), "cancelled") {
		t.Errorf("the log does not say the requests were cancelled:\n%s", p.log())
	}
}

// TestServeAPIKeyEnvAndFile: keys from GLINT_API_KEY and --api-key-file
// both open the API; none, or another, gets 401; /health needs none.
func TestServeAPIKeyEnvAndFile(t *testing.T) {
	path := shared.Models(t, "stories260K/stories260K.gguf")
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# team keys\nfile-key\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServeEnv(t, []string{"GLINT_API_KEY=env-key"}, "-m", path, "--api-key-file", file)
	for key, want := range map[string]int{"env-key": 200, "file-key": 200, "": 401, "other": 401, "# team keys": 401} {
		req, _ := http.NewRequest("GET", "http://"+p.addr+"/v1/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 401 && !bytes.Contains(b, []byte("authentication_error"))) {
			t.Errorf("key %q: %d %s, want %d", key, resp.StatusCode, b, want)
		}
	}
	resp, err := http.Get("http://" + p.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health without a key: %d", resp.StatusCode)
	}
	if _, stderr, code := run(t, "serve", "-m", path, "--api-key-file", filepath.Join(t.TempDir(), "none")); code == 0 || !strings.Contains(stderr, "api-key-file") {
		t.Errorf("a missing key file: exit %d, %s", code, stderr)
	}
}

// TestListenNetwork: IPv4 literals (0.0.0.0 too) listen on IPv4 only,
// IPv6 literals on IPv6 only; and a loopback IPv4 listener refuses ::1.
func TestListenNetwork(t *testing.T) {
	for host, want := range map[string]string{"0.0.0.0": "tcp4", "127.0.0.1": "tcp4", "::": "tcp6", "[::1]": "tcp6", "::1": "tcp6", "localhost": "tcp"} {
		if got := listenNetwork(host); got != want {
			t.Errorf("listenNetwork(%q) = %s, want %s", host, got, want)
		}
	}
	ln, err := net.Listen(listenNetwork("127.0.0.1"), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if a := ln.Addr().(*net.TCPAddr); a.IP.To4() == nil {
		t.Errorf("listening on %v", a)
	}
}

// plainBinary is a generate binary as users run it: the test binary
// itself, or, when that runs under the race detector (whose shadow memory
// would be measured too), one built without it.
func plainBinary(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		return exe
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("under -race this test measures a binary built without it, and there is no go command to build one")
	}
	exe := filepath.Join(t.TempDir(), "generate")
	if out, err := exec.Command(gobin, "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// TestServeTokenizeMemory: four 8 MB /tokenize bodies at once: the server
// lives (each is answered 200, or 503 when the work memory is taken) and
// its peak RSS (VmHWM) stays under 1.5 GB.
func TestServeTokenizeMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tokenizes 8 MB prompts")
	}
	path := shared.Models(t, "stories260K/stories260K.gguf")
	p := startServeExe(t, plainBinary(t), nil, "-m", path)
	body := fmt.Sprintf(`{"content": %q, "with_pieces": true}`, strings.Repeat("Once upon a time, there was a girl. ", 8_000_000/36))
	codes := make(chan int, 4)
	for range 4 {
		go func() {
			resp, err := http.Post("http://"+p.addr+"/tokenize", "application/json", strings.NewReader(body))
			if err != nil {
				codes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	ok := 0
	for range 4 {
		switch c := <-codes; c {
		case 200:
			ok++
		case 503:
		default:
			t.Errorf("an 8 MB tokenize: status %d", c)
		}
	}
	if ok == 0 {
		t.Errorf("no 8 MB tokenize succeeded")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var hwm int64
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%d", &hwm)
		}
	}
	t.Logf("%d of 4 answered 200; peak RSS %d MB", ok, hwm>>10)
	if hwm<<10 > 1500<<20 {
		t.Errorf("peak RSS %d MB, want under 1500", hwm>>10)
	}
	resp, err := http.Get("http://" + p.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
