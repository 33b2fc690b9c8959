package tokenizer

import (
	"errors"
	"fmt"

	"github.com/glint-llm/glint/model/gguf"
)

// VocabFromGGUF reads the tokenizer.ggml.* metadata of a GGUF file, with
// llama.cpp's defaults for keys a file leaves out.
func VocabFromGGUF(f *gguf.File) (*Vocab, error) {
	v := &Vocab{BOS: -1, EOS: -1, EOT: -1, UNK: -1, PAD: -1}
	var err error
	if v.Model, err = f.String("tokenizer.ggml.model"); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if v.Pre, err = optional(f.String("tokenizer.ggml.pre")); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if v.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if v.Scores, err = optional(f.Float32s("tokenizer.ggml.scores")); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if v.Types, err = optional(f.Int32s("tokenizer.ggml.token_type")); err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}

	switch v.Model {
	case "llama":
		// llama.cpp's SPM defaults (llama-vocab.cpp load).
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS, v.AddSpacePrefix = true, true
	case "gpt2":
		if v.Merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		switch v.Pre {
		case "llama3", "llama-v3", "llama-bpe", "falcon3":
			v.AddBOS = true
		}
	default:
		return nil, fmt.Errorf("tokenizer: %s: unsupported tokenizer.ggml.model %q", f.Path, v.Model)
	}

	ids := []struct {
		key string
		dst *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
	}
	// The end-of-message and fill-in-the-middle ids end a generation too
	// (llama.cpp: special_eog_ids).
	for _, key := range []string{"tokenizer.ggml.eom_token_id", "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"} {
		x, err := f.Uint(key)
		if errors.Is(err, gguf.ErrMissing) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		if x < uint64(len(v.Tokens)) {
			v.EOG = append(v.EOG, int32(x))
		}
	}
	for _, k := range ids {
		x, err := f.Uint(k.key)
		if errors.Is(err, gguf.ErrMissing) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		// llama.cpp keeps its default when the id is out of range.
		if x < uint64(len(v.Tokens)) {
			*k.dst = int32(x)
		}
	}
	for _, k := range []struct {
		key string
		dst *bool
	}{
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_eos_token", &v.AddEOS},
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
	} {
		b, err := f.Bool(k.key)
		if errors.Is(err, gguf.ErrMissing) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		*k.dst = b
	}
	return v, nil
}

// FromGGUF builds the tokenizer a GGUF file describes.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, f.Path)
	}
	return t, nil
}

// optional turns a missing key into the zero value.
func optional[T any](x T, err error) (T, error) {
	if errors.Is(err, gguf.ErrMissing) {
		var zero T
		return zero, nil
	}
	return x, err
}
