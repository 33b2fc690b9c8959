package serve

import (
	"context"
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
	// Parallel is the number of slots (requests decoded at once; 0 means
	// 1): the model is loaded once with a KV cache of Parallel sequences,
	// and the context (Options.Context, -c) is divided among them, each
	// slot holding Context/Parallel tokens, as llama-server divides it.
	Parallel int
	// Queue is the most requests waiting for a slot; more get 503.
	Queue int
	// ContextShift: a slot whose context fills shifts it and goes on, as
	// llama-server's default (SchedulerOptions.ContextShift).
	ContextShift bool
	// Keep is a request's n_keep when it gives none (llama-server's --keep):
	// the prompt tokens after the BOS a context shift keeps; -1: all.
	Keep int
	// Template chooses the chat template (default: the model's own).
	Template chattemplate.Choice
	// TemplateKwargs are extra chat template variables.
	TemplateKwargs map[string]any
	// Reasoning is what a chat reply's think block becomes ("": deepseek,
	// llama-server's default).
	Reasoning ReasoningFormat
	// SpecialInContent: control-token text written in chat messages becomes
	// control tokens (by default it is tokenized as text, as OpenAI's API does,
	// so that a message cannot forge a turn).
	SpecialInContent bool
	// Defaults are the sampling settings of a request that gives none
	// (nil: sample.Defaults, llama-server's). Their Seed is not used.
	Defaults *sample.Params
	// Seed is the seed of a request that gives none (nil: a random one).
	Seed *uint64
	// Name is the model id /v1/models shows (default: the file's base name).
	Name string
	// DisableEmbeddings turns /v1/embeddings and /embeddings off (501); they
	// are on by default, beside generation (llama-server serves one or the
	// other, embeddings only with --embeddings).
	DisableEmbeddings bool
	// Pooling is how embeddings pool a prompt's hidden states: none, mean,
	// cls or last (llama-server's --pooling); "": the file's
	// {arch}.pooling_type, else mean.
	Pooling string
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
	// Reasoning: see LoadOptions.
	Reasoning ReasoningFormat
	// SpecialInContent: see LoadOptions.
	SpecialInContent bool
	// EndOfTurn are the ids that end a chat reply beyond the tokenizer's
	// end-of-generation set.
	EndOfTurn []int32
	Defaults  sample.Params
	Seed      *uint64 // nil: a random seed per request
	Keep      int     // a request's n_keep when it gives none
	Sched     *Scheduler
	// Embeddings: the embeddings routes answer; Pooling is theirs, and
	// Embd the width of a vector.
	Embeddings bool
	Pooling    engine.Pooling
	Embd       int
	// Info describes the loaded model in one line.
	Info  string
	model *glint.Model
}

// Close drains the scheduler (every queued and running request finishes)
// and releases the model.
func (m *Model) Close() error {
	if m.Sched != nil {
		m.Sched.Close()
	}
	if m.model == nil {
		return nil
	}
	err := m.model.Close()
	m.model = nil
	return err
}

// Load opens path once, with a KV cache of o.Parallel sequences (one slot
// each), its tokenizer and chat template.
func Load(path string, o LoadOptions) (*Model, error) {
	if o.Backend == "onnx" {
		return nil, errors.New("serve: -b onnx is not supported (cpu or opencl)")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err // before the template's reading of it says the same less clearly
	}
	m := &Model{Name: o.Name, Kwargs: o.TemplateKwargs, SpecialInContent: o.SpecialInContent, Defaults: sample.Defaults(), Seed: o.Seed, Keep: o.Keep,
		Embeddings: !o.DisableEmbeddings, Pooling: engine.PoolingMean}
	var err error
	if m.Reasoning, err = ParseReasoningFormat(string(o.Reasoning)); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if o.Pooling != "" {
		p, err := engine.ParsePooling(o.Pooling)
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		m.Pooling = p
	}
	if m.Name == "" {
		m.Name = filepath.Base(path)
	}
	if o.Defaults != nil {
		m.Defaults = *o.Defaults
	}
	if m.Chat, err = chattemplate.FromModel(path); err != nil {
		return nil, err
	}
	m.Template, m.TemplateErr = chattemplate.Resolve(o.Template, m.Chat)
	if m.TemplateErr != nil && (o.Template.File != "" || o.Template.Builtin != "") {
		return nil, m.TemplateErr // asked for and broken: say so now
	}
	if m.Template != nil {
		// A template that fails a plain conversation is reported now; the
		// server still serves (completions work; chat requests get 500).
		if err := m.Template.Check(context.Background(), m.Chat.BOS, m.Chat.EOS, o.TemplateKwargs); err != nil {
			fmt.Fprintf(os.Stderr, "warning: chat template %s fails a plain conversation: %v\n", m.Template.Origin, err)
		}
	}
	// Each slot its own share of the cells, as llama-server's n_ctx_slot:
	// a per-stream cache, where a slot's rows also compute what they
	// compute alone.
	gopts := o.Options
	gopts.Seqs, gopts.KVLayout = max(o.Parallel, 1), "per-stream"
	if m.model, err = glint.Open(path, gopts); err != nil {
		return nil, err
	}
	if m.model.Tokenizer == nil {
		m.Close()
		return nil, fmt.Errorf("%s has no tokenizer (%v), which the server needs", path, m.model.TokenizerErr)
	}
	m.Tokenizer, m.Info = m.model.Tokenizer, m.model.Info
	m.Embd = m.model.Config.NEmbd
	if o.Pooling == "" && m.model.Pooling != engine.PoolingUnspecified {
		m.Pooling = m.model.Pooling
		if m.Pooling == engine.PoolingRank {
			m.Pooling = engine.PoolingMean // a classifier's head, which glint does not run
		}
	}
	m.Sched, err = NewScheduler(m.model.Engine, m.Tokenizer, SchedulerOptions{Queue: o.Queue,
		ContextShift: o.ContextShift, Trained: m.model.Config.Context, IsEOG: m.model.IsEOG, Speculation: m.model.Speculation})
	if err != nil {
		m.Close()
		return nil, err
	}
	m.EndOfTurn = chattemplate.EndOfTurn(m.Tokenizer, m.Chat)
	return m, nil
}
