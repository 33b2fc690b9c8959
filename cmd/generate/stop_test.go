package main

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glint-llm/glint/model/gguf"
	"github.com/glint-llm/glint/model/synth"
	"github.com/glint-llm/glint/tokenizer"
)

// A word no command knows, or an argument a command does not take, is a
// usage error (exit 2) that names it, never the help with status 0.
func TestUnknownCommand(t *testing.T) {
	model := tinyModel(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"chatx"}, `generate: unknown command "chatx"`},
		{[]string{"-m", model, "stray"}, `unexpected argument "stray"`},
		{[]string{"tokenize", "-m", model, "-p", "hi", "stray"}, `tokenize: unexpected argument "stray"`},
		{[]string{"devices", "extra"}, `devices: unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, `flag provided but not defined: -no-such-flag`},
		{[]string{"tokenize", "--no-such-flag"}, `tokenize: flag provided but not defined: -no-such-flag`},
	} {
		stdout, stderr, code := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, code, stderr, stdout, tc.want)
		}
	}
}

// With --no-context-shift a full context ends generation with a note on
// stderr and status 0, after every position has been used; with the shift
// (the default) generation goes on; a prompt that does not fit is an error.
// -c rounds up to a multiple of 32, as llama.cpp pads it.
func TestContextFullNote(t *testing.T) {
	model := tinyModel(t)
	stdout, stderr, code := run(t, "-m", model, "-c", "20", "-n", "50", "--temp", "0", "--ignore-eos", "--no-context-shift", "--prompt-ids", "1,2,3,4", "--output", "ids")
	n := len(strings.Fields(stdout))
	// 4 prompt tokens and 28 generated fill the 32 positions; the 29th
	// generated token is chosen from the last position's logits.
	if code != 0 || n != 29 || !strings.Contains(stderr, "ctx 32,") || !strings.Contains(stderr, "context full after 29 tokens (-c 32)") {
		t.Fatalf("exit %d, %d ids, stderr %q", code, n, stderr)
	}
	stdout, stderr, code = run(t, "-m", model, "-c", "32", "-n", "50", "--temp", "0", "--ignore-eos", "--prompt-ids", "1,2,3,4", "--output", "ids")
	if n := len(strings.Fields(stdout)); code != 0 || n != 50 || !strings.Contains(stderr, "context shifted 2 times") {
		t.Fatalf("with the shift: exit %d, %d ids, stderr %q", code, n, stderr)
	}
	_, stderr, code = run(t, "-m", model, "-c", "32", "-n", "3", "--temp", "0", "--ignore-eos", "--no-context-shift", "--prompt-ids", "1,2,3,4", "--output", "ids")
	if code != 0 || strings.Contains(stderr, "context full") {
		t.Fatalf("-n 3 within the context: exit %d, stderr %q", code, stderr)
	}
	long := strings.Repeat("5,", 32) + "6"
	_, stderr, code = run(t, "-m", model, "-c", "32", "-n", "3", "--prompt-ids", long)
	if code != 1 || !strings.Contains(stderr, "prompt of 33 tokens is longer than the context of 32 tokens") {
		t.Fatalf("prompt longer than the context: exit %d, stderr %q", code, stderr)
	}
}

// --stop cuts the text before the first occurrence of the string, as the
// same greedy run without it shows, and prints none of it.
func TestStopFlag(t *testing.T) {
	model := tinyModel(t)
	args := []string{"-m", model, "-n", "40", "--temp", "0", "--ignore-eos", "-p", "Once upon a time"}
	full, stderr, code := run(t, args...)
	if code != 0 || len(full) < 12 {
		t.Fatalf("exit %d, %q, stderr %q", code, full, stderr)
	}
	for _, stop := range []string{full[6:9], full[len(full)-3:], "zz-never-zz"} {
		want := full
		if i := strings.Index(full, stop); i >= 0 {
			want = full[:i]
		}
		got, stderr, code := run(t, append(args, "--stop", "\x01unused", "--stop", stop)...)
		if code != 0 || got != want {
			t.Errorf("--stop %q: exit %d, got %q, want %q (stderr %q)", stop, code, got, want, stderr)
		}
	}
	// With ids out, the ids stop where the text would.
	ids, _, _ := run(t, append(args, "--output", "ids")...)
	cut, _, _ := run(t, append(args, "--output", "ids", "--stop", full[len(full)-3:])...)
	if !strings.HasPrefix(ids, strings.TrimSpace(cut)) || len(cut) >= len(ids) {
		t.Errorf("--output ids --stop: %q is not a shorter prefix of %q", cut, ids)
	}
}

// A token whose text is an end-of-turn marker (<|im_end|>) ends the
// generation even though the file names another EOS; --ignore-eos goes on
// through it. The two models differ only in that token's text: the same
// seed gives the same weights.
func TestEndOfTurnAndIgnoreEOS(t *testing.T) {
	plain := tinyModel(t)
	args := []string{"-n", "8", "--temp", "0", "--prompt-ids", "1,2,3", "--output", "ids"}
	stdout, stderr, code := run(t, append([]string{"-m", plain, "--ignore-eos"}, args...)...)
	ids := strings.Fields(stdout)
	if code != 0 || len(ids) != 8 {
		t.Fatalf("exit %d, ids %q, stderr %q", code, stdout, stderr)
	}
	// The first id not seen before it, from the third on, becomes <|im_end|>.
	at := -1
	for i := 2; i < len(ids) && at < 0; i++ {
		if !slices.Contains(ids[:i], ids[i]) {
			at = i
		}
	}
	if at < 0 {
		t.Skipf("greedy ids %v repeat: no token to turn into <|im_end|>", ids)
	}
	x, _ := strconv.Atoi(ids[at])

	g, err := gguf.Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.VocabFromGGUF(g)
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	if v.EOS == int32(x) {
		t.Skipf("greedy generation reached EOS %d", x)
	}
	v.Tokens[x] = "<|im_end|>"
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"tokenizer.ggml.model", v.Model}, {"tokenizer.ggml.pre", v.Pre}, {"tokenizer.ggml.tokens", v.Tokens},
		{"tokenizer.ggml.merges", v.Merges}, {"tokenizer.ggml.eos_token_id", uint32(v.EOS)},
		{"tokenizer.ggml.bos_token_id", uint32(v.BOS)}, {"tokenizer.ggml.add_bos_token", v.AddBOS},
	} {
		if err := w.Add(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	vocab := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := w.WriteFile(vocab); err != nil {
		t.Fatal(err)
	}
	marked := filepath.Join(t.TempDir(), "marked.gguf")
	if err := synth.WriteGGUF(marked, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 2, Std: 0.2, VocabGGUF: vocab}); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = run(t, append([]string{"-m", marked}, args...)...)
	if got := strings.Fields(stdout); code != 0 || !slices.Equal(got, ids[:at]) {
		t.Errorf("stopping at <|im_end|> (id %d): exit %d, ids %v, want %v (stderr %q)", x, code, got, ids[:at], stderr)
	}
	stdout, _, code = run(t, append([]string{"-m", marked, "--ignore-eos"}, args...)...)
	if got := strings.Fields(stdout); code != 0 || !slices.Equal(got, ids) {
		t.Errorf("--ignore-eos: exit %d, ids %v, want %v", code, got, ids)
	}
}
