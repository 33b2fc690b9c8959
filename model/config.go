package model

import (
	"errors"
	"fmt"
	"slices"
)

// Validate checks that the hyper-parameters describe a Llama model the
// layers can run: every size positive, the query heads a multiple of the KV
// heads, and the rotated dimensions an even number within a head.
func (c Config) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s = %d must be positive", name, v))
		}
	}
	positive("layers", c.NLayer)
	positive("embedding length", c.NEmbd)
	positive("heads", c.NHead)
	positive("KV heads", c.NHeadKV)
	positive("head dim", c.HeadDim)
	positive("feed-forward length", c.NFF)
	positive("vocab", c.Vocab)
	positive("context", c.Context)
	if c.NHead > 0 && c.NHeadKV > 0 && c.NHead%c.NHeadKV != 0 {
		errs = append(errs, fmt.Errorf("%d heads are not a multiple of %d KV heads", c.NHead, c.NHeadKV))
	}
	if c.RopeDims <= 0 || c.RopeDims%2 != 0 || c.RopeDims > c.HeadDim {
		errs = append(errs, fmt.Errorf("rope dims %d must be even and within the head dim %d", c.RopeDims, c.HeadDim))
	}
	if !(c.RMSEps > 0) {
		errs = append(errs, fmt.Errorf("RMS norm epsilon %g must be positive", c.RMSEps))
	}
	if !(c.RopeTheta > 0) {
		errs = append(errs, fmt.Errorf("rope theta %g must be positive", c.RopeTheta))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model config: %w", err)
	}
	return nil
}

// TensorShapes lists the GGUF name and row-major shape of every tensor a
// Llama model with this config has. It is the one description of the
// architecture's weights: loaders check files against it and package synth
// generates from it.
func (c Config) TensorShapes() []TensorShape {
	q := c.NHead * c.HeadDim
	kv := c.NHeadKV * c.HeadDim
	ts := []TensorShape{{"token_embd.weight", []int{c.Vocab, c.NEmbd}}}
	if c.HasRopeFreqs {
		ts = append(ts, TensorShape{"rope_freqs.weight", []int{c.RopeDims / 2}})
	}
	for i := 0; i < c.NLayer; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			TensorShape{b + "attn_norm.weight", []int{c.NEmbd}},
			TensorShape{b + "attn_q.weight", []int{q, c.NEmbd}},
			TensorShape{b + "attn_k.weight", []int{kv, c.NEmbd}},
			TensorShape{b + "attn_v.weight", []int{kv, c.NEmbd}},
			TensorShape{b + "attn_output.weight", []int{c.NEmbd, q}},
			TensorShape{b + "ffn_norm.weight", []int{c.NEmbd}},
			TensorShape{b + "ffn_gate.weight", []int{c.NFF, c.NEmbd}},
			TensorShape{b + "ffn_up.weight", []int{c.NFF, c.NEmbd}},
			TensorShape{b + "ffn_down.weight", []int{c.NEmbd, c.NFF}},
		)
	}
	ts = append(ts, TensorShape{"output_norm.weight", []int{c.NEmbd}})
	if !c.TiedEmbeddings {
		ts = append(ts, TensorShape{"output.weight", []int{c.Vocab, c.NEmbd}})
	}
	return ts
}

// TensorShape is a tensor's GGUF name and row-major shape.
type TensorShape struct {
	Name  string
	Shape []int
}

// CheckSource verifies that src holds every tensor of the config with the
// expected shape, so that a mismatched file fails when it is opened rather
// than deep inside a forward pass.
func (c Config) CheckSource(src Source) error {
	for _, ts := range c.TensorShapes() {
		if !src.Has(ts.Name) {
			return fmt.Errorf("model: tensor %q is missing", ts.Name)
		}
		td, err := src.Tensor(ts.Name)
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		if !slices.Equal(td.Shape, ts.Shape) {
			return fmt.Errorf("model: tensor %q has shape %v, want %v for this config", ts.Name, td.Shape, ts.Shape)
		}
	}
	return nil
}
