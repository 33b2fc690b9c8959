package glint

import (
	"errors"
	"fmt"
	"os"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/tokenizer"
)

// Speculative decoding's settings, llama.cpp's defaults.
const (
	DefaultDraftMax  = 16
	DefaultDraftPMin = 0.75
)

// SpecTypes are the draft sources Options.SpecType names: "draft" (the
// draft model, Options.DraftModel) and "ngram-simple" (llama.cpp's n-gram
// lookup over the context).
var SpecTypes = []string{"draft", "ngram-simple"}

// SpecOptions configure speculative decoding (llama.cpp's -md, --spec-type,
// --draft-max, --draft-min, --draft-p-min, --spec-ngram-size-n/-m). The
// zero value is off.
type SpecOptions struct {
	// DraftModel is a draft model's file, loaded on the target's backend
	// with its own KV cache; its vocabulary must be compatible
	// (tokenizer.Compatible).
	DraftModel string
	// Type is "" (a draft model when DraftModel is set, else off), "draft"
	// or "ngram-simple".
	Type string
	// DraftMax is the most tokens a step drafts (0: DefaultDraftMax);
	// DraftMin the fewest worth verifying.
	DraftMax, DraftMin int
	// DraftPMin: a draft model stops after a token it gives less than
	// this probability (0: DefaultDraftPMin; < 0: never).
	DraftPMin float32
	// NgramN and NgramM are ngram-simple's pattern and continuation
	// lengths (0: engine.NgramSizeN, engine.NgramSizeM).
	NgramN, NgramM int
	// NgramMin is the shortest pattern ngram-simple falls back to when the
	// last NgramN tokens recur nowhere (0: engine.NgramSizeMin).
	NgramMin int
	// Adaptive drafts each step the length, up to DraftMax, that the
	// acceptance and verification cost measured so far say pays best
	// (engine.Speculative.Adaptive).
	Adaptive bool
}

// kind resolves Type: "" when off.
func (o SpecOptions) kind() (string, error) {
	switch {
	case o.Type == "" && o.DraftModel != "", o.Type == "draft" && o.DraftModel != "":
		return "draft", nil
	case o.Type == "draft":
		return "", errors.New("speculative: --spec-type draft needs a draft model (-md)")
	case o.Type == "ngram-simple":
		if o.DraftModel != "" {
			return "", errors.New("speculative: a draft model (-md) with --spec-type ngram-simple: choose one")
		}
		return o.Type, nil
	case o.Type == "" || o.Type == "none":
		return "", nil
	}
	return "", fmt.Errorf("speculative: --spec-type %q: want one of %v", o.Type, SpecTypes)
}

// Check reports what is wrong with o before any model loads: a bad
// --spec-type, a draft model that is missing or not a file.
func (o SpecOptions) Check() error {
	if _, err := o.kind(); err != nil {
		return err
	}
	if o.DraftModel != "" {
		if _, err := os.Stat(o.DraftModel); err != nil {
			return fmt.Errorf("speculative: draft model: %w", err)
		}
	}
	return nil
}

// draftMax is DraftMax with its default.
func (o SpecOptions) draftMax() int {
	if o.DraftMax <= 0 {
		return DefaultDraftMax
	}
	return o.DraftMax
}

// openDraft loads the draft model o names beside target, opened with to.
func openDraft(target *Model, to Options) (*Model, error) {
	do := to
	do.Spec = SpecOptions{}
	do.Progress = nil
	d, err := Open(to.Spec.DraftModel, do)
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	switch {
	case target.Tokenizer == nil || d.Tokenizer == nil:
		err = errors.New("the target and the draft model need tokenizers to be checked compatible")
	default:
		err = tokenizer.Compatible(target.Tokenizer, d.Tokenizer)
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("draft model %s: %w", to.Spec.DraftModel, err)
	}
	return d, nil
}

// Speculation returns the speculative decoding the model was opened with,
// for one generation (engine.Options.Speculative; nil when none), and what
// releases it afterwards (the draft model's session).
func (m *Model) Speculation() (*engine.Speculative, func(), error) {
	o := m.spec
	k, err := o.kind()
	if err != nil || k == "" {
		return nil, func() {}, err
	}
	sp := &engine.Speculative{Max: o.draftMax(), Min: o.DraftMin, Adaptive: o.Adaptive}
	switch k {
	case "ngram-simple":
		n, mm := o.NgramN, o.NgramM
		if n <= 0 {
			n = engine.NgramSizeN
		}
		if mm <= 0 {
			mm = engine.NgramSizeM
		}
		lo := o.NgramMin
		if lo <= 0 {
			lo = min(engine.NgramSizeMin, n)
		}
		sp.Drafter = engine.NgramSimple{N: n, M: mm, Min: lo}
		return sp, func() {}, nil
	}
	if m.Draft == nil {
		return nil, func() {}, errors.New("speculative: the draft model is not loaded")
	}
	s, err := m.Draft.NewSession(engine.SessionOptions{})
	if err != nil {
		return nil, func() {}, fmt.Errorf("draft model: %w", err)
	}
	pMin := o.DraftPMin
	if pMin == 0 {
		pMin = DefaultDraftPMin
	}
	d := engine.NewModelDrafter(s, pMin)
	sp.Drafter = d
	return sp, func() { d.Close() }, nil
}
