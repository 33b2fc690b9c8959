package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/glint-llm/glint/sample"
)

// Options control one generation.
type Options struct {
	// MaxTokens is the most tokens generated (-n).
	MaxTokens int
	// Sampler picks tokens; a greedy sampler lets the model pick on its
	// device (Model.Argmax) unless logits are dumped.
	Sampler *sample.Sampler
	// Stop reports whether a generated token ends the generation (EOS/EOT);
	// the stop token is neither emitted nor counted.
	Stop func(id int32) bool
	// OnToken receives each generated token as soon as it is chosen; an
	// error wrapping ErrStop ends the generation normally (a stop string).
	OnToken func(id int32) error
	// DumpLogits, when set, receives each step's logits (little-endian
	// float32, one vocab-sized row per generated step).
	DumpLogits io.Writer
	// NoFinalFeed leaves the last generated token out of the cache, saving
	// one forward pass where nothing continues from it: benchmarks count N
	// tokens as N-1 decode steps, as llama-bench does. By default the cache
	// holds every chosen token, so a later call continues where this one ended.
	NoFinalFeed bool
}

// Timing is what one generation measured. TTFT runs from the prompt going in
// to the first token being chosen, so it includes prefill; Gaps are the
// times between consecutive tokens after the first (TBT), so the first
// token is never in them.
type Timing struct {
	PromptTokens int
	Generated    []int32
	TTFT         time.Duration
	Gaps         []time.Duration
	// ContextFull: generation ended because the next token had no room in
	// the context (there is no context shift yet).
	ContextFull bool
}

// AvgTBT is the mean of the gaps (0 with fewer than two tokens).
func (t Timing) AvgTBT() time.Duration {
	if len(t.Gaps) == 0 {
		return 0
	}
	var s time.Duration
	for _, g := range t.Gaps {
		s += g
	}
	return s / time.Duration(len(t.Gaps))
}

// Generate feeds prompt to m, then generates up to o.MaxTokens tokens.
func Generate(m Model, prompt []int32, o Options) (Timing, error) {
	tm := Timing{PromptTokens: len(prompt)}
	if len(prompt) == 0 {
		return tm, fmt.Errorf("generate: empty prompt")
	}
	if m.Pos()+len(prompt) > m.Context() {
		return tm, fmt.Errorf("generate: prompt of %d tokens does not fit the context of %d (-c)", len(prompt), m.Context())
	}
	useDevice := o.Sampler == nil || (o.Sampler.Greedy() && o.DumpLogits == nil)
	var logits []float32
	var row []byte
	if !useDevice {
		logits = make([]float32, m.Vocab())
	}
	if o.DumpLogits != nil {
		row = make([]byte, 4*m.Vocab())
	}
	history := make([]int32, 0, len(prompt)+o.MaxTokens)
	history = append(history, prompt...)

	start := time.Now()
	last := start
	batch := prompt
	for len(tm.Generated) < o.MaxTokens {
		if m.Pos()+len(batch) > m.Context() {
			tm.ContextFull = true
			break // the context is full: stop as llama.cpp does without shifting
		}
		if err := m.Eval(batch); err != nil {
			return tm, err
		}
		var id int32
		if useDevice {
			var err error
			if id, err = m.Argmax(); err != nil {
				return tm, err
			}
		} else {
			if err := m.Logits(logits); err != nil {
				return tm, err
			}
			if o.DumpLogits != nil {
				for i, v := range logits {
					binary.LittleEndian.PutUint32(row[4*i:], math.Float32bits(v))
				}
				if _, err := o.DumpLogits.Write(row); err != nil {
					return tm, fmt.Errorf("generate: dump logits: %w", err)
				}
			}
			id = o.Sampler.Sample(logits, history)
		}
		if o.Stop != nil && o.Stop(id) {
			break
		}
		now := time.Now()
		if len(tm.Generated) == 0 {
			tm.TTFT = now.Sub(start)
		} else {
			tm.Gaps = append(tm.Gaps, now.Sub(last))
		}
		last = now
		tm.Generated = append(tm.Generated, id)
		history = append(history, id)
		batch = history[len(history)-1:]
		if o.OnToken != nil {
			if err := o.OnToken(id); err != nil {
				if errors.Is(err, ErrStop) {
					break
				}
				return tm, err
			}
		}
	}
	// Only a loop that ran out of MaxTokens leaves its last token unfed: a
	// stop token is not part of the text, and a full context has no room.
	if !o.NoFinalFeed && len(tm.Generated) == o.MaxTokens && o.MaxTokens > 0 && m.Pos()+1 <= m.Context() {
		if err := m.Eval(batch); err != nil {
			return tm, err
		}
	}
	return tm, nil
}
