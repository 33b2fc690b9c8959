package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// MaxContext bounds a model's trained context length. No released model is
// trained on more than 10M positions (Llama 4 Scout); a file claiming more
// is damaged or hostile, and with -c 0 the claim would size the KV cache.
const MaxContext = 1 << 24

// Validate checks that the hyper-parameters describe a model the layers can
// run: a supported architecture, every size positive, the query heads a
// multiple of the KV heads, and the rotated dimensions an even number within
// a head.
func (c Config) Validate() error {
	var errs []error
	if err := CheckArch(c.Arch); err != nil {
		errs = append(errs, err)
	}
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
	if c.Context > MaxContext {
		errs = append(errs, fmt.Errorf("context %d is more than glint supports (%d)", c.Context, MaxContext))
	}
	if c.NHead > 0 && c.NHeadKV > 0 && c.NHead%c.NHeadKV != 0 {
		errs = append(errs, fmt.Errorf("%d heads are not a multiple of %d KV heads", c.NHead, c.NHeadKV))
	}
	if !c.NoRoPE && (c.RopeDims <= 0 || c.RopeDims%2 != 0 || c.RopeDims > c.HeadDim) {
		errs = append(errs, fmt.Errorf("rope dims %d must be even and within the head dim %d", c.RopeDims, c.HeadDim))
	}
	if !(c.RMSEps > 0) {
		errs = append(errs, fmt.Errorf("norm epsilon %g must be positive", c.RMSEps))
	}
	if !c.NoRoPE && !(c.RopeTheta > 0) {
		errs = append(errs, fmt.Errorf("rope theta %g must be positive", c.RopeTheta))
	}
	if c.SlidingWindow < 0 || c.SWAPattern < 0 {
		errs = append(errs, fmt.Errorf("sliding window %d and pattern %d must not be negative", c.SlidingWindow, c.SWAPattern))
	}
	for _, f := range []struct {
		name string
		v    float32
	}{{"embedding scale", c.EmbedScale}, {"query scale", c.QueryScale}, {"attention soft cap", c.AttnSoftCap},
		{"final soft cap", c.FinalSoftCap}, {"sliding-window rope theta", c.RopeThetaSWA},
		{"rope frequency scale", c.RopeFreqScale}, {"rope attention factor", c.RopeAttnFactor}} {
		if f.v < 0 || math.IsNaN(float64(f.v)) || math.IsInf(float64(f.v), 0) {
			errs = append(errs, fmt.Errorf("%s %g must be a finite number ≥ 0", f.name, f.v))
		}
	}
	if c.HasRopeFactors && c.RopeOrigContext <= 0 {
		errs = append(errs, fmt.Errorf("LongRoPE factors need the original context (got %d)", c.RopeOrigContext))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model config: %w", err)
	}
	return nil
}

// TensorShapes lists the GGUF name and row-major shape of every tensor a
// model with this config has, named and shaped as llama.cpp's converter
// writes them (Phi-3's and GPT-2's fused matrices included). It is the one
// description of the files' weights: loaders check files against it and
// package synth generates from it.
func (c Config) TensorShapes() []TensorShape {
	var ts []TensorShape
	c.eachTensor(func(t TensorShape) bool { ts = append(ts, t); return true })
	return ts
}

// TensorCount is len(c.TensorShapes()), counted without listing them: a
// hostile file may claim millions of layers, and the count is what such a
// claim is checked against before anything is made per layer.
func (c Config) TensorCount() int {
	count := func(c Config) (n int) {
		c.eachTensor(func(TensorShape) bool { n++; return true })
		return n
	}
	layers := max(c.NLayer, 0)
	c.NLayer = 0
	fixed := count(c)
	c.NLayer = 1
	return fixed + layers*(count(c)-fixed)
}

// eachTensor calls yield with each tensor of TensorShapes in its order
// until yield returns false, so that a check stops at the first mismatch
// without first listing every layer a file claims.
func (c Config) eachTensor(yield func(TensorShape) bool) {
	e, q, kv, ff := c.NEmbd, c.NHead*c.HeadDim, c.NHeadKV*c.HeadDim, c.NFF
	stopped := false
	add := func(name string, shape ...int) {
		stopped = stopped || !yield(TensorShape{name, shape})
	}
	add("token_embd.weight", c.Vocab, e)
	if c.NoRoPE {
		add("position_embd.weight", c.Context, e)
	}
	if c.HasRopeFreqs {
		add("rope_freqs.weight", c.RopeDims/2)
	}
	if c.HasRopeFactors {
		add("rope_factors_long.weight", c.RopeDims/2)
		add("rope_factors_short.weight", c.RopeDims/2)
	}
	// norm adds a norm's weight and, for LayerNorm, its bias.
	norm := func(name string) {
		add(name+".weight", e)
		if c.LayerNorm {
			add(name+".bias", e)
		}
	}
	for i := 0; i < c.NLayer && !stopped; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		norm(b + "attn_norm")
		if c.FusedQKV {
			add(b+"attn_qkv.weight", q+2*kv, e)
			if c.AttnBias {
				add(b+"attn_qkv.bias", q+2*kv)
			}
		} else {
			for _, p := range []struct {
				name string
				rows int
			}{{"attn_q", q}, {"attn_k", kv}, {"attn_v", kv}} {
				add(b+p.name+".weight", p.rows, e)
				if c.AttnBias {
					add(b+p.name+".bias", p.rows)
				}
			}
		}
		if c.QKNorm {
			add(b+"attn_q_norm.weight", c.HeadDim)
			add(b+"attn_k_norm.weight", c.HeadDim)
		}
		add(b+"attn_output.weight", e, q)
		if c.OutBias {
			add(b+"attn_output.bias", e)
		}
		if c.PostNorms {
			add(b+"post_attention_norm.weight", e)
		}
		norm(b + "ffn_norm")
		switch {
		case c.NoGate:
			add(b+"ffn_up.weight", ff, e)
			if c.OutBias {
				add(b+"ffn_up.bias", ff)
			}
		case c.FusedGateUp:
			add(b+"ffn_up.weight", 2*ff, e)
		default:
			add(b+"ffn_gate.weight", ff, e)
			add(b+"ffn_up.weight", ff, e)
		}
		add(b+"ffn_down.weight", e, ff)
		if c.OutBias {
			add(b+"ffn_down.bias", e)
		}
		if c.PostNorms {
			add(b+"post_ffw_norm.weight", e)
		}
	}
	norm("output_norm")
	if !c.TiedEmbeddings {
		add("output.weight", c.Vocab, e)
	}
}

// TensorShape is a tensor's GGUF name and row-major shape.
type TensorShape struct {
	Name  string
	Shape []int
}

// CheckSource verifies that src holds every tensor of the config with the
// expected shape, so that a mismatched file fails when it is opened rather
// than deep inside a forward pass. It stops at the first mismatch: a file
// claiming a million layers fails at the first layer it lacks.
func (c Config) CheckSource(src Source) error {
	var err error
	c.eachTensor(func(ts TensorShape) bool {
		if !src.Has(ts.Name) {
			err = fmt.Errorf("model: tensor %q is missing", ts.Name)
			return false
		}
		td, terr := src.Tensor(ts.Name)
		if terr != nil {
			err = fmt.Errorf("model: %w", terr)
			return false
		}
		if !slices.Equal(td.Shape, ts.Shape) {
			err = fmt.Errorf("model: tensor %q has shape %v, want %v for this config", ts.Name, td.Shape, ts.Shape)
			return false
		}
		return true
	})
	return err
}
