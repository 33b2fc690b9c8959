package tokenizer

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/gguf"
)

// BenchmarkLoadLlama3 measures building the 128256-token, 280147-merge
// Llama 3 tokenizer from an open GGUF file.
func BenchmarkLoadLlama3(b *testing.B) {
	f, err := gguf.Open(shared.Models(b, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		if _, err := FromGGUF(f); err != nil {
			b.Fatal(err)
		}
	}
}

// benchText is about 64 KiB of mixed text: the llama.cpp test strings
// shuffled together.
func benchText(b *testing.B) string {
	in, err := os.ReadFile(shared.Models(b, "llama.cpp-vocab/ggml-vocab-llama-bpe.gguf.inp"))
	if err != nil {
		b.Fatal(err)
	}
	parts := strings.Split(string(in), "\n__ggml_vocab_test__\n")
	r := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	for sb.Len() < 64<<10 {
		sb.WriteString(parts[r.IntN(len(parts))])
		sb.WriteByte(' ')
	}
	return sb.String()
}

func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, vt := range vocabTests {
		b.Run(vt.name, func(b *testing.B) {
			tk := ggufTokenizer(b, vt.gguf)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tk.Encode(text, true)
			}
		})
	}
}

// BenchmarkEncodeOneWord is the worst case for merging: a single
// 64 KiB pre-token.
func BenchmarkEncodeOneWord(b *testing.B) {
	text := strings.Repeat("abcdefghij", 64<<10/10)
	for _, vt := range vocabTests {
		b.Run(vt.name, func(b *testing.B) {
			tk := ggufTokenizer(b, vt.gguf)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tk.Encode(text, true)
			}
		})
	}
}
