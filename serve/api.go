package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/tokenizer"
)

// decodeJSON reads a JSON object into v; every way it can be wrong is a 400
// that names the field.
func decodeJSON(b []byte, v any) error {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return badRequest("the request body must be a JSON object")
	}
	// Every field is checked before any is read: one the route does not
	// honour is never silently dropped. A generation route holds them to
	// its table (fields.go); another route, to its request's own fields.
	var fields map[string]json.RawMessage
	switch r := v.(type) {
	case interface{ endpoint() endpoint }:
		if json.Unmarshal(b, &fields) == nil {
			if err := checkFields(fields, r.endpoint()); err != nil {
				return err
			}
		}
	case interface{ route() string }:
		if json.Unmarshal(b, &fields) == nil {
			known := jsonFields(reflect.TypeOf(v).Elem())
			for k := range fields {
				if !slices.Contains(known, k) {
					return badRequest("%q is not a field of %s (it takes %s)", k, r.route(), strings.Join(known, ", "))
				}
			}
		}
	}
	err := json.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var fe *fieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return badRequest("%q: %s", fe.field, fe.msg)
	case errors.As(err, &te):
		// The path names the embedded structs of the shared fields; the
		// client knows only the JSON names.
		field := strings.TrimPrefix(strings.TrimPrefix(te.Field, "genParams."), "chatExtras.")
		return badRequest("%q: want %s, got %s", field, kindOf(te.Type), te.Value)
	case errors.As(err, &se):
		return badRequest("malformed JSON at byte %d: %v", se.Offset, err)
	}
	return badRequest("malformed JSON: %v", err)
}

// fieldError is a field whose value has the wrong shape.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// kindOf names a Go type as the JSON it reads.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// genParams are the fields /v1/completions and /v1/chat/completions share:
// OpenAI's and llama-server's.
type genParams struct {
	Model         *string `json:"model"`
	Stream        *bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int               `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	RepeatPenalty       *float64           `json:"repeat_penalty"`
	RepeatLastN         *int               `json:"repeat_last_n"`
	Seed                *int64             `json:"seed"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	NPredict            *int               `json:"n_predict"`
	Stop                *stopList          `json:"stop"`
	IgnoreEOS           *bool              `json:"ignore_eos"`
	NKeep               *int               `json:"n_keep"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	// ResponseFormat is read by setResponseFormat (format.go).
	ResponseFormat json.RawMessage `json:"response_format"`
	// think splits a chat reply's reasoning from its content (nil: it
	// does not); the chat request's prompt sets it.
	think *ThinkSplit
}

// stopList is "stop": a string or an array of strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &fieldError{"stop", "want a string or an array of strings"}
	}
	*s = many
	return nil
}

// inRange checks an optional number against [lo, hi].
func inRange(name string, v *float64, lo, hi float64) error {
	if v != nil && !(*v >= lo && *v <= hi) {
		return badRequest("%q: %v is out of range [%v, %v]", name, *v, lo, hi)
	}
	return nil
}

// request turns the fields into a scheduler request (without its prompt),
// with the server's defaults for what is absent.
func (p *genParams) request(m *Model, lim Limits) (Request, error) {
	r := Request{Sampling: m.Defaults, MaxTokens: -1, Keep: m.Keep}
	for _, c := range []struct {
		name   string
		v      *float64
		lo, hi float64
	}{
		{"temperature", p.Temperature, 0, 2},
		{"top_p", p.TopP, 0, 1},
		{"min_p", p.MinP, 0, 1},
		{"repeat_penalty", p.RepeatPenalty, math.SmallestNonzeroFloat32, math.MaxFloat32},
	} {
		if err := inRange(c.name, c.v, c.lo, c.hi); err != nil {
			return r, err
		}
	}
	set := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	set(&r.Sampling.Temp, p.Temperature)
	set(&r.Sampling.TopP, p.TopP)
	set(&r.Sampling.MinP, p.MinP)
	set(&r.Sampling.RepeatPenalty, p.RepeatPenalty)
	if p.TopK != nil {
		if *p.TopK < 0 {
			return r, badRequest(`"top_k": %d is negative (0: off)`, *p.TopK)
		}
		r.Sampling.TopK = *p.TopK
	}
	if p.RepeatLastN != nil {
		switch n := *p.RepeatLastN; {
		case n < -1:
			return r, badRequest(`"repeat_last_n": %d is below -1 (-1: the whole context)`, n)
		case n == -1:
			r.Sampling.RepeatLastN = m.Sched.Context()
		default:
			r.Sampling.RepeatLastN = n
		}
	}
	r.Sampling.Seed = uint64(time.Now().UnixNano())
	if m.Seed != nil {
		r.Sampling.Seed = *m.Seed
	}
	if p.Seed != nil {
		switch s := *p.Seed; {
		case s < -1:
			return r, badRequest(`"seed": %d is below -1 (-1: random)`, s)
		case s == -1:
			r.Sampling.Seed = uint64(time.Now().UnixNano())
		default:
			r.Sampling.Seed = uint64(s)
		}
	}
	// llama-server's n_predict wins over OpenAI's names for the same thing.
	for _, c := range []struct {
		name string
		v    *int
	}{{"n_predict", p.NPredict}, {"max_completion_tokens", p.MaxCompletionTokens}, {"max_tokens", p.MaxTokens}} {
		if c.v == nil {
			continue
		}
		if *c.v < 1 && *c.v != -1 {
			return r, badRequest("%q: %d: want at least 1 (or -1: until the context is full)", c.name, *c.v)
		}
		if *c.v > lim.MaxTokens {
			return r, badRequest("%q: %d is over the limit of %d", c.name, *c.v, lim.MaxTokens)
		}
		r.MaxTokens = *c.v
		break
	}
	bias, err := logitBias(p.LogitBias, m.Sched.Vocab())
	if err != nil {
		return r, err
	}
	r.LogitBias = bias
	if p.Stop != nil {
		r.Stop = *p.Stop
		if len(r.Stop) > lim.Stops {
			return r, badRequest(`"stop": %d strings are over the limit of %d`, len(r.Stop), lim.Stops)
		}
		n := 0
		for _, s := range r.Stop {
			n += len(s)
		}
		if n > lim.StopBytes {
			return r, badRequest(`"stop": %d bytes are over the limit of %d`, n, lim.StopBytes)
		}
	}
	if p.NKeep != nil {
		if *p.NKeep < -1 {
			return r, badRequest(`"n_keep": %d is below -1 (-1: the whole prompt)`, *p.NKeep)
		}
		r.Keep = *p.NKeep
	}
	r.IgnoreEOS = p.IgnoreEOS != nil && *p.IgnoreEOS
	if err := p.setResponseFormat(&r, m); err != nil {
		return r, err
	}
	return r, nil
}

func (p *genParams) streaming() bool { return p.Stream != nil && *p.Stream }

func (p *genParams) includeUsage() bool {
	return p.StreamOptions != nil && p.StreamOptions.IncludeUsage != nil && *p.StreamOptions.IncludeUsage
}

type completionRequest struct {
	genParams
	Prompt json.RawMessage `json:"prompt"`
	// Logprobs is how many of the most probable tokens each step reports
	// (OpenAI's legacy logprobs), beside the one chosen.
	Logprobs *int `json:"logprobs"`
}

type chatRequest struct {
	genParams
	toolParams
	chatExtras
	Messages    messageList `json:"messages"`
	Logprobs    *bool       `json:"logprobs"`
	TopLogprobs *int        `json:"top_logprobs"`
}

// chatMessage is one message; its content is a string, null, or a list of
// parts of which only text is supported.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// ToolCalls (and the older FunctionCall) make a message without
	// content whole, as OpenAI's API has it.
	ToolCalls    json.RawMessage `json:"tool_calls"`
	FunctionCall json.RawMessage `json:"function_call"`
	toolMessage
}

// messages checks the conversation and flattens each content to text.
func (c *chatRequest) messages() ([]chattemplate.Message, error) {
	if len(c.Messages) == 0 {
		return nil, badRequest(`"messages": want a non-empty array of {"role", "content"} objects`)
	}
	out := make([]chattemplate.Message, len(c.Messages))
	for i, msg := range c.Messages {
		if msg.Role == "" {
			return nil, badRequest(`"messages[%d]": no "role"`, i)
		}
		if absent(msg.Content) && absent(msg.ToolCalls) && absent(msg.FunctionCall) {
			return nil, badRequest(`"messages[%d]": no "content" (nor "tool_calls")`, i)
		}
		text, err := contentText(msg.Content)
		if err != nil {
			return nil, badRequest(`"messages[%d].content": %v`, i, err)
		}
		out[i] = chattemplate.Message{Role: msg.Role, Content: text}
	}
	return out, nil
}

// absent: a field not given, or null.
func absent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func contentText(raw json.RawMessage) (string, error) {
	if absent(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of {\"type\": \"text\", \"text\"} parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("part %d: only text parts are supported (type %q)", i, p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// completionPrompt reads "prompt" as llama-server does: a string, an array
// of token ids, or an array mixing strings and ids (a string at the start
// gets BOS); an array holding one of these is that prompt. Several prompts
// in one request are not supported.
func completionPrompt(t *tokenizer.Tokenizer, raw json.RawMessage) ([]int32, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest(`"prompt" is required`)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		if b := bytes.TrimSpace(list[0]); len(b) > 0 && (b[0] == '"' || b[0] == '[') {
			raw = list[0]
		}
	}
	if json.Unmarshal(raw, &list) == nil && len(list) > 1 {
		strs := 0
		for _, e := range list {
			if b := bytes.TrimSpace(e); len(b) > 0 && b[0] == '"' {
				strs++
			}
		}
		if strs == len(list) {
			return nil, badRequest(`"prompt": %d prompts in one request are not supported (send one per request)`, len(list))
		}
	}
	ids, err := tokenizeMixed(t, raw, true)
	if err != nil {
		return nil, badRequest(`"prompt": %v`, err)
	}
	return ids, nil
}

// tokenizeMixed is llama-server's tokenize_mixed: a string, or an array of
// strings and token ids; addSpecial adds BOS to a string that comes first.
func tokenizeMixed(t *tokenizer.Tokenizer, raw json.RawMessage, addSpecial bool) ([]int32, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return t.Encode(s, addSpecial), nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("want a string, an array of token ids, or an array of strings and token ids")
	}
	var ids []int32
	for i, e := range list {
		if err := json.Unmarshal(e, &s); err == nil {
			ids = append(ids, t.Encode(s, addSpecial && i == 0)...)
			continue
		}
		var id int32
		if err := json.Unmarshal(e, &id); err != nil {
			return nil, fmt.Errorf("element %d: want a string or a token id (an integer), got %s", i, e)
		}
		if id < 0 || int(id) >= t.VocabSize() {
			return nil, fmt.Errorf("element %d: token id %d is outside the vocabulary of %d", i, id, t.VocabSize())
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// logitBias reads "logit_bias": token ids (as strings, JSON object keys)
// to a bias in [-100, 100] added to their logits, in the order of the ids.
func logitBias(m map[string]float64, vocab int) ([]Bias, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make([]Bias, 0, len(m))
	for k, v := range m {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, badRequest(`"logit_bias": key %q: want a token id (an integer)`, k)
		}
		if id < 0 || id >= int64(vocab) {
			return nil, badRequest(`"logit_bias": token id %d is outside the vocabulary of %d`, id, vocab)
		}
		if !(v >= -100 && v <= 100) {
			return nil, badRequest(`"logit_bias": token id %d: bias %v is out of range [-100, 100]`, id, v)
		}
		out = append(out, Bias{ID: int32(id), Bias: float32(v)})
	}
	slices.SortFunc(out, func(a, b Bias) int { return int(a.ID - b.ID) })
	return out, nil
}

// logprobs is the chat's "logprobs" and "top_logprobs": -1 for none, else
// how many of the most probable tokens each step reports.
func (c *chatRequest) logprobs() (int, error) {
	on := c.Logprobs != nil && *c.Logprobs
	switch {
	case c.TopLogprobs == nil:
		if on {
			return 0, nil
		}
		return -1, nil
	case !on:
		return 0, badRequest(`"top_logprobs" needs "logprobs": true`)
	case *c.TopLogprobs < 0 || *c.TopLogprobs > MaxTopLogprobs:
		return 0, badRequest(`"top_logprobs": %d is out of range [0, %d]`, *c.TopLogprobs, MaxTopLogprobs)
	}
	return *c.TopLogprobs, nil
}

// logprobs is the completion's "logprobs": -1 for none (absent), else how
// many of the most probable tokens each step reports, at most 5 as
// OpenAI's.
func (c *completionRequest) logprobs() (int, error) {
	switch {
	case c.Logprobs == nil:
		return -1, nil
	case *c.Logprobs < 0 || *c.Logprobs > 5:
		return 0, badRequest(`"logprobs": %d is out of range [0, 5]`, *c.Logprobs)
	}
	return *c.Logprobs, nil
}

func (c *chatRequest) endpoint() endpoint       { return chatEP }
func (c *completionRequest) endpoint() endpoint { return completionsEP }
