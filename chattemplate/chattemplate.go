// Package chattemplate renders a model's chat template — the Jinja program
// that turns a conversation into the text an instruct model was trained on —
// the way Hugging Face's apply_chat_template does (trim_blocks, lstrip_blocks,
// raise_exception, strftime_now, tojson keeping non-ASCII), with
// internal/jinja (a copy of github.com/ardanlabs/jinja under limits: a
// template comes from a model file and is untrusted code). It finds the template in a GGUF file, a Hugging
// Face folder or a file, and has built-ins for files that carry none.
package chattemplate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/glint-llm/glint/internal/jinja"
)

// Template is a compiled chat template, safe for concurrent rendering.
type Template struct {
	// Source is the Jinja text; Origin says where it came from (for errors).
	Source, Origin string
	// Limits bound each render; the zero value means the defaults.
	Limits Limits
	t      *jinja.Template
}

// Parse compiles src; origin names it in errors.
func Parse(src, origin string) (*Template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template %s: %w", origin, err)
	}
	return &Template{Source: src, Origin: origin, t: t}, nil
}

// Message is one turn of a conversation in the OpenAI shape the templates
// expect.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Input is what apply_chat_template hands a template.
type Input struct {
	// Messages are the conversation: []Message, or raw JSON (a list of
	// objects, OpenAI style) whose fields and key order reach the template
	// unchanged — tool calls, content lists and the like.
	Messages any
	// AddGenerationPrompt opens the assistant's turn at the end.
	AddGenerationPrompt bool
	// BOS and EOS are the text of the model's special tokens.
	BOS, EOS string
	// Kwargs are extra template variables (chat_template_kwargs, such as
	// date_string or enable_thinking); as in transformers they may override
	// bos_token and eos_token.
	Kwargs map[string]any
}

// RaiseError is the error of a template that called raise_exception: the
// template says the conversation is invalid (the client's fault); Msg is
// the template's own message.
type RaiseError struct {
	Origin, Msg string
}

func (e *RaiseError) Error() string { return e.Msg }

// TemplateError is a template's own failure: a limit exceeded, an
// evaluation error, a panic in the interpreter (the model's fault).
type TemplateError struct {
	Origin string
	Err    error
}

func (e *TemplateError) Error() string { return "chat template " + e.Origin + ": " + e.Err.Error() }

func (e *TemplateError) Unwrap() error { return e.Err }

// Limits bound one render (see jinja.Limits); a zero field takes its
// default, jinja.DefaultLimits.
type Limits = jinja.Limits

// Render renders the conversation under t.Limits. A template that raises
// returns a *RaiseError whose message is the template's own; one that fails
// otherwise, a *TemplateError; a render stopped by ctx, ctx's error
// (wrapped).
func (t *Template) Render(ctx context.Context, in Input) (string, error) {
	msgs, err := messagesValue(in.Messages)
	if err != nil {
		return "", err
	}
	return t.render(ctx, in, msgs)
}

// render renders in with msgs, in.Messages as the template sees them.
func (t *Template) render(ctx context.Context, in Input, msgs jinja.Value) (string, error) {
	data := map[string]jinja.Value{
		"messages":              msgs,
		"add_generation_prompt": jinja.NewBool(in.AddGenerationPrompt),
		"bos_token":             jinja.NewString(in.BOS),
		"eos_token":             jinja.NewString(in.EOS),
	}
	for k, v := range in.Kwargs {
		if k == "messages" || k == "add_generation_prompt" {
			return "", fmt.Errorf("chat template kwargs: %q is set by the renderer, not a kwarg", k)
		}
		val, err := goValue(v)
		if err != nil {
			return "", fmt.Errorf("chat template kwargs: %q: %w", k, err)
		}
		data[k] = val
	}
	out, err := t.t.RenderLimited(ctx, t.Limits, data)
	if err != nil {
		var re *jinja.RaiseError
		switch {
		case errors.As(err, &re):
			return "", &RaiseError{Origin: t.Origin, Msg: re.Msg}
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return "", fmt.Errorf("chat template %s: %w", t.Origin, err)
		}
		return "", &TemplateError{Origin: t.Origin, Err: err}
	}
	return out, nil
}

// messagesValue turns the messages into the list the template iterates.
func messagesValue(m any) (jinja.Value, error) {
	switch v := m.(type) {
	case nil:
		return jinja.NewList(nil), nil
	case []Message:
		items := make([]jinja.Value, len(v))
		for i, msg := range v {
			d := jinja.NewDict()
			d.AsDict().Set("role", jinja.NewString(msg.Role))
			d.AsDict().Set("content", jinja.NewString(msg.Content))
			items[i] = d
		}
		return jinja.NewList(items), nil
	case json.RawMessage:
		return messagesJSON(v)
	case []byte:
		return messagesJSON(v)
	}
	return jinja.Value{}, fmt.Errorf("chat template: messages of type %T (want []Message or JSON)", m)
}

func messagesJSON(b []byte) (jinja.Value, error) {
	v, err := ParseJSON(b)
	if err != nil {
		return jinja.Value{}, fmt.Errorf("messages: %w", err)
	}
	if !v.IsList() {
		return jinja.Value{}, errors.New("messages: want a JSON list of {role, content} objects")
	}
	for i, it := range v.AsList().Items {
		if !it.IsDict() {
			return jinja.Value{}, fmt.Errorf("messages[%d]: want an object with role and content", i)
		}
		if r, ok := it.AsDict().Get("role"); !ok || !r.IsString() {
			return jinja.Value{}, fmt.Errorf("messages[%d]: no \"role\" string", i)
		}
	}
	return v, nil
}

// goValue converts a kwarg: raw JSON keeps its key order, anything else goes
// through the library's conversion.
func goValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return ParseJSON(x)
	case jinja.Value:
		return x, nil
	}
	return jinja.FromGoValue(v), nil
}

// ParseJSON decodes JSON into template values, keeping object key order
// (Python dicts keep it, and tojson shows it) and integers distinct from
// floats (Python's json does, and a template prints 1 and 1.0 differently).
func ParseJSON(b []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, fmt.Errorf("JSON: data after the value at byte %d", dec.InputOffset())
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, fmt.Errorf("JSON at byte %d: %w", dec.InputOffset(), err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			var items []jinja.Value
			for dec.More() {
				it, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, it)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, fmt.Errorf("JSON at byte %d: %w", dec.InputOffset(), err)
			}
			return jinja.NewList(items), nil
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, fmt.Errorf("JSON at byte %d: %w", dec.InputOffset(), err)
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, fmt.Errorf("JSON at byte %d: %w", dec.InputOffset(), err)
			}
			return d, nil
		}
		return jinja.Value{}, fmt.Errorf("JSON at byte %d: unexpected %v", dec.InputOffset(), t)
	default:
		return jinja.FromGoValue(t), nil
	}
}

// Builtins are the names --chat-template accepts.
var Builtins = []string{"chatml", "llama3", "gemma", "phi3", "mistral"}

// builtinSources are written after the models' own templates so that a
// plain conversation renders as those do (the tests compare them), without
// the tool-use and date branches.
var builtinSources = map[string]string{
	"chatml": `{%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}`,
	// As Meta's Llama 3 Instruct template: BOS before the first message only.
	"llama3": `{%- for message in messages %}
{%- if loop.first %}{{ bos_token }}{% endif %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}`,
	// As Gemma 3: no system role, so a system message opens the first user turn.
	"gemma": `{{- bos_token }}
{%- if messages and messages[0]['role'] == 'system' %}
{%- set first_user_prefix = messages[0]['content'] + '\n\n' %}
{%- set loop_messages = messages[1:] %}
{%- else %}
{%- set first_user_prefix = '' %}
{%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
{%- endif %}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}
{{- '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<start_of_turn>model\n' }}
{%- endif %}`,
	// As Phi-3.5-mini: an empty system message is left out.
	"phi3": `{%- for message in messages %}
{%- if message['role'] != 'system' or message['content'] %}
{{- '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|assistant|>\n' }}
{%- else %}
{{- eos_token }}
{%- endif %}`,
	// As Mistral's v3 (Tekken) templates: the system message goes before
	// the last user message.
	"mistral": `{%- if messages and messages[0]['role'] == 'system' %}
{%- set system_message = messages[0]['content'] %}
{%- set loop_messages = messages[1:] %}
{%- else %}
{%- set loop_messages = messages %}
{%- endif %}
{%- set ns = namespace(last_user=-1) %}
{%- for message in loop_messages %}
{%- if message['role'] == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}
{%- endfor %}
{{- bos_token }}
{%- for message in loop_messages %}
{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
{{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
{%- endif %}
{%- if message['role'] == 'user' %}
{%- if loop.index0 == ns.last_user and system_message is defined %}
{{- '[INST]' + system_message + '\n\n' + message['content'] + '[/INST]' }}
{%- else %}
{{- '[INST]' + message['content'] + '[/INST]' }}
{%- endif %}
{%- else %}
{{- message['content'] + eos_token }}
{%- endif %}
{%- endfor %}`,
}

// Builtin returns the named built-in template.
func Builtin(name string) (*Template, error) {
	src, ok := builtinSources[name]
	if !ok {
		return nil, fmt.Errorf("unknown chat template %q (built-ins: %s)", name, strings.Join(Builtins, ", "))
	}
	return Parse(src, "built-in "+name)
}

// checkConversation is the conversation Check renders: every role a plain
// chat uses, in the order every template accepts.
var checkConversation = []Message{
	{"system", "You are a helpful assistant."},
	{"user", "Hello!"},
	{"assistant", "Hi. How can I help?"},
	{"user", "Tell me a joke."},
}

// Check renders a small conversation (system, user, assistant, user, with
// the generation prompt) under t's limits, so that a template that cannot
// serve a plain chat is reported when it is loaded rather than at the first
// request. bos and eos are the model's special-token text.
func (t *Template) Check(ctx context.Context, bos, eos string, kwargs map[string]any) error {
	_, err := t.Render(ctx, Input{Messages: checkConversation, AddGenerationPrompt: true, BOS: bos, EOS: eos, Kwargs: kwargs})
	return err
}
