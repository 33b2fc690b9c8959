package gguf

import (
	"fmt"

	"github.com/glint-llm/glint/model"
)

// HParams are the <arch>.* hyper-parameters of c, in the order llama.cpp's
// converter writes them, with the keys its loader reads for c.Arch: what a
// file needs besides general.architecture, its name and its tokenizer.
func HParams(c model.Config) ([]KV, error) {
	a := c.Arch + "."
	var pairs []struct {
		k string
		v any
	}
	add := func(k string, v any) {
		pairs = append(pairs, struct {
			k string
			v any
		}{a + k, v})
	}
	add("block_count", uint32(c.NLayer))
	add("context_length", uint32(c.Context))
	add("embedding_length", uint32(c.NEmbd))
	add("feed_forward_length", uint32(c.NFF))
	add("attention.head_count", uint32(c.NHead))
	add("attention.head_count_kv", uint32(c.NHeadKV))
	if !c.NoRoPE {
		add("rope.freq_base", c.RopeTheta)
	}
	if c.LayerNorm {
		add("attention.layer_norm_epsilon", c.RMSEps)
	} else {
		add("attention.layer_norm_rms_epsilon", c.RMSEps)
	}
	if !c.NoRoPE {
		add("attention.key_length", uint32(c.HeadDim))
		add("attention.value_length", uint32(c.HeadDim))
		if c.Arch == "llama" || c.Arch == "phi3" || c.RopeDims != c.HeadDim {
			add("rope.dimension_count", uint32(c.RopeDims))
		}
	}
	add("vocab_size", uint32(c.Vocab))
	if c.AttnSoftCap > 0 {
		add("attn_logit_softcapping", c.AttnSoftCap)
	}
	if c.FinalSoftCap > 0 {
		add("final_logit_softcapping", c.FinalSoftCap)
	}
	if c.SlidingWindow > 0 {
		add("attention.sliding_window", uint32(c.SlidingWindow))
	}
	if fs := c.RopeFreqScale; fs > 0 && fs != 1 {
		add("rope.scaling.type", "linear")
		add("rope.scaling.factor", 1/fs)
	}
	if c.HasRopeFactors {
		add("rope.scaling.original_context_length", uint32(c.RopeOrigContext))
		if c.RopeAttnFactor > 0 && c.RopeAttnFactor != 1 {
			add("rope.scaling.attn_factor", c.RopeAttnFactor)
		}
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
