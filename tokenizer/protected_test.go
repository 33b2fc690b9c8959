package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
)

// plainTokenizer is the tokenizer of the shared GGUF rel with every text
// SpecialTexts lists renamed to one no input holds, so that its Encode
// reads that text as text: llama.cpp's parse_special=false, reached without
// EncodeProtected.
func plainTokenizer(t *testing.T, rel string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(shared.Models(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	special := map[string]bool{}
	for _, s := range ggufTokenizer(t, rel).SpecialTexts() {
		special[s] = true
	}
	v.Tokens = slices.Clone(v.Tokens)
	for i, s := range v.Tokens {
		if special[s] {
			v.Tokens[i] = fmt.Sprintf("\x00renamed %d\x00", i)
		}
	}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestEncodeProtectedNoRanges: without ranges, or with ranges that touch
// no special token, EncodeProtected gives Encode's ids, which are
// llama.cpp's on its test vectors and on text with special tokens.
func TestEncodeProtectedNoRanges(t *testing.T) {
	for _, vt := range vocabTests {
		t.Run(vt.name, func(t *testing.T) {
			tk := ggufTokenizer(t, vt.gguf)
			cases := readCases(t, shared.Models(t, vt.vectors+".inp"), shared.Models(t, vt.vectors+".out"))
			for i, c := range cases {
				for _, r := range [][][2]int{nil, {}, {{0, 0}}, {{0, len(c.text)}}, {{len(c.text) / 2, len(c.text)}, {1, 3}}} {
					if got := tk.EncodeProtected(c.text, false, r); !slices.Equal(got, c.ids) {
						t.Errorf("case %d %q ranges %v:\n got  %v\n want %v", i, c.text, r, got, c.ids)
					}
				}
			}
			for _, s := range tk.SpecialTexts()[:min(3, len(tk.SpecialTexts()))] {
				text := "Hi " + s + " there" + s
				want := tk.Encode(text, true)
				if want[len(want)-1] != tk.Encode(s, false)[0] {
					t.Fatalf("%q: the special token was not split out: %v", text, want)
				}
				for _, r := range [][][2]int{nil, {{0, 3}}, {{3 + len(s), 3 + len(s) + 6}}, {{len(text), len(text) + 5}}, {{-5, 0}}} {
					if got := tk.EncodeProtected(text, true, r); !slices.Equal(got, want) {
						t.Errorf("%q ranges %v: %v, Encode gives %v", text, r, got, want)
					}
				}
			}
		})
	}
}

// TestEncodeProtectedLiteral: a special token overlapping a range is
// tokenized as its text with its neighbours, exactly as a tokenizer that
// has no such special token encodes the whole text (parse_special=false);
// one outside the ranges stays one token.
func TestEncodeProtectedLiteral(t *testing.T) {
	for _, vt := range vocabTests {
		t.Run(vt.name, func(t *testing.T) {
			tk := ggufTokenizer(t, vt.gguf)
			plain := plainTokenizer(t, vt.gguf)
			cases := readCases(t, shared.Models(t, vt.vectors+".inp"), shared.Models(t, vt.vectors+".out"))
			specials := tk.SpecialTexts()
			if len(specials) == 0 {
				t.Fatal("no special tokens")
			}
			for i, c := range cases {
				s := specials[i%len(specials)]
				// The special text in the middle of the case, protected
				// wholly or in part (one byte of it suffices).
				mid := len(c.text) / 2
				for mid > 0 && mid < len(c.text) && c.text[mid]&0xc0 == 0x80 {
					mid++
				}
				text := c.text[:mid] + s + c.text[mid:]
				want := plain.Encode(text, true)
				for _, r := range [][][2]int{{{mid, mid + len(s)}}, {{mid + len(s) - 1, mid + len(s) + 1}}, {{0, len(text)}}, {{mid + 1, mid + 2}, {0, 1}}} {
					if got := tk.EncodeProtected(text, true, r); !slices.Equal(got, want) {
						t.Errorf("case %d %q ranges %v:\n got  %v\n want %v", i, text, r, got, want)
					}
				}
				// The same text again after it, unprotected: one token there.
				text2 := text + s
				want2 := append(plain.Encode(text, true), tk.Encode(s, false)...)
				if got := tk.EncodeProtected(text2, true, [][2]int{{mid, mid + len(s)}}); !slices.Equal(got, want2) {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, text2, got, want2)
				}
			}
		})
	}
}

// TestEncodeProtectedLlama3: the Llama 3 end-of-turn token typed in a
// message costs its text's tokens.
func TestEncodeProtectedLlama3(t *testing.T) {
	tk := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	text := "a<|eot_id|>b<|eot_id|>"
	// "a", "<|", "eot", "_id", "|>b" (llama-bpe's pre-tokenizer keeps
	// punctuation and the letter after it together only as " ?[^\s\p{L}\p{N}]+"
	// allows, so "|>" and "b" part), then the unprotected token.
	got := tk.EncodeProtected(text, false, [][2]int{{1, 11}})
	want := append(tk.Encode("a", false), tk.Encode("<|", false)...)
	want = append(want, tk.Encode("eot", false)...)
	want = append(want, tk.Encode("_id", false)...)
	want = append(want, tk.Encode("|>", false)...)
	want = append(want, tk.Encode("b", false)...)
	want = append(want, 128009)
	if !slices.Equal(got, want) {
		t.Errorf("EncodeProtected(%q) = %v, want %v", text, got, want)
	}
	if strings.Count(tk.Decode(got), "<|eot_id|>") != 1 {
		t.Errorf("decoded %q", tk.Decode(got))
	}
}
