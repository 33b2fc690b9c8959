package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
)

// naiveAddedSplit is the reference for added-token splitting: at each
// position take the longest added token that starts there.
func naiveAddedSplit(text string, added map[string]int32, encode func(string) []int32) []int32 {
	var out []int32
	start := 0
	for i := 0; i < len(text); {
		best := ""
		for s := range added {
			if len(s) > len(best) && strings.HasPrefix(text[i:], s) {
				best = s
			}
		}
		if best == "" {
			i++
			continue
		}
		if i > start {
			out = append(out, encode(text[start:i])...)
		}
		out = append(out, added[best])
		i += len(best)
		start = i
	}
	if start < len(text) {
		out = append(out, encode(text[start:])...)
	}
	return out
}

// TestFromHFGPT2 loads the GPT-2 tokenizer.json of tiny-random-gpt2 (the
// GPT-2 vocabulary plus 40 added tokens for runs of spaces and tabs) and
// checks it against llama.cpp's GPT-2 vectors. Strings without such runs
// must give llama.cpp's ids exactly; in the others the runs are added
// tokens, so the expectation is llama.cpp's ids for the text between them.
func TestFromHFGPT2(t *testing.T) {
	dir := shared.Models(t, "onnx-genai-test/tiny-random-gpt2-fp32")
	tk, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != 50295 || tk.AddBOS() || tk.BOS() != 50256 || tk.EOS() != 50256 || !tk.IsEOG(50256) {
		t.Errorf("VocabSize %d AddBOS %v BOS %d EOS %d", tk.VocabSize(), tk.AddBOS(), tk.BOS(), tk.EOS())
	}
	ref := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf")
	added := map[string]int32{}
	for id := int32(50257); id < 50295; id++ {
		added[tk.Token(id)] = id
	}
	cases := readCases(t, shared.Models(t, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf.inp"), shared.Models(t, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf.out"))
	exact := 0
	for i, c := range cases {
		want := c.ids
		if strings.Contains(c.text, "  ") || strings.Contains(c.text, "\t\t") {
			want = naiveAddedSplit(c.text, added, func(s string) []int32 { return ref.Encode(s, false) })
		} else {
			exact++
		}
		got := tk.Encode(c.text, false)
		if !slices.Equal(got, want) {
			t.Errorf("case %d %q:\n got  %v\n want %v", i, c.text, got, want)
		}
		if dec := tk.Decode(got); dec != c.text {
			t.Errorf("case %d: Decode(Encode(%q)) = %q", i, c.text, dec)
		}
	}
	if exact < 35 {
		t.Errorf("only %d of %d cases compared exactly", exact, len(cases))
	}
}

// gemmaStyle writes a small SentencePiece-style BPE tokenizer.json: byte
// fallback, "▁" for spaces, specials as added tokens.
func gemmaStyle(t *testing.T, space string, pairMerges bool, cfg, gen string) string {
	t.Helper()
	vocab := map[string]int{"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
	for b := 0; b < 256; b++ {
		vocab[fmt.Sprintf("<0x%02X>", b)] = 4 + b
	}
	for i, s := range []string{"▁", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "hell", "hello", "▁w", "or", "▁wor", "▁world", "ld", "▁h", "▁hello"} {
		vocab[s] = 260 + i
	}
	merges := []string{"h e", "l l", "he ll", "hell o", "▁ w", "o r", "▁w or", "l d", "▁wor ld", "▁ h", "▁ hello"}
	var m any = merges
	if pairMerges {
		var pairs [][2]string
		for _, s := range merges {
			a, b, _ := strings.Cut(s, " ")
			pairs = append(pairs, [2]string{a, b})
		}
		m = pairs
	}
	var normalizer, pre any
	switch space {
	case "replace": // Gemma: no dummy prefix
		normalizer = map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}
	case "prepend": // Llama 2 (legacy)
		normalizer = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}}
	case "metaspace-first":
		pre = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	case "metaspace-always":
		pre = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
	}
	doc := map[string]any{
		"version": "1.0",
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "<pad>", "special": true},
			map[string]any{"id": 1, "content": "<eos>", "special": true},
			map[string]any{"id": 2, "content": "<bos>", "special": true},
			map[string]any{"id": 3, "content": "<unk>", "special": true},
		},
		"normalizer":    normalizer,
		"pre_tokenizer": pre,
		"decoder":       map[string]any{"type": "Sequence", "decoders": []any{}},
		"model": map[string]any{
			"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "fuse_unk": true,
			"vocab": vocab, "merges": m, "some_future_field": 42,
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string]string{"tokenizer.json": string(b), "tokenizer_config.json": cfg, "generation_config.json": gen} {
		if data == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestFromHFSentencePieceBPE checks merges worked out by hand on the toy
// vocabulary of gemmaStyle (ids: <0xNN> = 4+NN; ▁=260, hello=271,
// ▁world=275, ▁hello=278).
func TestFromHFSentencePieceBPE(t *testing.T) {
	const cfg = `{"add_bos_token": true, "add_eos_token": false, "bos_token": "<bos>", "eos_token": {"content": "<eos>", "lstrip": false}, "unk_token": "<unk>"}`
	tests := []struct {
		space      string
		pairs      bool
		text       string
		addSpecial bool
		want       []int32
		decoded    string
	}{
		{"replace", false, "hello world", true, []int32{2, 271, 275}, "hello world"},
		{"replace", true, "hello world", false, []int32{271, 275}, "hello world"},
		{"replace", false, "hello é", false, []int32{271, 260, 4 + 0xC3, 4 + 0xA9}, "hello é"},
		{"replace", true, "<bos>hello<eos>", false, []int32{2, 271, 1}, "hello"},
		{"prepend", false, "hello world", false, []int32{278, 275}, " hello world"},
		{"prepend", true, "hello<eos>hello", false, []int32{278, 1, 278}, " hello hello"},
		{"metaspace-first", false, "hello world", false, []int32{278, 275}, " hello world"},
		{"metaspace-first", false, "<bos>hello", false, []int32{2, 271}, "hello"},
		{"metaspace-first", false, " hello", false, []int32{278}, " hello"},
		{"metaspace-always", true, "<bos>hello world", false, []int32{2, 278, 275}, " hello world"},
		// "d" is a token, "x" falls back to its byte.
		{"metaspace-always", true, "dx", false, []int32{260, 267, 4 + 'x'}, " dx"},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s/pairs=%v/%q", tc.space, tc.pairs, tc.text)
		tk, err := FromHF(gemmaStyle(t, tc.space, tc.pairs, cfg, `{"eos_token_id": [1, 3]}`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := tk.Encode(tc.text, tc.addSpecial)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode = %v, want %v", name, got, tc.want)
		}
		if dec := tk.Decode(got); dec != tc.decoded {
			t.Errorf("%s: Decode = %q, want %q", name, dec, tc.decoded)
		}
		if tk.BOS() != 2 || tk.EOS() != 1 || !tk.AddBOS() || !tk.IsEOG(1) || !tk.IsEOG(3) || tk.IsEOG(2) {
			t.Errorf("%s: BOS %d EOS %d AddBOS %v", name, tk.BOS(), tk.EOS(), tk.AddBOS())
		}
	}

	// Without tokenizer_config.json nothing is added; generation_config's
	// first EOS id becomes EOS.
	tk, err := FromHF(gemmaStyle(t, "replace", false, "", `{"eos_token_id": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("hello", true); !slices.Equal(got, []int32{271}) || tk.EOS() != 1 || tk.BOS() != -1 {
		t.Errorf("no config: Encode = %v, EOS %d, BOS %d", got, tk.EOS(), tk.BOS())
	}
}

func TestFromHFErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not json", `{`, "tokenizer.json"},
		{"no model", `{"added_tokens": []}`, "no model"},
		{"no type", `{"model": {"vocab": {"a": 0}}}`, "model.type missing"},
		{"unigram", `{"model": {"type": "Unigram", "vocab": [["a", 0]]}}`, `"Unigram" is not supported`},
		{"empty vocab", `{"model": {"type": "BPE", "vocab": {}}}`, "vocab missing or empty"},
		{"bad id", `{"model": {"type": "BPE", "vocab": {"a": 7}}, "pre_tokenizer": {"type": "ByteLevel"}}`, "id 7 outside"},
		{"dup id", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}}, "pre_tokenizer": {"type": "ByteLevel"}}`, "gives id 0 to both"},
		{"bad merge", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}, "pre_tokenizer": {"type": "ByteLevel"}}`, "merges[0]"},
		{"merge parts", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}, "pre_tokenizer": {"type": "ByteLevel"}}`, "has 1 parts"},
		{"no shape", `{"model": {"type": "BPE", "vocab": {"a": 0}}}`, "neither byte-level nor SentencePiece-style"},
		{"regex", `{"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"}}, {"type": "ByteLevel", "use_regex": false}]}}`, "regex"},
		{"added no id", `{"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"content": "x"}], "pre_tokenizer": {"type": "ByteLevel"}}`, "has no id"},
		{"wordpiece prefix", `{"model": {"type": "BPE", "vocab": {"a": 0}, "continuing_subword_prefix": "##"}, "pre_tokenizer": {"type": "ByteLevel"}}`, "continuing_subword_prefix"},
	}
	for _, tc := range tests {
		_, err := fromHFJSON([]byte(tc.json), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	if _, err := FromHF(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("empty folder: err = %v", err)
	}
	const ok = `{"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "ByteLevel"}}`
	if _, err := fromHFJSON([]byte(ok), []byte(`{"bos_token": "<s>"}`), nil); err == nil || !strings.Contains(err.Error(), `bos_token "<s>" is not in the vocabulary`) {
		t.Errorf("unknown bos_token: err = %v", err)
	}
	if _, err := fromHFJSON([]byte(ok), nil, []byte(`{"eos_token_id": [5]}`)); err == nil || !strings.Contains(err.Error(), "eos_token_id 5 outside") {
		t.Errorf("eos_token_id out of range: err = %v", err)
	}
}
