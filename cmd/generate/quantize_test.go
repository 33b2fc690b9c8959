package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
)

// TestQuantizeCommand: `generate quantize` writes llama-quantize's file
// (the staged kq-small-Q4_K_M.gguf, byte for byte), prints nothing on
// stdout and no progress bar when stderr is not a terminal, and refuses
// bad arguments with a reason.
func TestQuantizeCommand(t *testing.T) {
	in := shared.Models(t, "kquants/kq-small-F16.gguf")
	out := filepath.Join(t.TempDir(), "q.gguf")
	stdout, stderr, code := run(t, "quantize", in, out, "Q4_K_M")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != "" || strings.Contains(stderr, "\r") {
		t.Errorf("stdout %q, stderr %q: want only a final line on stderr", stdout, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(shared.Models(t, "kquants/kq-small-Q4_K_M.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("output differs from llama-quantize's kq-small-Q4_K_M.gguf")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quantize", in, out}, "want IN OUT TYPE"},
		{[]string{"quantize", in, out, "IQ2_XXS"}, `unknown type "IQ2_XXS"`},
		{[]string{"quantize", filepath.Join(t.TempDir(), "nope.gguf"), out, "Q4_0"}, "nope.gguf"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error mentioning %q", tc.args, code, stderr, tc.want)
		}
	}
}
