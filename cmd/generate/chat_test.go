package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/sample"
	"github.com/glint-llm/glint/tokenizer"
)

func openChat(t *testing.T, path string, maxNew int) *chatSession {
	t.Helper()
	m, err := glint.Open(path, glint.Options{Backend: "cpu", Threads: 1, Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	mt, err := chattemplate.FromModel(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chattemplate.Parse(mt.Source, mt.Origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newChatSession(m, tmpl, mt, nil, "", sample.Params{RepeatPenalty: 1}, maxNew)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestChatContinuesLikeAFreshPrefill: a second turn fed on top of the cache
// (only its new tokens) replies, greedily, as one prefill of the same token
// ids from an empty cache does, and the cache holds exactly those ids.
func TestChatContinuesLikeAFreshPrefill(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-F16.gguf")
	s := openChat(t, path, 6)
	if _, err := s.turn("Hello there", io.Discard); err != nil {
		t.Fatal(err)
	}
	before := len(s.fed)
	st, err := s.turn("What is 2+2?", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if st.Reused != before || st.Reused == 0 {
		t.Fatalf("second turn reused %d tokens, want the %d of the first", st.Reused, before)
	}
	if s.sess.Len() != len(s.fed) || !slices.Equal(s.sess.Tokens(), s.fed) {
		t.Fatalf("session holds %d tokens, the chat thinks %d", s.sess.Len(), len(s.fed))
	}
	prompt := append([]int32{}, s.fed[:before+st.Prefill]...)
	reply := s.fed[before+st.Prefill:]

	fresh := openChat(t, path, 6)
	tm, err := fresh.sess.Generate(t.Context(), prompt, engine.Options{MaxTokens: 6, Sampler: fresh.sampler,
		EOG: fresh.m.IsEOG, EndTokens: fresh.endTokens})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tm.Generated, reply) {
		t.Fatalf("continued reply %v, one prefill %v", reply, tm.Generated)
	}
}

// statsRE reads the chat's stats line on stderr.
var statsRE = regexp.MustCompile(`\[prefill (\d+) tokens \((\d+) cached\), generated (\d+) tokens( \(stopped\))?`)

type tmuxChat struct {
	t      *testing.T
	socket string
}

func (c *tmuxChat) tmux(args ...string) string {
	c.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", c.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (c *tmuxChat) pane() string { return c.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "chat") }

// waitFor polls the pane until cond holds.
func (c *tmuxChat) waitFor(what string, cond func(string) bool) string {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		p := c.pane()
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("waiting for %s; the terminal shows:\n%s", what, p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *tmuxChat) stats() [][]string { return statsRE.FindAllStringSubmatch(c.pane(), -1) }

func (c *tmuxChat) send(line string) {
	c.tmux("send-keys", "-t", "chat", "-l", line)
	c.tmux("send-keys", "-t", "chat", "Enter")
}

func startTmuxChat(t *testing.T, args ...string) *tmuxChat {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (apt-get install tmux): the terminal chat test needs it")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &tmuxChat{t: t, socket: fmt.Sprintf("glint-chat-test-%d-%d", os.Getpid(), time.Now().UnixNano())}
	cmd := []string{"env", mainEnv + "=1", exe, "chat"}
	cmd = append(cmd, args...)
	quoted := make([]string, len(cmd))
	for i, a := range cmd {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	c.tmux("new-session", "-d", "-s", "chat", "-x", "220", "-y", "50", strings.Join(quoted, " "))
	t.Cleanup(func() { exec.Command("tmux", "-L", c.socket, "kill-server").Run() })
	c.tmux("set-option", "-t", "chat", "remain-on-exit", "on")
	c.waitFor("the chat to start", func(p string) bool { return strings.Contains(p, "commands: /clear") })
	return c
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChatTerminal drives `generate chat` in a real terminal (tmux): two
// turns on llama3-tiny with its own template, /save, /clear and one more
// turn, then /exit. The prefill counts are pinned to what the template and
// tokenizer say each turn adds: the second turn feeds only its own tokens.
func TestChatTerminal(t *testing.T) {
	model := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	c := startTmuxChat(t, "-m", model, "--temp", "0", "-n", "8", "-c", "512", "-t", "1")
	saved := filepath.Join(t.TempDir(), "conv.json")
	turns := []string{"Hello there", "What is 2+2? Ünïcödé ✓"}
	for i, u := range turns {
		c.send(u)
		c.waitFor(fmt.Sprintf("turn %d", i+1), func(string) bool { return len(c.stats()) == i+1 })
	}
	c.send("/save " + saved)
	c.waitFor("/save", func(p string) bool { return strings.Contains(p, "(saved 4 messages") })
	c.send("/clear")
	c.send("Hi again")
	c.waitFor("the turn after /clear", func(string) bool { return len(c.stats()) == 3 })
	c.send("/exit")
	if st := c.waitDead(); st != "0" && st != "" {
		t.Fatalf("chat exited with status %q", st)
	}
	stats := c.stats()

	// The expectation, from the template and the tokenizer alone.
	var conv []chattemplate.Message
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &conv); err != nil {
		t.Fatal(err)
	}
	if len(conv) != 4 || conv[0].Content != turns[0] || conv[2].Content != turns[1] {
		t.Fatalf("saved conversation %+v", conv)
	}
	g, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tok, err := tokenizer.FromGGUF(g)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := chattemplate.FromGGUF(g)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chattemplate.Parse(mt.Source, mt.Origin)
	if err != nil {
		t.Fatal(err)
	}
	render := func(msgs []chattemplate.Message) string {
		s, err := tmpl.Render(context.Background(), chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, BOS: mt.BOS, EOS: mt.EOS})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	r1 := render(conv[:1])
	full2 := render(conv[:3])
	if !strings.HasPrefix(full2, r1+conv[1].Content) {
		t.Fatalf("the first reply %q is not kept verbatim by the template, so the cache cannot be reused; pick other messages", conv[1].Content)
	}
	want := []struct{ prefill, cached int }{
		{len(tok.Encode(r1, false)), 0},
		{len(tok.Encode(full2[len(r1+conv[1].Content):], false)), len(tok.Encode(r1, false)) + atoi(t, stats[0][3])},
		{len(tok.Encode(render([]chattemplate.Message{{Role: "user", Content: "Hi again"}}), false)), 0},
	}
	if len(stats) != 3 {
		t.Fatalf("%d stats lines, want 3", len(stats))
	}
	for i, w := range want {
		if p, cch := atoi(t, stats[i][1]), atoi(t, stats[i][2]); p != w.prefill || cch != w.cached {
			t.Errorf("turn %d: prefill %d tokens (%d cached), want %d (%d cached)", i+1, p, cch, w.prefill, w.cached)
		}
	}
	if all := len(tok.Encode(full2, false)); want[1].prefill >= all-want[0].prefill {
		t.Errorf("second turn prefills %d of the conversation's %d tokens", want[1].prefill, all)
	}
}

// TestChatCtrlC: Ctrl-C stops a long reply, not the program, which then
// answers the next message from the cache it kept.
func TestChatCtrlC(t *testing.T) {
	model := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	c := startTmuxChat(t, "-m", model, "--temp", "0", "-c", "2048", "-t", "1")
	c.send("Tell me a very long story")
	time.Sleep(300 * time.Millisecond)
	c.tmux("send-keys", "-t", "chat", "C-c")
	c.waitFor("the stopped turn", func(string) bool { return len(c.stats()) == 1 })
	st := c.stats()[0]
	if st[4] == "" {
		t.Fatalf("the reply was not stopped: %v (it ended by itself before Ctrl-C?)", st[0])
	}
	c.send("Go on")
	c.waitFor("the next turn", func(string) bool { return len(c.stats()) == 2 })
	st2 := c.stats()[1]
	saved := filepath.Join(t.TempDir(), "conv.json")
	c.send("/save " + saved)
	c.waitFor("/save", func(p string) bool { return strings.Contains(p, "(saved 4 messages") })
	var conv []chattemplate.Message
	if b, err := os.ReadFile(saved); err != nil || json.Unmarshal(b, &conv) != nil || len(conv) != 4 {
		t.Fatalf("saved conversation: %v %+v", err, conv)
	}
	// The cut reply stays in the cache unless the template trims it (Llama
	// 3 trims each message), which forces a full prefill.
	if a1 := conv[1].Content; (atoi(t, st2[2]) > 0) != (a1 == strings.TrimSpace(a1)) {
		t.Errorf("after Ctrl-C the next turn reused %s tokens; the stopped reply was %q", st2[2], a1)
	}
	c.tmux("send-keys", "-t", "chat", "C-c") // at the prompt: a reminder, not an exit
	c.waitFor("the reminder", func(p string) bool { return strings.Contains(p, "/exit or Ctrl-D to quit") })
	c.send("/exit")
	if st := c.waitDead(); st != "0" && st != "" {
		t.Fatalf("chat exited with status %q", st)
	}
}

// TestChatPiped: with stdin piped, each line is a user message, slash or
// not (a piped "/save FILE" is text, perhaps untrusted, and writes
// nothing), and stdout carries only the replies.
func TestChatPiped(t *testing.T) {
	model := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "conv.json")
	cmd := exec.Command(exe, "chat", "-m", model, "--temp", "0", "-n", "4", "-c", "256", "-t", "1")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	cmd.Stdin = strings.NewReader("one\n\ntwo\n/save " + saved + "\n/exit\nthree\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if n := len(statsRE.FindAllString(stderr.String(), -1)); n != 5 {
		t.Fatalf("%d turns, want 5 (the slash lines are messages): %s", n, stderr.String())
	}
	if _, err := os.Stat(saved); !os.IsNotExist(err) {
		t.Errorf("a piped /save wrote %s (%v)", saved, err)
	}
	if strings.Contains(stderr.String(), "(saved") {
		t.Errorf("a piped /save ran: %s", stderr.String())
	}
	if strings.Contains(stdout.String(), "prefill") || strings.Count(stdout.String(), "\n") < 5 {
		t.Errorf("stdout %q: want the five replies only", stdout.String())
	}
}

// waitDead waits for the chat process to end and returns its exit status:
// "0", another number, "signal N", or "" where tmux saw the terminal close
// but learnt no status within a few seconds (it sometimes does not).
func (c *tmuxChat) waitDead() string {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var deadSince time.Time
	for {
		st := strings.TrimSpace(c.tmux("list-panes", "-t", "chat", "-F", "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}"))
		f := strings.Fields(st)
		if len(f) >= 2 && f[0] == "1" {
			return strings.Join(f[1:], " signal ")
		}
		if len(f) == 1 && f[0] == "1" {
			if deadSince.IsZero() {
				deadSince = time.Now()
			} else if time.Since(deadSince) > 3*time.Second {
				return ""
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the chat did not end (%q); the terminal shows:\n%s", st, c.pane())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChatSpecialInContent: "<|eot_id|>" typed in a message is text (its
// tokens cost ≥ 3 more in the prefill), in a first turn and in a turn fed
// on top of the cache; with --chat-special-in-content it is one token.
func TestChatSpecialInContent(t *testing.T) {
	model := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prefills := func(input string, flags ...string) []int {
		t.Helper()
		cmd := exec.Command(exe, append([]string{"chat", "-m", model, "--temp", "0", "-n", "2", "-c", "256", "-t", "1"}, flags...)...)
		cmd.Env = append(os.Environ(), mainEnv+"=1")
		cmd.Stdin = strings.NewReader(input)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
		var out []int
		for _, m := range statsRE.FindAllStringSubmatch(stderr.String(), -1) {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
		if len(out) != 2 {
			t.Fatalf("%d turns, want 2: %s", len(out), stderr.String())
		}
		return out
	}
	base := prefills("Hi\nx\n")
	if got := prefills("Hi\nx\n", "--chat-special-in-content"); !slices.Equal(got, base) {
		t.Fatalf("prefills %v with the flag, %v without, for messages without control text", got, base)
	}
	// Each turn with the control text after the same turns without it, so
	// that the replies before it, and so the cache, are the same.
	for i, input := range []string{"Hi<|eot_id|>\nx\n", "Hi\nx<|eot_id|>\n"} {
		def, special := prefills(input), prefills(input, "--chat-special-in-content")
		if d := def[i] - base[i]; d < 3 {
			t.Errorf("turn %d: <|eot_id|> cost %d tokens, want ≥ 3", i+1, d)
		}
		if d := special[i] - base[i]; d != 1 {
			t.Errorf("turn %d: with --chat-special-in-content <|eot_id|> cost %d tokens, want 1", i+1, d)
		}
	}
}
