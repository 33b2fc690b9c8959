package report

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/numerics"
	"github.com/glint-llm/glint/onnx"
)

// Job is one backend's measurement: what a Runner is given (as JSON when it
// crosses into a child process).
type Job struct {
	Backend    string            `json:"backend"`
	Model      string            `json:"model"`
	Prompt     string            `json:"prompt,omitempty"`
	PromptIDs  []int32           `json:"prompt_ids,omitempty"`
	N          int               `json:"n"`
	Runs       int               `json:"runs"`
	Threads    int               `json:"threads,omitempty"`
	Device     string            `json:"device,omitempty"`
	Tune       string            `json:"tune,omitempty"`
	Numerics   numerics.Options  `json:"numerics,omitzero"`
	Context    int               `json:"context,omitempty"`
	CacheTypeK string            `json:"cache_type_k,omitempty"`
	CacheTypeV string            `json:"cache_type_v,omitempty"`
	FlashAttn  string            `json:"flash_attn,omitempty"`
	OrtLib     string            `json:"ort_lib,omitempty"`
	Profile    bool              `json:"profile,omitempty"`
	Spec       glint.SpecOptions `json:"spec,omitzero"`
}

func (j Job) check() error {
	switch {
	case j.Backend == "":
		return errors.New("no backend")
	case j.Model == "":
		return errors.New("no model")
	case j.N < 2:
		return fmt.Errorf("n = %d: at least 2 tokens are needed for one time between tokens", j.N)
	case j.Runs < 1:
		return fmt.Errorf("runs = %d: need at least 1", j.Runs)
	case j.Prompt == "" && len(j.PromptIDs) == 0:
		return errors.New("empty prompt")
	}
	return nil
}

// launchCounter is what the OpenCL backend offers for counting launches.
type launchCounter interface{ Stats() opencl.Stats }

// Measure loads j.Model on j.Backend in this process, makes one warm-up run
// and j.Runs timed runs of greedy generation (EOS ignored), and returns the
// raw timings. It never returns an error: a backend that cannot run here
// comes back StatusSkipped and one that fails StatusFailed, with the reason.
// PeakRSSBytes is this whole process's peak, which is the backend's own
// only in a process of its own (Exec).
func Measure(j Job) (res Backend) {
	res = Backend{Backend: j.Backend, Model: ModelInfo{Path: j.Model}, NPredict: j.N, Runs: j.Runs}
	fail := func(status string, err error) Backend {
		res.Status, res.Reason = status, err.Error()
		res.PeakRSSBytes = peakRSS()
		return res
	}
	defer func() {
		// A backend bug must cost its row of the report, not the report.
		if p := recover(); p != nil {
			res = fail(StatusFailed, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}
	}()
	if err := j.check(); err != nil {
		return fail(StatusFailed, fmt.Errorf("report: %s: %w", j.Backend, err))
	}

	var made bool
	var prof *backend.ProfiledBackend
	opts := glint.Options{
		Backend: j.Backend, Threads: j.Threads, Device: j.Device, Tune: j.Tune, Context: j.Context, OrtLib: j.OrtLib,
		CacheTypeK: j.CacheTypeK, CacheTypeV: j.CacheTypeV, FlashAttn: j.FlashAttn, Numerics: j.Numerics, Spec: j.Spec,
		Wrap: func(b backend.Backend) backend.Backend {
			made = true
			if !j.Profile {
				return b
			}
			prof = backend.Profiled(b)
			prof.SetEnabled(false)
			return prof
		},
	}
	m, err := glint.Open(j.Model, opts)
	if err != nil {
		// Wrap runs right after the backend is made, so an error before it
		// is the backend being unavailable here, not the model.
		if (j.Backend != "onnx" && !made) || errors.Is(err, onnx.ErrLibrary) {
			return fail(StatusSkipped, err)
		}
		return fail(StatusFailed, fmt.Errorf("load %s: %w", j.Model, err))
	}
	defer m.Close()
	res.LoadUs = m.LoadTime.Microseconds()
	res.Device = deviceName(m)
	res.KVCacheBytes = m.KVCacheBytes

	prompt := j.PromptIDs
	if len(prompt) == 0 {
		if m.Tokenizer == nil {
			return fail(StatusFailed, fmt.Errorf("%s has no tokenizer (%v): give the prompt as token ids", j.Model, m.TokenizerErr))
		}
		prompt = m.Tokenizer.Encode(j.Prompt, true)
	}
	res.PromptTokens = len(prompt)
	if len(prompt)+j.N > m.Context() {
		return fail(StatusFailed, fmt.Errorf("prompt of %d tokens + %d generated do not fit the context of %d (-c)", len(prompt), j.N, m.Context()))
	}

	var counter launchCounter
	if b := m.Backend; b != nil {
		if p, ok := b.(*backend.ProfiledBackend); ok {
			b = p.Unwrap()
		}
		counter, _ = b.(launchCounter)
	}

	// run generates N tokens; first (if set) is called when the first token
	// has been chosen, which is where decode starts.
	// Each run is a new session; N tokens are N-1 decode steps (the last
	// token chosen is never fed), which the per-token counts divide by.
	run := func(first func()) (engine.Timing, error) {
		seen := false
		spec, done, err := m.Speculation()
		if err != nil {
			return engine.Timing{}, err
		}
		defer done()
		return engine.Generate(context.Background(), m.Engine, prompt, engine.Options{
			MaxTokens:   j.N,
			Speculative: spec,
			// No EOG: an end token does not end a run early, so every run has N
			// tokens.
			OnToken: func(engine.Token) error {
				if !seen && first != nil {
					first()
				}
				seen = true
				return nil
			},
		})
	}
	check := func(tm engine.Timing, err error, what string) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if len(tm.Generated) != j.N {
			return fmt.Errorf("%s: generated %d tokens, want %d", what, len(tm.Generated), j.N)
		}
		return nil
	}

	tm, err := run(nil)
	if err := check(tm, err, "warm-up run"); err != nil {
		return fail(StatusFailed, err)
	}
	var moved int64
	for r := 0; r < j.Runs; r++ {
		var before opencl.Stats
		tm, err := run(func() {
			if counter != nil {
				before = counter.Stats()
			}
		})
		if err := check(tm, err, fmt.Sprintf("run %d", r+1)); err != nil {
			return fail(StatusFailed, err)
		}
		if counter != nil {
			after := counter.Stats()
			res.LaunchesPerRun = append(res.LaunchesPerRun, after.Launches-before.Launches)
			moved += after.Moved - before.Moved
		}
		if r == 0 {
			res.Generated = tm.Generated
			if specSettings(j.Spec) != nil {
				res.Speculative = &Speculative{Off: tm.SpecOff}
			}
		}
		if s := res.Speculative; s != nil {
			s.Passes += tm.Passes
			s.Drafted += tm.Drafted
			s.Accepted += tm.Accepted
		}
		res.TTFTUs = append(res.TTFTUs, tm.TTFT.Microseconds())
		gaps := make([]int64, len(tm.Gaps))
		for i, g := range tm.Gaps {
			gaps[i] = g.Microseconds()
		}
		res.GapsUs = append(res.GapsUs, gaps)
	}
	if len(res.LaunchesPerRun) > 0 {
		var sum int64
		for _, l := range res.LaunchesPerRun {
			sum += l
		}
		v := float64(sum) / float64(len(res.LaunchesPerRun)*(j.N-1))
		res.LaunchesPerToken = &v
		m := float64(moved) / float64(len(res.LaunchesPerRun)*(j.N-1))
		res.DeviceBytesPerToken = &m
	}

	if s := res.Speculative; s != nil && s.Passes > 0 {
		s.TokensPerPass = float64(j.Runs*j.N) / float64(s.Passes)
	}

	if prof != nil {
		// As many profiled runs as timed ones. Each starts from a zeroed
		// wrapper; at its first token the prompt's totals are taken and the
		// wrapper zeroed again, so that the decode's are apart.
		total, calls := map[string]time.Duration{}, map[string]int64{}
		prompt := map[string]time.Duration{}
		for r := 0; r < j.Runs; r++ {
			prof.Reset()
			prof.SetEnabled(true)
			tm, err := run(func() {
				for k, d := range prof.Profile() {
					prompt[k] += d
				}
				prof.Reset()
			})
			prof.SetEnabled(false)
			if err := check(tm, err, fmt.Sprintf("profiled run %d", r+1)); err != nil {
				return fail(StatusFailed, err)
			}
			for k, d := range prof.Profile() {
				total[k] += d
			}
			for k, c := range prof.Calls() {
				calls[k] += c
			}
		}
		res.Profile = perToken(total, calls, j.Runs*(j.N-1))
		res.Profile.PromptUs = map[string]float64{}
		for k, d := range prompt {
			res.Profile.PromptUs[k] = float64(d.Nanoseconds()) / 1e3 / float64(j.Runs)
		}
	}
	res.Status = StatusOK
	res.PeakRSSBytes = peakRSS()
	return res
}

func perToken(total map[string]time.Duration, calls map[string]int64, tokens int) *Profile {
	p := &Profile{Tokens: tokens, PerTokenUs: map[string]float64{}, CallsPerToken: map[string]float64{}}
	for k, d := range total {
		p.PerTokenUs[k] = float64(d.Nanoseconds()) / 1e3 / float64(tokens)
	}
	for k, c := range calls {
		p.CallsPerToken[k] = float64(c) / float64(tokens)
	}
	return p
}

func deviceName(m *glint.Model) string { return m.Device }

// hostname is the machine's name, or "" when it cannot be read.
func hostname() string {
	h, _ := os.Hostname()
	return h
}
