package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/glint-llm/glint/internal/shared"
)

// hasSpecial reports whether text spells a token that renders as nothing
// (a control token), which Decode cannot give back.
func hasSpecial(tk *Tokenizer, text string) bool {
	for _, f := range tk.partition(text, nil) {
		if f.token >= 0 && len(tk.Piece(f.token)) == 0 {
			return true
		}
	}
	return false
}

// FuzzEncode: on every vocabulary, any text encodes without panicking to
// ids inside the vocabulary, and valid UTF-8 without special tokens decodes
// back to itself (after SentencePiece's dummy-prefix space); EncodeProtected
// without ranges is Encode, and never gives a control token for text it
// protects wholly.
func FuzzEncode(f *testing.F) {
	vocabs := []*Tokenizer{
		ggufTokenizer(f, "llama.cpp-vocab/ggml-vocab-llama-spm.gguf"),
		ggufTokenizer(f, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"),
		ggufTokenizer(f, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf"),
	}
	in, err := os.ReadFile(shared.Models(f, "llama.cpp-vocab/ggml-vocab-llama-bpe.gguf.inp"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range strings.Split(string(in), "\n__ggml_vocab_test__\n") {
		f.Add(s)
	}
	for _, s := range []string{"<|begin_of_text|>Hi<|eot_id|>", "<s>a</s>", "\xff\xfe bad \xc3", "'S 'lL 'Ve", "\r\n\r\n  \t x", "1234567", "a\u00a0b\u2003c\u3000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, tk := range vocabs {
			ids := tk.Encode(text, true)
			for _, id := range ids {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", text, id, tk.VocabSize())
				}
			}
			// Protected encoding: without ranges it is Encode; with any
			// ranges (some past the text, some reversed) it never panics,
			// and protecting the whole text is encoding it with no special
			// token but the user-defined ones split out.
			if got := tk.EncodeProtected(text, true, nil); !slices.Equal(got, ids) {
				t.Fatalf("EncodeProtected(%q, nil) = %v, Encode %v", text, got, ids)
			}
			n := len(text)
			for _, id := range tk.EncodeProtected(text, true, [][2]int{{n / 3, n/2 + 1}, {n, -1}, {-7, 2}, {n - 1, n + 9}}) {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("EncodeProtected(%q) gave id %d outside [0, %d)", text, id, tk.VocabSize())
				}
			}
			for _, id := range tk.EncodeProtected(text, false, [][2]int{{0, n}}) {
				if ty := tk.types[id]; ty == TypeControl || ty == TypeUnknown && id != tk.unk {
					t.Fatalf("EncodeProtected(%q) wholly protected gave control token %d", text, id)
				}
			}
			if !utf8.ValidString(text) || hasSpecial(tk, text) {
				continue
			}
			want := text
			if tk.algo == algoSPM && text != "" {
				want = " " + text
			}
			if got := tk.Decode(tk.Encode(text, false)); got != want {
				t.Fatalf("Decode(Encode(%q)) = %q", text, got)
			}
		}
	})
}

// FuzzFromHF: any bytes as tokenizer.json give an error or a working
// tokenizer, never a panic.
func FuzzFromHF(f *testing.F) {
	seeds := []string{
		`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel"}}`,
		`{"model": {"type": "BPE", "vocab": {"▁": 0, "a": 1, "▁a": 2, "<0x61>": 3}, "merges": [["▁", "a"]], "byte_fallback": true, "unk_token": "<unk>"}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"}, "added_tokens": [{"id": 4, "content": "<s>", "special": true}]}`,
		`{"model": {"type": "BPE", "vocab": {"Ġ": 0}, "ignore_merges": true}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "` + strings.ReplaceAll(regexLlama3, `\`, `\\`) + `"}}, {"type": "ByteLevel", "use_regex": false}]}, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "Ġ"}}, {"Sequence": {"id": "A"}}]}}`,
		`{"model": {"type": "BPE", "vocab": {"x": 0}}, "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}}`,
		`{"model": null}`, `[]`, `{"model": {"type": "BPE", "vocab": {"a": -1}}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if dir := shared.Root(); dir != "" {
		// A real file, shrunk: the first entries of the GPT-2 vocabulary.
		b, err := os.ReadFile(filepath.Join(dir, "models", "onnx-genai-test", "tiny-random-gpt2-fp32", "tokenizer.json"))
		if err == nil {
			var doc map[string]any
			if json.Unmarshal(b, &doc) == nil {
				if m, ok := doc["model"].(map[string]any); ok {
					small := map[string]any{}
					for k, v := range m["vocab"].(map[string]any) {
						if id, _ := v.(float64); id < 300 {
							small[k] = v
						}
					}
					m["vocab"] = small
					m["merges"] = m["merges"].([]any)[:40]
					doc["added_tokens"] = []any{}
					if b, err := json.Marshal(doc); err == nil {
						f.Add(b)
					}
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := fromHFJSON(data, nil, nil)
		if err != nil {
			return
		}
		for _, s := range []string{"", "hello world", " a  b\n\nc 123 é 🦙", "\xff<s>"} {
			for _, id := range tk.Encode(s, true) {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, tk.VocabSize())
				}
			}
		}
		d := tk.NewStreamDecoder()
		for id := range int32(min(tk.VocabSize(), 64)) {
			if s := d.Add(id); !utf8.ValidString(s) {
				t.Fatalf("stream gave invalid UTF-8 %q", s)
			}
		}
	})
}
