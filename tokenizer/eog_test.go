package tokenizer

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/glint-llm/glint/model/gguf"
)

// Every token llama.cpp puts in special_eog_ids ends a generation: the
// texts it recognises, and the eom and fill-in-the-middle ids a GGUF file
// names. Tokens it leaves out (<|end_of_text|> when it is not EOS, turn
// starts, ordinary words) do not.
func TestEOGSet(t *testing.T) {
	eog := []string{"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "<EOT>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}
	not := []string{"<|end_of_text|>", "<|im_start|>", "<start_of_turn>", "<|begin_of_text|>", "hello", "end", "<|fim_prefix|>"}
	tokens := append(append([]string{"eos-here", "msg-end"}, eog...), not...)
	for b := range 256 {
		tokens = append(tokens, string(byteToRune[b]))
	}
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "gpt-2"},
		{"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.merges", []string{}},
		{"tokenizer.ggml.eos_token_id", uint32(0)}, {"tokenizer.ggml.eom_token_id", uint32(1)},
	} {
		if err := w.Add(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	for id, text := range tokens {
		want := id < 2 || slices.Contains(eog, text)
		if got := tk.IsEOG(int32(id)); got != want {
			t.Errorf("IsEOG(%d %q) = %v, want %v", id, text, got, want)
		}
	}
}
