package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/sample"
	"github.com/glint-llm/glint/tokenizer"
)

// LoadOptions say how Load opens a model for serving.
type LoadOptions struct {
	glint.Options
	// Parallel is the number of slots (requests decoded at once); today's
	// engine holds one sequence per loaded model, so the model is loaded
	// Parallel times. 0 means 1.
	Parallel int
	// Queue is the most requests waiting for a slot; more get 503.
	Queue int
	// Template chooses the chat template (default: the model's own).
	Template chattemplate.Choice
	// TemplateKwargs are extra chat template variables.
	TemplateKwargs map[string]any
	// Defaults are the sampling settings of a request that gives none
	// (nil: sample.Defaults, llama-server's). Their Seed is not used.
	Defaults *sample.Params
	// Seed is the seed of a request that gives none (nil: a random one).
	Seed *uint64
	// Name is the model id /v1/models shows (default: the file's base name).
	Name string
}

// Model is a loaded model ready to serve: its tokenizer, chat template and
// scheduler.
type Model struct {
	Name      string
	Tokenizer *tokenizer.Tokenizer
	// Template renders chat requests; nil when the model has none and
	// none was chosen (TemplateErr says why): chat requests then get 400.
	Template    *chattemplate.Template
	TemplateErr error
	// Chat holds the model's BOS/EOS text for the template.
	Chat   chattemplate.ModelTemplate
	Kwargs map[string]any
	// EndOfTurn are the ids that end a chat reply beyond the tokenizer's
	// end-of-generation set.
	EndOfTurn []int32
	Defaults  sample.Params
	Seed      *uint64 // nil: a random seed per request
	Sched     *Scheduler
	// Info describes the loaded model in one line.
	Info    string
	closers []func() error
}

// Close drains the scheduler (every queued and running request finishes)
// and releases the models.
func (m *Model) Close() error {
	if m.Sched != nil {
		m.Sched.Close()
	}
	var errs []error
	for _, c := range m.closers {
		errs = append(errs, c())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// Load opens path o.Parallel times (one slot each) with its tokenizer and
// chat template.
func Load(path string, o LoadOptions) (*Model, error) {
	if o.Backend == "onnx" {
		return nil, errors.New("serve: -b onnx is not supported (cpu or opencl)")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err // before the template's reading of it says the same less clearly
	}
	n := max(o.Parallel, 1)
	m := &Model{Name: o.Name, Kwargs: o.TemplateKwargs, Defaults: sample.Defaults(), Seed: o.Seed}
	if m.Name == "" {
		m.Name = filepath.Base(path)
	}
	if o.Defaults != nil {
		m.Defaults = *o.Defaults
	}
	var err error
	if m.Chat, err = chattemplate.FromModel(path); err != nil {
		return nil, err
	}
	m.Template, m.TemplateErr = chattemplate.Resolve(o.Template, m.Chat)
	if m.TemplateErr != nil && (o.Template.File != "" || o.Template.Builtin != "") {
		return nil, m.TemplateErr // asked for and broken: say so now
	}
	sessions := make([]*engine.Session, n)
	var isEOG func(int32) bool
	var vocab, ctx int
	for i := range sessions {
		gm, err := glint.Open(path, o.Options)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.closers = append(m.closers, gm.Close)
		if gm.Tokenizer == nil {
			m.Close()
			return nil, fmt.Errorf("%s has no tokenizer (%v), which the server needs", path, gm.TokenizerErr)
		}
		if i == 0 {
			m.Tokenizer, m.Info, isEOG, vocab, ctx = gm.Tokenizer, gm.Info, gm.IsEOG, gm.Vocab(), gm.Context()
		}
		// The scheduler keeps each slot within its context itself.
		if sessions[i], err = gm.NewSession(engine.SessionOptions{}); err != nil {
			m.Close()
			return nil, err
		}
	}
	slots, err := newModelSlots(sessions, vocab, ctx)
	if err != nil {
		m.Close()
		return nil, err
	}
	m.Sched = NewScheduler(slots, m.Tokenizer, isEOG, o.Queue)
	m.EndOfTurn = chattemplate.EndOfTurn(m.Tokenizer, m.Chat)
	return m, nil
}
