package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Meta's own test (llama-models models/llama3/tests/api/test_tokenizer.py).
func TestLlama3MetaVector(t *testing.T) {
	tk := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	if !tk.AddBOS() || tk.BOS() != 128000 || tk.EOS() != 128001 {
		t.Fatalf("AddBOS %v BOS %d EOS %d, want true 128000 128001", tk.AddBOS(), tk.BOS(), tk.EOS())
	}
	got := append(tk.Encode("This is a test sentence.", true), tk.EOS())
	want := []int32{128000, 2028, 374, 264, 1296, 11914, 13, 128001}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSpecialTokensInText(t *testing.T) {
	tests := []struct {
		vocab, text string
		addSpecial  bool
		want        []int32
	}{
		{"llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf", "<|begin_of_text|>Hello<|eot_id|>", false, []int32{128000, 9906, 128009}},
		{"llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf", "Hello", true, []int32{128000, 9906}},
		// "<|start_header_id|>" and "<|end_header_id|>" are split out before
		// "user" is tokenized; "\n\n" is one token (271).
		{"llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf", "<|start_header_id|>user<|end_header_id|>\n\nHi", false, []int32{128006, 882, 128007, 271, 13347}},
		// A special token never merges with neighbouring text.
		{"llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf", "a<|eot_id|>b", false, []int32{64, 128009, 65}},
		// SentencePiece: BOS from the text; the dummy-prefix space is added
		// again after it (llama.cpp's is_prev_special), so "Hello" is
		// "▁Hello" (15043) both times.
		{"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", "Hello<s>Hello", false, []int32{15043, 1, 15043}},
		{"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", "Hello", true, []int32{1, 15043}},
		{"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", "", true, []int32{1}},
		{"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", "", false, nil},
		{"llama.cpp-vocab/ggml-vocab-gpt-2.gguf", "Hello<|endoftext|>", false, []int32{15496, 50256}},
	}
	for _, tc := range tests {
		tk := ggufTokenizer(t, tc.vocab)
		if got := tk.Encode(tc.text, tc.addSpecial); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(%q, %v) = %v, want %v", tc.vocab, tc.text, tc.addSpecial, got, tc.want)
		}
	}
}

func TestEOGAndMetadata(t *testing.T) {
	l3 := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	if l3.VocabSize() != 128256 {
		t.Errorf("llama3 VocabSize %d, want 128256", l3.VocabSize())
	}
	for _, name := range []string{"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"} {
		id, ok := l3.ID(name)
		if !ok || !l3.IsEOG(id) {
			t.Errorf("llama3: %s (id %d, found %v) is not end-of-generation", name, id, ok)
		}
	}
	if l3.EOT() != 128009 {
		t.Errorf("llama3 EOT %d, want 128009 (<|eot_id|>)", l3.EOT())
	}
	for _, id := range []int32{128000, 128006, 9906} {
		if l3.IsEOG(id) {
			t.Errorf("llama3: %d (%q) is end-of-generation", id, l3.Token(id))
		}
	}
	spm := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-llama-spm.gguf")
	if spm.VocabSize() != 32000 || spm.BOS() != 1 || spm.EOS() != 2 || !spm.AddBOS() || !spm.IsEOG(2) || spm.IsEOG(1) {
		t.Errorf("llama-spm: size %d BOS %d EOS %d AddBOS %v", spm.VocabSize(), spm.BOS(), spm.EOS(), spm.AddBOS())
	}
	g2 := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-gpt-2.gguf")
	if g2.VocabSize() != 50257 || g2.AddBOS() || !g2.IsEOG(50256) {
		t.Errorf("gpt-2: size %d AddBOS %v EOG(50256) %v", g2.VocabSize(), g2.AddBOS(), g2.IsEOG(50256))
	}
}

func TestPiece(t *testing.T) {
	spm := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-llama-spm.gguf")
	l3 := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf")
	tests := []struct {
		tk   *Tokenizer
		id   int32
		want string
	}{
		{spm, 15043, " Hello"}, // "▁Hello"
		{spm, 13, "\n"},        // "<0x0A>"
		{spm, 3, "\x00"},       // "<0x00>"
		{spm, 1, ""},           // <s>: control tokens are not rendered
		{spm, 0, ""},           // <unk>
		{l3, 9906, "Hello"},    // "Hello"
		{l3, 22691, " Hello"},  // "ĠHello"
		{l3, 271, "\n\n"},      // "ĊĊ"
		{l3, 128009, ""},       // <|eot_id|>
		{l3, -1, ""},           // out of range
		{l3, 1 << 30, ""},      // out of range
	}
	for _, tc := range tests {
		if got := string(tc.tk.Piece(tc.id)); got != tc.want {
			t.Errorf("Piece(%d) (%q) = %q, want %q", tc.id, tc.tk.Token(tc.id), got, tc.want)
		}
	}
}

// TestStreamDecoder feeds tokens one at a time: an emoji spelled as four
// byte tokens appears only with its last byte, and every output is valid.
func TestStreamDecoder(t *testing.T) {
	for _, vocab := range []string{"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", "llama.cpp-vocab/ggml-vocab-gpt-2.gguf", "llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf"} {
		tk := ggufTokenizer(t, vocab)
		text := "I like 🦙 and 😶‍🌫️, не так ли? 我想在apple工作"
		ids := tk.Encode(text, false)
		d := tk.NewStreamDecoder()
		var b strings.Builder
		for i, id := range ids {
			s := d.Add(id)
			if !utf8.ValidString(s) {
				t.Errorf("%s: token %d: invalid UTF-8 %q", vocab, i, s)
			}
			b.WriteString(s)
			// Everything decoded so far, minus an unfinished character, is out.
			full := tk.Decode(ids[:i+1])
			if got := b.String(); !strings.HasPrefix(full, got) || len(full)-len(got) >= utf8.UTFMax {
				t.Errorf("%s: after token %d output %q, decoded so far %q", vocab, i, got, full)
			}
		}
		b.WriteString(d.Flush())
		want := text
		if tk.algo == algoSPM {
			want = " " + text
		}
		if b.String() != want {
			t.Errorf("%s: streamed %q, want %q", vocab, b.String(), want)
		}
	}

	// The llama SPM vocabulary has no token for 🦙, so it is four byte tokens.
	spm := ggufTokenizer(t, "llama.cpp-vocab/ggml-vocab-llama-spm.gguf")
	var bytesIDs []int32
	for _, c := range []byte("🦙") {
		bytesIDs = append(bytesIDs, spm.byteTok[c])
	}
	if ids := spm.Encode("🦙", false); !slices.Equal(ids[len(ids)-4:], bytesIDs) {
		t.Fatalf("Encode(🦙) = %v, want it to end in byte tokens %v", ids, bytesIDs)
	}
	d := spm.NewStreamDecoder()
	for i, id := range bytesIDs {
		got := d.Add(id)
		want := ""
		if i == 3 {
			want = "🦙"
		}
		if got != want {
			t.Errorf("byte token %d: Add = %q, want %q", i, got, want)
		}
	}
	// An unfinished character is replaced at Flush, never emitted raw.
	d.Add(bytesIDs[0])
	d.Add(bytesIDs[1])
	if got := d.Add(spm.byteTok['A']); got != "\uFFFDA" {
		t.Errorf("broken sequence then 'A': %q, want %q", got, "\uFFFDA")
	}
	d.Add(bytesIDs[0])
	if got := d.Flush(); got != "\uFFFD" {
		t.Errorf("Flush of a lone lead byte = %q, want U+FFFD", got)
	}
}

func TestNewRejectsBadVocab(t *testing.T) {
	good := func() *Vocab {
		return &Vocab{Model: "gpt2", Tokens: []string{"a", "b", "ab"}, Merges: []string{"a b"}, BOS: -1, EOS: -1, EOT: -1, UNK: -1, PAD: -1}
	}
	if _, err := New(good()); err != nil {
		t.Fatalf("good vocab: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(v *Vocab)
		want   string
	}{
		{"nil tokens", func(v *Vocab) { v.Tokens = nil }, "empty vocabulary"},
		{"model", func(v *Vocab) { v.Model = "wpm" }, `unsupported tokenizer model "wpm"`},
		{"pre", func(v *Vocab) { v.Pre = "chatglm-bpe" }, `unsupported pre-tokenizer "chatglm-bpe"`},
		{"scores", func(v *Vocab) { v.Scores = []float32{1} }, "1 scores for 3 tokens"},
		{"types", func(v *Vocab) { v.Types = []int32{1, 1} }, "2 token types for 3 tokens"},
		{"bos", func(v *Vocab) { v.BOS = 3 }, "BOS id 3 out of range"},
		{"eos", func(v *Vocab) { v.EOS = -2 }, "EOS id -2 out of range"},
		{"add bos", func(v *Vocab) { v.AddBOS = true }, "AddBOS set but there is no BOS"},
		{"merge", func(v *Vocab) { v.Merges = []string{"ab"} }, `merge 0 "ab" has no space`},
	}
	for _, tc := range tests {
		v := good()
		tc.mutate(v)
		_, err := New(v)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

// TestSPMAlgorithm checks the score-driven merge order on a toy
// vocabulary against merges worked out by hand.
func TestSPMAlgorithm(t *testing.T) {
	v := &Vocab{
		Model:  "llama",
		Tokens: []string{"<unk>", "<0x41>", "a", "b", "c", "ab", "bc", "abc", "▁", "▁a"},
		Scores: []float32{0, 0, -5, -5, -5, -2, -1, -3, -4, -6},
		Types:  []int32{TypeUnknown, TypeByte, 1, 1, 1, 1, 1, 1, 1, 1},
		BOS:    -1, EOS: -1, EOT: -1, UNK: 0, PAD: -1,
		AddSpacePrefix: true,
	}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want []int32
	}{
		// "▁abc": bc (-1) beats ab (-2) and ▁a (-6); then nothing joins
		// "▁" "a" "bc" except "▁a" (-6)… "abc" needs "a"+"bc": -3 > -6.
		{"abc", []int32{8, 7}},
		// "▁ab": ab (-2) beats ▁a (-6).
		{"ab", []int32{8, 5}},
		// "A" has only a byte token; "d" has none, so it becomes <unk>.
		{"Ad", []int32{8, 1, 0}},
	}
	for _, tc := range tests {
		if got := tk.Encode(tc.text, false); !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
