package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glint-llm/glint/internal/shared"
)

// nodePackages are the npm packages the Node clients' test runs, pinned:
// the install is cached by this list.
var nodePackages = []string{"openai@7.59.0", "@langchain/openai@1.6.0", "@langchain/core@1.4.0", "zod@4.6.7"}

// npmTimeout bounds the install: a slow or unreachable registry skips the
// test rather than failing CI.
const npmTimeout = 3 * time.Minute

// minNode is the oldest Node major version the clients run on.
const minNode = 20

//go:embed testdata/clients.mjs
var clientsScript []byte

// nodeModules installs nodePackages once into the user's cache (a folder
// named by their hash, made whole by a rename) and returns it; it skips
// the test where node or npm is missing or the install fails or times out.
func nodeModules(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	// The packages want Node 20 or later (openai's own engines say 22; 20
	// runs them); an older one fails at their first modern built-in.
	v, err := exec.Command("node", "--version").Output()
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
	if n, aerr := strconv.Atoi(major); err != nil || aerr != nil || n < minNode {
		t.Skipf("node %s is older than the clients need (%d)", strings.TrimSpace(string(v)), minNode)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache folder for the npm packages: %v", err)
	}
	sum := sha256.Sum256([]byte(strings.Join(nodePackages, " ")))
	dir := filepath.Join(cache, "glint", "node-clients-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "openai", "package.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Skipf("cache folder: %v", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "installing-")
	if err != nil {
		t.Skipf("cache folder: %v", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed; left by a failed install
	timeout := npmTimeout
	if d, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(d)/2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append([]string{"install", "--prefix", tmp, "--no-audit", "--no-fund", "--loglevel=error", "--no-save"}, nodePackages...)
	cmd := exec.CommandContext(ctx, "npm", args...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Skipf("npm install took over %v (registry slow or unreachable)", timeout)
	}
	if err != nil {
		t.Skipf("npm install failed (registry unreachable?): %v: %s", err, npmError(out))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr != nil { // not another test's install, finished first
			t.Skipf("cache folder: %v", err)
		}
	}
	return dir
}

// npmError is the line of npm's output that says what went wrong.
func npmError(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "npm error") && !strings.Contains(l, "complete log") {
			return l
		}
	}
	return lines[len(lines)-1]
}

// TestNodeClients: the official openai npm package and LangChain.js
// (@langchain/openai, zod) against `generate serve` on loopback with
// llama3-tiny and Llama 3.2's template: (a) a chat completion and the same
// streamed, (b) withStructuredOutput(zod schema) giving an object the
// schema accepts (random weights: only constrained decoding makes it
// valid), (c) bindTools with a forced tool giving a call whose arguments
// fit — skipped, not failed, while the server answers 400 for tools.
func TestNodeClients(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	tmpl := shared.Models(t, "chat-templates/meta-llama-Llama-3.2-3B-Instruct.jinja")
	dir := nodeModules(t)

	// The script runs from the install folder, where Node resolves its
	// imports; a name of its own, so that tests may run at once.
	b := make([]byte, 6)
	rand.Read(b)
	script := filepath.Join(dir, "clients-"+hex.EncodeToString(b)+".mjs")
	if err := os.WriteFile(script, clientsScript, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(script)

	p := startServe(t, "-m", path, "--chat-template-file", tmpl, "--alias", "llama3-tiny", "-c", "2048")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "GLINT_BASE_URL=http://"+p.addr+"/v1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s\n%s\nserver:\n%s", filepath.Base(script), err, out, stderr.String(), p.log())
	}
	results := map[string]map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("script output %q: %v", sc.Text(), err)
		}
		name, _ := r["part"].(string)
		results[name] = map[string]string{}
		for k, v := range r {
			s, _ := v.(string)
			results[name][k] = s
		}
	}
	for _, part := range []struct{ name, what string }{
		{"a", "openai chat and stream"},
		{"b", "langchain structured output"},
		{"c", "langchain forced tool call"},
	} {
		t.Run(part.name+" "+part.what, func(t *testing.T) {
			r, ok := results[part.name]
			switch {
			case !ok:
				t.Fatalf("the script reported nothing (stderr: %s)", stderr.String())
			case r["error"] != "":
				t.Fatalf("%s\nserver:\n%s", r["error"], p.log())
			case r["skipped"] != "":
				t.Skip(r["skipped"])
			}
			t.Logf("got %s", r["got"])
		})
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the script ran over 5 minutes")
	}
}
