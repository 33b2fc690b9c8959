package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glint-llm/glint/model/gguf"
)

// gemmaTexts are pretokTexts plus what Gemma's conventions touch: a leading
// space (no dummy prefix is added, so it is a token of its own), its turn
// markers written in the text, and runs of newlines and spaces.
var gemmaTexts = append(slices.Clone(pretokTexts),
	" leading space",
	"<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
	"two\n\nnewlines and    four spaces",
)

// gemmaVocab is a SentencePiece vocabulary laid out as Gemma's is and
// written as convert_hf_to_gguf.py writes Gemma's: <pad> 0, <eos> 1,
// <bos> 2, <unk> 3, the turn markers, the 256 byte-fallback tokens, then
// pieces scored in order (a real vocabulary's scores fall with the id too):
// every substring of up to 6 characters of the texts with spaces as "▁",
// so that the merge order shows in the ids; tokenizer.ggml.model "llama",
// add_space_prefix false, BOS added.
func gemmaVocab() *Vocab {
	v := &Vocab{Model: "llama", Pre: "default", BOS: 2, EOS: 1, EOT: -1, UNK: 3, PAD: 0, AddBOS: true}
	add := func(tok string, typ int32) {
		v.Tokens = append(v.Tokens, tok)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, -float32(len(v.Tokens)))
	}
	for i, s := range []string{"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"} {
		typ := TypeControl
		if i == 3 {
			typ = TypeUnknown
		}
		add(s, typ)
	}
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), TypeByte)
	}
	seen := map[string]bool{}
	for n := 1; n <= 6; n++ {
		for _, text := range gemmaTexts {
			r := []rune(strings.ReplaceAll(text, " ", spaceMark))
			for i := 0; i+n <= len(r); i++ {
				s := string(r[i : i+n])
				if !seen[s] && !strings.ContainsAny(s, "<>") {
					seen[s] = true
					add(s, TypeNormal)
				}
			}
		}
	}
	return v
}

// writeGemmaVocab writes v as a vocabulary-only GGUF that llama.cpp loads.
func writeGemmaVocab(path string, v *Vocab) error {
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "gemma2"}, {"general.name", "gemma-vocab"},
		{"gemma2.block_count", uint32(26)}, {"gemma2.context_length", uint32(512)},
		{"gemma2.embedding_length", uint32(64)}, {"gemma2.feed_forward_length", uint32(128)},
		{"gemma2.attention.head_count", uint32(4)}, {"gemma2.attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.pre", "default"},
		{"tokenizer.ggml.tokens", v.Tokens}, {"tokenizer.ggml.scores", v.Scores}, {"tokenizer.ggml.token_type", v.Types},
		{"tokenizer.ggml.bos_token_id", uint32(v.BOS)}, {"tokenizer.ggml.eos_token_id", uint32(v.EOS)},
		{"tokenizer.ggml.unknown_token_id", uint32(v.UNK)}, {"tokenizer.ggml.padding_token_id", uint32(v.PAD)},
		{"tokenizer.ggml.add_bos_token", true}, {"tokenizer.ggml.add_eos_token", false},
		{"tokenizer.ggml.add_space_prefix", false},
	} {
		if err := w.Add(kv.k, kv.v); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// TestGemmaVectors checks the SentencePiece tokenizer with Gemma's
// conventions (its ids, no dummy space prefix, byte fallback, turn markers
// as special tokens) against llama.cpp's: testdata/spm-gemma.txt holds, per
// text, the ids llama-tokenize gave for it on gemmaVocab, BOS included.
// The vocabulary goes through a GGUF file and VocabFromGGUF, as a model's
// does. To remake them: GLINT_GEMMA_VOCAB_DIR=DIR go test ./tokenizer -run
// TestGemmaVectors writes DIR/gemma-vocab.gguf and DIR/textNN.txt; each
// line's ids are then what llama-tokenize -m DIR/gemma-vocab.gguf -f
// DIR/textNN.txt --ids --no-escape --log-disable prints.
func TestGemmaVectors(t *testing.T) {
	dir := os.Getenv("GLINT_GEMMA_VOCAB_DIR")
	keep := dir != ""
	if !keep {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "gemma-vocab.gguf")
	if err := writeGemmaVocab(path, gemmaVocab()); err != nil {
		t.Fatal(err)
	}
	if keep {
		for i, text := range gemmaTexts {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("text%02d.txt", i)), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
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
	want := readPretokVectors(t, filepath.Join("testdata", "spm-gemma.txt"))
	if len(want) != len(gemmaTexts) {
		t.Fatalf("%d vectors for %d texts", len(want), len(gemmaTexts))
	}
	for i, text := range gemmaTexts {
		if want[i].text != text {
			t.Fatalf("vector %d is for %q, not %q", i, want[i].text, text)
		}
		if got := tk.Encode(text, true); !slices.Equal(got, want[i].ids) {
			t.Errorf("%q:\n got  %v\n want %v", text, words(tk, got), words(tk, want[i].ids))
		}
		// Decoding gives the text back, but for the control tokens it
		// leaves out, as llama.cpp's does.
		plain := strings.NewReplacer("<start_of_turn>", "", "<end_of_turn>", "").Replace(text)
		if got := tk.Decode(want[i].ids[1:]); got != plain {
			t.Errorf("decoding %v: %q, want %q", want[i].ids, got, plain)
		}
	}
}
