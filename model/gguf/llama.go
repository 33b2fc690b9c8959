package gguf

import (
	"fmt"

	"github.com/glint-llm/glint/model"
)

// LlamaHParams are the llama.* hyper-parameters of c, in the order
// llama.cpp's converter writes them: what a file needs besides
// general.architecture = llama, its name and its tokenizer.
func LlamaHParams(c model.Config) ([]KV, error) {
	pairs := []struct {
		k string
		v any
	}{
		{"llama.block_count", uint32(c.NLayer)},
		{"llama.context_length", uint32(c.Context)},
		{"llama.embedding_length", uint32(c.NEmbd)},
		{"llama.feed_forward_length", uint32(c.NFF)},
		{"llama.attention.head_count", uint32(c.NHead)},
		{"llama.attention.head_count_kv", uint32(c.NHeadKV)},
		{"llama.rope.freq_base", c.RopeTheta},
		{"llama.attention.layer_norm_rms_epsilon", c.RMSEps},
		{"llama.attention.key_length", uint32(c.HeadDim)},
		{"llama.attention.value_length", uint32(c.HeadDim)},
		{"llama.rope.dimension_count", uint32(c.RopeDims)},
		{"llama.vocab_size", uint32(c.Vocab)},
	}
	kvs := make([]KV, len(pairs))
	for i, p := range pairs {
		v, err := NewValue(p.v)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: %w", p.k, err)
		}
		kvs[i] = KV{Key: p.k, Value: v}
	}
	return kvs, nil
}
