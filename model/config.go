package model

import (
	"errors"
	"fmt"
	"math"
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
