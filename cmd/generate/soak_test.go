package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/glint-llm/glint/internal/shared"
)

// The soak's load: 200 requests over 16 clients against 4 slots, a quarter
// of them streams the client cuts after a few chunks, beside 20 bodies that
// stall after "{" and 4 /tokenize bodies of 8 MB. Bounded in count; the
// client-side deadlines bound it in time.
const (
	soakRequests   = 200
	soakClients    = 16
	soakParallel   = 4
	soakSlowBodies = 20
	soakBigBodies  = 4
	soakBigBody    = 8_000_000 // bytes, under serve.DefaultMaxBody (8 MiB)
	soakCutAfter   = 3         // chunks read before a cut stream is closed
	// soakSlowHold is how long a stalled body is held unless the server cuts
	// it first: past the ~35 s read timeout the server is to get, so a cut
	// shows in the summary, and finite, so the soak ends against a server
	// that waits for the body forever.
	soakSlowHold = 45 * time.Second
)

// soakSpec is one request of the soak: which endpoint, prompt and length,
// streamed or not; Cut ones are streams the client closes mid-way.
type soakSpec struct {
	Chat, Stream bool
	Prompt       string
	N            int
	Cut          bool
}

func (s soakSpec) solo() soakSpec { s.Cut = false; return s }

func (s soakSpec) body() []byte {
	m := map[string]any{"model": "soak", "max_tokens": s.N, "temperature": 0, "ignore_eos": true, "stream": s.Stream}
	if s.Chat {
		m["messages"] = []map[string]string{{"role": "user", "content": s.Prompt}}
	} else {
		m["prompt"] = s.Prompt
	}
	b, _ := json.Marshal(m)
	return b
}

func (s soakSpec) path() string {
	if s.Chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// soakServer is `generate serve`, the real binary, on a loopback port.
type soakServer struct {
	cmd    *exec.Cmd
	base   string
	mu     sync.Mutex
	log    bytes.Buffer
	exited chan error
	http   *http.Client
}

func (s *soakServer) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// soakBinary is the generate binary: $GLINT_SOAK_BIN (make soak builds
// bin/generate), or one built here.
func soakBinary(t *testing.T) string {
	if p := os.Getenv("GLINT_SOAK_BIN"); p != "" {
		return p
	}
	p := filepath.Join(t.TempDir(), "generate")
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", p, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building generate: %v\n%s", err, out)
	}
	return p
}

func startSoakServer(t *testing.T, bin, model string) *soakServer {
	s := &soakServer{exited: make(chan error, 1)}
	s.cmd = exec.Command(bin, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0",
		"--parallel", fmt.Sprint(soakParallel), "-c", fmt.Sprint(soakParallel*512), "-t", fmt.Sprint(min(runtime.NumCPU(), 4)))
	r, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if a, ok := strings.CutPrefix(sc.Text(), "ready on http://"); ok {
				ready <- a
			}
		}
		io.Copy(io.Discard, r)
		s.exited <- s.cmd.Wait()
	}()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
	select {
	case a := <-ready:
		s.base = "http://" + a
	case err := <-s.exited:
		t.Fatalf("generate serve exited (%v) before it was ready:\n%s", err, s.stderr())
	case <-time.After(2 * time.Minute):
		t.Fatalf("generate serve not ready after 2 minutes:\n%s", s.stderr())
	}
	s.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: soakClients}}
	return s
}

// soakResult is what one request gave: its text (for a cut stream, what
// came before the cut), how often it was turned away and retried.
type soakResult struct {
	Text    string
	Retries int
}

// do sends spec, retrying after Retry-After while the server answers 503
// or 429 (admission control), and returns its text. A cut spec's stream is
// closed after soakCutAfter chunks.
func (s *soakServer) do(ctx context.Context, spec soakSpec) (soakResult, error) {
	var res soakResult
	for {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+spec.path(), bytes.NewReader(spec.body()))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.http.Do(req)
		if err != nil {
			cancel()
			return res, err
		}
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
			wait := retryAfter(resp)
			resp.Body.Close()
			cancel()
			if res.Retries++; res.Retries > 100 {
				return res, fmt.Errorf("turned away %d times", res.Retries)
			}
			time.Sleep(wait)
			continue
		}
		text, err := readReply(resp, spec)
		resp.Body.Close()
		cancel()
		res.Text = text
		return res, err
	}
}

func retryAfter(resp *http.Response) time.Duration {
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n >= 0 {
		return time.Duration(n)*time.Second + 50*time.Millisecond
	}
	return 500 * time.Millisecond
}

// readReply reads a completion or chat reply, whole or streamed.
func readReply(resp *http.Response, spec soakSpec) (string, error) {
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	type choice struct {
		Text    string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	}
	var reply struct {
		Choices []choice `json:"choices"`
	}
	if !spec.Stream {
		if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
			return "", err
		}
		if len(reply.Choices) != 1 {
			return "", fmt.Errorf("%d choices", len(reply.Choices))
		}
		return reply.Choices[0].Text + reply.Choices[0].Message.Content, nil
	}
	var text strings.Builder
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return text.String(), nil
		}
		reply.Choices = nil
		if err := json.Unmarshal([]byte(data), &reply); err != nil {
			return text.String(), fmt.Errorf("chunk %q: %w", data, err)
		}
		for _, c := range reply.Choices {
			text.WriteString(c.Text + c.Delta.Content)
		}
		if chunks++; spec.Cut && chunks == soakCutAfter {
			return text.String(), nil // the caller closes the connection
		}
	}
	if err := sc.Err(); err != nil {
		return text.String(), err
	}
	return text.String(), errors.New("stream ended without [DONE]")
}

// health is /health's slot and queue counts.
func (s *soakServer) health() (busy, queued int, err error) {
	resp, err := s.http.Get(s.base + "/health")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Processing int `json:"slots_processing"`
		Queued     int `json:"requests_queued"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("/health: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, 0, err
	}
	return h.Processing, h.Queued, nil
}

// slowBody opens a connection, sends a request whose body stops after "{",
// and waits until the server gives up on it or soakSlowHold passes; it
// reports whether the server ended it.
func slowBody(addr string) (cutByServer bool, err error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{", addr); err != nil {
		return false, err
	}
	c.SetReadDeadline(time.Now().Add(soakSlowHold))
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, nil
	}
	return true, nil
}

// bigTokenize posts an 8 MB /tokenize body: a 200 with tokens, or a 503
// from admission control, is what the server may answer.
func (s *soakServer) bigTokenize(ctx context.Context, i int) (int, error) {
	word := fmt.Sprintf("soak%d ", i)
	content := strings.Repeat(word, (soakBigBody-64)/len(word))
	body, _ := json.Marshal(map[string]any{"content": content})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/tokenize", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		return resp.StatusCode, nil
	case http.StatusOK:
		var r struct {
			Tokens []json.RawMessage `json:"tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return resp.StatusCode, err
		}
		if len(r.Tokens) < strings.Count(content, " ") {
			return resp.StatusCode, fmt.Errorf("%d tokens for %d words", len(r.Tokens), strings.Count(content, " "))
		}
		return resp.StatusCode, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, fmt.Errorf("status %d: %s", resp.StatusCode, b)
}

// peakRSS is VmHWM of a process, in KiB, from /proc.
func peakRSS(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, errors.New("no VmHWM")
}

// TestSoak runs `generate serve` under a bounded mixed load (see the
// constants) and checks that every request that was not cut got exactly
// the text it gets alone, that a cut stream's text so far is a prefix of
// it, and that afterwards no slot is busy, nothing is queued and the server
// exits 0 on SIGTERM within 15 s. It reports peak RSS and counts; it
// asserts no timing. Opt-in (make soak): it runs for a minute or more.
func TestSoak(t *testing.T) {
	if os.Getenv("GLINT_SOAK") != "1" {
		t.Skip("soak test: set GLINT_SOAK=1 (make soak) to run it")
	}
	model := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	srv := startSoakServer(t, soakBinary(t), model)
	ctx := t.Context()

	prompts := []string{"Once upon a time", "The little bird", "Tom had a toy car", "It was a sunny day",
		"Lily", "Write a poem about the sea", "What is two plus two?", "Tell me a story about a dragon"}
	specs := make([]soakSpec, soakRequests)
	for i := range specs {
		specs[i] = soakSpec{Chat: i%2 == 0, Stream: i/2%2 == 0, Prompt: prompts[i/4%len(prompts)], N: 8 + 8*(i/32%3)}
		if i%4 == 3 {
			specs[i].Stream, specs[i].Cut = true, true
		}
	}

	// Every request's text alone, one at a time.
	solo := map[soakSpec]string{}
	for _, sp := range specs {
		if _, ok := solo[sp.solo()]; ok {
			continue
		}
		r, err := srv.do(ctx, sp.solo())
		if err != nil {
			t.Fatalf("solo %+v: %v\n%s", sp.solo(), err, srv.stderr())
		}
		solo[sp.solo()] = r.Text
	}

	start := time.Now()
	var slowCut, slowHeld, slowErr atomic.Int32
	var side sync.WaitGroup
	for range soakSlowBodies {
		side.Add(1)
		go func() {
			defer side.Done()
			switch cut, err := slowBody(strings.TrimPrefix(srv.base, "http://")); {
			case err != nil:
				slowErr.Add(1)
			case cut:
				slowCut.Add(1)
			default:
				slowHeld.Add(1)
			}
		}()
	}
	bigStatus := make([]int, soakBigBodies)
	bigErr := make([]error, soakBigBodies)
	for i := range soakBigBodies {
		side.Add(1)
		go func() {
			defer side.Done()
			bigStatus[i], bigErr[i] = srv.bigTokenize(ctx, i)
		}()
	}

	results := make([]soakResult, len(specs))
	errs := make([]error, len(specs))
	next := make(chan int)
	var clients sync.WaitGroup
	for range soakClients {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := range next {
				results[i], errs[i] = srv.do(ctx, specs[i])
			}
		}()
	}
	for i := range specs {
		next <- i
	}
	close(next)
	clients.Wait()
	loadWall := time.Since(start)
	side.Wait()
	wall := time.Since(start)

	var whole, cut, retries int
	for i, sp := range specs {
		retries += results[i].Retries
		want := solo[sp.solo()]
		switch {
		case errs[i] != nil:
			t.Errorf("request %d %+v: %v", i, sp, errs[i])
		case sp.Cut:
			cut++
			if !strings.HasPrefix(want, results[i].Text) {
				t.Errorf("request %d %+v: cut stream %q is not a prefix of the solo text %q", i, sp, results[i].Text, want)
			}
		default:
			whole++
			if results[i].Text != want {
				t.Errorf("request %d %+v: %q, alone %q", i, sp, results[i].Text, want)
			}
		}
	}
	big := map[int]int{}
	for i := range bigStatus {
		if bigErr[i] != nil {
			t.Errorf("/tokenize of %d bytes: %v", soakBigBody, bigErr[i])
		}
		big[bigStatus[i]]++
	}
	if n := slowErr.Load(); n > 0 {
		t.Errorf("%d slow-body connections failed to open or send", n)
	}

	// Nothing left running: cut streams' slots are freed, nothing queued.
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy, queued, err := srv.health()
		if err == nil && busy == 0 && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the load: /health %d busy, %d queued (%v)\n%s", busy, queued, err, srv.stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	rss, err := peakRSS(srv.cmd.Process.Pid)
	if err != nil {
		t.Errorf("peak RSS: %v", err)
	}
	srv.http.CloseIdleConnections()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.exited:
		if err != nil {
			t.Errorf("generate serve exited with %v after SIGTERM:\n%s", err, srv.stderr())
		}
	case <-time.After(15 * time.Second):
		t.Errorf("generate serve still running 15 s after SIGTERM:\n%s", srv.stderr())
	}
	t.Logf("soak: %d requests over %d clients on %d slots: %d whole (all checked against %d solo texts), %d cut after %d chunks, %d retries after 503; "+
		"%d slow bodies: %d cut by the server, %d held %v and closed; %d × %d-byte /tokenize: statuses %v; "+
		"load %.1f s, wall %.1f s; peak RSS %.1f MiB",
		soakRequests, soakClients, soakParallel, whole, len(solo), cut, soakCutAfter, retries,
		soakSlowBodies, slowCut.Load(), slowHeld.Load(), soakSlowHold, soakBigBodies, soakBigBody, big,
		loadWall.Seconds(), wall.Seconds(), float64(rss)/1024)
}
