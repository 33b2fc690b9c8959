package tokenizer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/glint-llm/glint/model/gguf"
)

// pretokTexts exercise what the pre-tokenizers treat differently: digit
// runs, contractions, CJK, kana and hangul, accents and combining marks,
// punctuation and symbols (ASCII and not), newlines and whitespace runs
// (ASCII and not).
var pretokTexts = []string{
	"Hello world",
	"I'm sure you'll see it's THE 'best' they've DONE",
	"12345 678 9 1234567 x2y34z",
	"$100.00 + 3.5% = x^2 | <tag> {a} [b] (c) _d_ `e` ~f @g #h",
	"Hello,  world!!!  ...  what?!",
	"line one\nline two\n\nthree\r\nfour\n",
	"   leading spaces and trailing   ",
	"tabs\there\t\tand  \t mixed \n\t",
	"你好世界，今天天气很好。",
	"こんにちは、カタカナとひらがな。漢字も",
	"안녕하세요 세계",
	"Café naïve résumé Ελληνικά русский µ",
	"e\u0301 a\u0308 combining",
	"ＡＢＣ！ｘｙｚ？ fullwidth",
	"nbsp\u00a0here\u3000ideographic\u2003em",
	"emoji 🙂👍🏽 and ✓ check ™ © €5",
	"code: if (x == 1) { return y->z; } // done",
	"١٢٣ ٤٥ Arabic-Indic ½ ² digits",
	"MixedCASE and CamelCase and snake_case",
	"a\n\n\n  b  \n  c",
	"'s 'S 'LL 'Re",
	"...!!!???---",
	" ",
	"x",
}

// pretokVocab is a byte-level vocabulary whose merges rebuild every
// substring of up to 8 byte-level characters of the texts, so that a word
// boundary the pre-tokenizer draws shows in the ids. The same vocabulary
// was written as a GGUF file and tokenized by llama.cpp's llama-tokenize
// for the expected ids (GLINT_PRETOK_VOCAB_DIR=DIR writes the files).
func pretokVocab(pre string) *Vocab {
	tokens := make([]string, 0, 1<<15)
	seen := map[string]bool{}
	for b := range 256 {
		tokens = append(tokens, string(byteToRune[b]))
		seen[string(byteToRune[b])] = true
	}
	var merges []string
	for n := 2; n <= 8; n++ {
		for _, text := range pretokTexts {
			var enc []string
			for _, b := range []byte(text) {
				enc = append(enc, string(byteToRune[b]))
			}
			for i := 0; i+n <= len(enc); i++ {
				s := strings.Join(enc[i:i+n], "")
				if seen[s] {
					continue
				}
				seen[s] = true
				tokens = append(tokens, s)
				merges = append(merges, strings.Join(enc[i:i+n-1], "")+" "+enc[i+n-1])
			}
		}
	}
	return &Vocab{Model: "gpt2", Pre: pre, Tokens: tokens, Merges: merges, BOS: -1, EOS: -1, EOT: -1, UNK: -1, PAD: -1}
}

var pretokNames = []string{"smollm", "deepseek-llm", "deepseek-v3", "qwen2"}

// writePretokVocab writes v as a vocabulary-only GGUF that llama.cpp loads.
func writePretokVocab(path string, v *Vocab) error {
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"}, {"general.name", "pretok-" + v.Pre},
		{"llama.block_count", uint32(1)}, {"llama.context_length", uint32(512)},
		{"llama.embedding_length", uint32(64)}, {"llama.feed_forward_length", uint32(128)},
		{"llama.attention.head_count", uint32(4)}, {"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", v.Pre},
		{"tokenizer.ggml.tokens", v.Tokens}, {"tokenizer.ggml.merges", v.Merges},
		{"tokenizer.ggml.add_bos_token", false},
	} {
		if err := w.Add(kv.k, kv.v); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// TestPretokVectors checks the pre-tokenizers that llama.cpp runs as
// regular-expression sequences against the ids llama-tokenize gave on the
// same vocabulary (testdata/pretok-NAME.txt: the text as a JSON string,
// a tab, the ids).
// To remake them: GLINT_PRETOK_VOCAB_DIR=DIR go test ./tokenizer -run
// TestPretokVectors writes DIR/pretok-NAME.gguf and DIR/textNN.txt; each
// line's ids are then what llama-tokenize -m DIR/pretok-NAME.gguf -f
// DIR/textNN.txt --ids --no-bos --no-escape --log-disable prints.
func TestPretokVectors(t *testing.T) {
	if dir := os.Getenv("GLINT_PRETOK_VOCAB_DIR"); dir != "" {
		for _, pre := range pretokNames {
			if err := writePretokVocab(filepath.Join(dir, "pretok-"+pre+".gguf"), pretokVocab(pre)); err != nil {
				t.Fatal(err)
			}
		}
		for i, text := range pretokTexts {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("text%02d.txt", i)), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, pre := range pretokNames {
		tk, err := New(pretokVocab(pre))
		if err != nil {
			t.Fatalf("%s: %v", pre, err)
		}
		want := readPretokVectors(t, filepath.Join("testdata", "pretok-"+pre+".txt"))
		if len(want) != len(pretokTexts) {
			t.Fatalf("%s: %d vectors for %d texts", pre, len(want), len(pretokTexts))
		}
		for i, text := range pretokTexts {
			if want[i].text != text {
				t.Fatalf("%s: vector %d is for %q, not %q", pre, i, want[i].text, text)
			}
			if got := tk.Encode(text, false); !slices.Equal(got, want[i].ids) {
				t.Errorf("%s: %q:\n got  %v\n want %v", pre, text, words(tk, got), words(tk, want[i].ids))
			}
		}
	}
}

type pretokVector struct {
	text string
	ids  []int32
}

func readPretokVectors(t *testing.T, path string) []pretokVector {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pretokVector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		js, ids, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("%s: line without a tab: %q", path, sc.Text())
		}
		var v pretokVector
		if err := json.Unmarshal([]byte(js), &v.text); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, s := range strings.Fields(ids) {
			id, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			v.ids = append(v.ids, int32(id))
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// words shows ids as their decoded pieces, for failure messages.
func words(tk *Tokenizer, ids []int32) []string {
	var out []string
	for _, id := range ids {
		p := tk.Piece(id)
		if utf8.Valid(p) {
			out = append(out, string(p))
		} else {
			out = append(out, fmt.Sprintf("%x", p))
		}
	}
	return out
}

// The regular-expression pre-tokenizers cut any text into non-empty words
// that cover it in order, whatever the characters.
func TestPretokStagesCover(t *testing.T) {
	alphabet := []rune("aZ09 \t\n\r\v'!~€µ你こ한\u00a0\u3000\u0301١½🙂\uFFFD\x00")
	seed := uint32(1)
	for iter := 0; iter < 2000; iter++ {
		n := iter % 40
		runes := make([]rune, n)
		for i := range runes {
			seed = seed*1664525 + 1013904223
			runes[i] = alphabet[int(seed>>16)%len(alphabet)]
		}
		for _, pre := range pretokNames {
			p, _ := pretokByName(pre)
			pos := 0
			for _, w := range p.split(runes) {
				if w[0] != pos || w[1] <= w[0] {
					t.Fatalf("%s: %q: words %v do not cover the text", pre, string(runes), p.split(runes))
				}
				pos = w[1]
			}
			if pos != n {
				t.Fatalf("%s: %q: words end at %d of %d", pre, string(runes), pos, n)
			}
		}
	}
}

// A tokenizer.json with SmolLM's pre-tokenizer (Digits with
// individual_digits, then ByteLevel) tokenizes as llama.cpp's "smollm".
func TestHFDigitsIsSmolLM(t *testing.T) {
	v := pretokVocab("smollm")
	vocab := map[string]int{}
	for i, s := range v.Tokens {
		vocab[s] = i
	}
	doc := map[string]any{
		"version": "1.0",
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": v.Merges},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := FromHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := readPretokVectors(t, filepath.Join("testdata", "pretok-smollm.txt"))
	for i, text := range pretokTexts {
		if got := tk.Encode(text, false); !slices.Equal(got, want[i].ids) {
			t.Errorf("%q:\n got  %v\n want %v", text, words(tk, got), words(tk, want[i].ids))
		}
	}
}
