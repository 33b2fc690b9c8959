package tokenizer

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
)

// vocabCase is one of llama.cpp's tokenizer test strings with the ids its
// test-tokenizer-0 expects (tokenized with add_special=false,
// parse_special=false; none of the strings contains a special token).
type vocabCase struct {
	text string
	ids  []int32
}

// readCases reads a llama.cpp .inp/.out pair.
func readCases(t testing.TB, inp, out string) []vocabCase {
	t.Helper()
	in, err := os.ReadFile(inp)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(in), "\n__ggml_vocab_test__\n")
	// The file ends with the separator, so the last split is empty.
	if texts[len(texts)-1] == "" {
		texts = texts[:len(texts)-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(exp), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d cases but %d lines in %s", inp, len(texts), len(lines), out)
	}
	cases := make([]vocabCase, len(texts))
	for i, text := range texts {
		cases[i].text = text
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s line %d: %v", out, i+1, err)
			}
			cases[i].ids = append(cases[i].ids, int32(id))
		}
	}
	return cases
}

var ggufCache sync.Map // path → *Tokenizer

// ggufTokenizer loads (once per test binary) the tokenizer of a shared GGUF.
func ggufTokenizer(t testing.TB, rel string) *Tokenizer {
	t.Helper()
	path := shared.Models(t, rel)
	if tk, ok := ggufCache.Load(path); ok {
		return tk.(*Tokenizer)
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
	ggufCache.Store(path, tk)
	return tk
}

var vocabTests = []struct {
	name, gguf, vectors string
}{
	{"llama-spm", "llama.cpp-vocab/ggml-vocab-llama-spm.gguf", "llama.cpp-vocab/ggml-vocab-llama-spm.gguf"},
	{"gpt-2", "llama.cpp-vocab/ggml-vocab-gpt-2.gguf", "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"},
	{"llama3-bpe", "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf", "llama.cpp-vocab/ggml-vocab-llama-bpe.gguf"},
}

func TestLlamaCppVectors(t *testing.T) {
	for _, vt := range vocabTests {
		t.Run(vt.name, func(t *testing.T) {
			tk := ggufTokenizer(t, vt.gguf)
			cases := readCases(t, shared.Models(t, vt.vectors+".inp"), shared.Models(t, vt.vectors+".out"))
			for i, c := range cases {
				got := tk.Encode(c.text, false)
				if !slices.Equal(got, c.ids) {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, c.text, got, c.ids)
				}
			}
		})
	}
}

// TestRoundTrip: decoding the ids gives back the text, exactly for
// byte-level BPE; SentencePiece adds one leading space.
func TestRoundTrip(t *testing.T) {
	for _, vt := range vocabTests {
		t.Run(vt.name, func(t *testing.T) {
			tk := ggufTokenizer(t, vt.gguf)
			cases := readCases(t, shared.Models(t, vt.vectors+".inp"), shared.Models(t, vt.vectors+".out"))
			for i, c := range cases {
				want := c.text
				if tk.algo == algoSPM && c.text != "" {
					want = " " + c.text
				}
				if got := tk.Decode(tk.Encode(c.text, false)); got != want {
					t.Errorf("case %d: Decode(Encode(%q)) = %q", i, c.text, got)
				}
			}
		})
	}
}
