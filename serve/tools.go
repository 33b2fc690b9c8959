package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/grammar"
	"github.com/glint-llm/glint/toolcall"
)

// toolParams are chat's tool fields; useTools reads them.
type toolParams struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	// use is the request's tools as it uses them (nil: no tools, or
	// tool_choice none).
	use *toolUse
}

// toolMessage are a message's tool fields: a tool result's call id, and
// the name of the tool (or of a participant).
type toolMessage struct {
	ToolCallID json.RawMessage `json:"tool_call_id"`
	Name       json.RawMessage `json:"name"`
}

// maxTools bounds a request's tools (OpenAI's limit).
const maxTools = 128

// toolUse is how a chat request uses its tools.
type toolUse struct {
	family toolcall.Family
	// raw is the tools array as the template gets it.
	raw json.RawMessage
	// shown: the template writes the tools itself.
	shown    bool
	parallel bool
	// Streaming state: the reply's text so far, and how much of it was
	// sent as content.
	text strings.Builder
	sent int
}

// useTools reads tools, tool_choice and parallel_tool_calls. With
// "required" or a named function the reply is held (r.Grammar) to a call
// in the template family's syntax with valid arguments; with "auto" it is
// free and parsed; with "none" the tools are left out of the prompt and
// nothing is parsed, as llama-server does.
func (c *chatRequest) useTools(r *Request, m *Model) error {
	var tools []toolcall.Tool
	var raw []json.RawMessage
	if !absent(c.Tools) {
		if err := json.Unmarshal(c.Tools, &raw); err != nil {
			return badRequest(`"tools": want an array of {"type": "function", "function": {...}}`)
		}
		if len(raw) > maxTools {
			return badRequest(`"tools": %d tools are over the limit of %d`, len(raw), maxTools)
		}
		if len(c.Tools) > maxSchemaBytes {
			return badRequest(`"tools": %d bytes are over the limit of %d`, len(c.Tools), maxSchemaBytes)
		}
	}
	seen := map[string]bool{}
	for i, t := range raw {
		var v struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      *bool           `json:"strict"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &v); err != nil || v.Type != "function" || v.Function == nil {
			return badRequest(`"tools[%d]": want {"type": "function", "function": {"name", "description", "parameters"}}`, i)
		}
		f := v.Function
		if err := toolcall.CheckName(f.Name); err != nil {
			return badRequest(`"tools[%d]": %v`, i, err)
		}
		if seen[f.Name] {
			return badRequest(`"tools[%d]": function %q is given twice`, i, f.Name)
		}
		seen[f.Name] = true
		if p := bytes.TrimSpace(f.Parameters); len(p) > 0 && p[0] != '{' && string(p) != "null" {
			return badRequest(`"tools[%d].function.parameters": want a JSON Schema object`, i)
		}
		tools = append(tools, toolcall.Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters})
	}
	choice, named := "auto", ""
	if !absent(c.ToolChoice) {
		var fn struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(c.ToolChoice, &choice) == nil:
			if choice != "auto" && choice != "none" && choice != "required" {
				return badRequest(`"tool_choice": %q: want "auto", "none", "required" or {"type": "function", "function": {"name"}}`, choice)
			}
		case json.Unmarshal(c.ToolChoice, &fn) == nil && fn.Type == "function":
			if !seen[fn.Function.Name] {
				return badRequest(`"tool_choice": function %q is not among "tools"`, fn.Function.Name)
			}
			choice, named = "function", fn.Function.Name
		default:
			return badRequest(`"tool_choice": want "auto", "none", "required" or {"type": "function", "function": {"name"}}`)
		}
	}
	if len(tools) == 0 {
		if choice == "required" || choice == "function" {
			return badRequest(`"tool_choice": %q needs "tools"`, choice)
		}
		return nil
	}
	if choice == "none" || m.Template == nil {
		return nil
	}
	if r.Grammar != nil {
		return badRequest(`"response_format" and "tools": a reply is either held to a format or may call tools, not both`)
	}
	u := &toolUse{family: toolcall.Detect(m.Template.Source), raw: c.Tools, shown: toolcall.RendersTools(m.Template.Source),
		parallel: c.ParallelToolCalls == nil || *c.ParallelToolCalls}
	if choice != "auto" {
		if r.IgnoreEOS {
			return badRequest(`"tool_choice" %q and "ignore_eos": a constrained reply must be able to end`, choice)
		}
		if m.Tokenizer == nil {
			return badRequest(`"tool_choice": the model has no tokenizer`)
		}
		if named != "" {
			tools = []toolcall.Tool{tools[slices.IndexFunc(tools, func(t toolcall.Tool) bool { return t.Name == named })]}
		}
		g, err := toolcall.Grammar(u.family, tools, u.parallel)
		if err != nil {
			return badRequest(`"tools": %v`, err)
		}
		if err := grammar.NewMatcher(g, nil).Err(); err != nil {
			return badRequest(`"tools": %v`, err)
		}
		r.Grammar = g
	}
	c.use = u
	return nil
}

// templateInput gives the template the conversation with its tool fields
// (tool calls' arguments as objects, as transformers and llama.cpp pass
// them: templates write them with tojson) and the tools, where the
// request has any; msgs are the messages with their content as text.
func (c *chatRequest) templateInput(in *chattemplate.Input, msgs []chattemplate.Message) error {
	hasTools := false
	for _, msg := range c.Messages {
		hasTools = hasTools || !absent(msg.ToolCalls) || !absent(msg.ToolCallID) || !absent(msg.Name)
	}
	if !hasTools && c.use == nil {
		return nil
	}
	list := make([]object, 0, len(msgs)+1)
	for i, msg := range c.Messages {
		d := object{{"role", msg.Role}, {"content", msgs[i].Content}}
		if !absent(msg.ToolCalls) {
			calls, err := historyCalls(msg.ToolCalls)
			if err != nil {
				return badRequest(`"messages[%d].tool_calls%s`, i, err)
			}
			d = append(d, field{"tool_calls", calls})
		}
		for _, f := range []struct {
			k string
			v json.RawMessage
		}{{"tool_call_id", msg.ToolCallID}, {"name", msg.Name}} {
			if absent(f.v) {
				continue
			}
			var s string
			if json.Unmarshal(f.v, &s) != nil {
				return badRequest(`"messages[%d].%s": want a string`, i, f.k)
			}
			d = append(d, field{f.k, s})
		}
		list = append(list, d)
	}
	if c.use != nil && c.use.family == toolcall.Generic {
		// The generic syntax is glint's (llama.cpp's), not the model's: a
		// system message asks for it.
		sys := toolcall.SystemPrompt(c.use.raw, c.use.shown)
		if len(list) > 0 && msgs[0].Role == "system" {
			list[0][1].v = msgs[0].Content + "\n\n" + sys
		} else {
			list = append([]object{{{"role", "system"}, {"content", sys}}}, list...)
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("serve: messages: %w", err)
	}
	in.Messages = json.RawMessage(b)
	if c.use != nil {
		kw := make(map[string]any, len(in.Kwargs)+1)
		for k, v := range in.Kwargs {
			kw[k] = v
		}
		kw["tools"] = c.use.raw
		in.Kwargs = kw
	}
	return nil
}

// object is a JSON object whose keys keep their order: templates see
// dicts in insertion order, as Python's.
type object []field

type field struct {
	k string
	v any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// historyCalls reads an assistant message's tool_calls, their arguments
// (a JSON string, OpenAI's shape) parsed to objects; an error's text
// continues the field's path.
func historyCalls(raw json.RawMessage) ([]object, error) {
	var calls []struct {
		ID       *string `json:"id"`
		Type     string  `json:"type"`
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, fmt.Errorf(`": want an array of {"id", "type": "function", "function": {"name", "arguments"}}`)
	}
	out := make([]object, len(calls))
	for i, call := range calls {
		if call.Type != "function" || call.Function == nil || call.Function.Name == "" {
			return nil, fmt.Errorf(`[%d]": want {"id", "type": "function", "function": {"name", "arguments"}}`, i)
		}
		var args any = json.RawMessage(`{}`)
		if !absent(call.Function.Arguments) {
			var s string
			if json.Unmarshal(call.Function.Arguments, &s) != nil {
				return nil, fmt.Errorf(`[%d].function.arguments": want a string of JSON`, i)
			}
			args = s // not JSON: the template gets the string, as llama.cpp passes it
			if json.Valid([]byte(s)) {
				args = json.RawMessage(s)
			}
		}
		o := object{}
		if call.ID != nil {
			o = append(o, field{"id", *call.ID})
		}
		out[i] = append(o, field{"type", "function"}, field{"function", object{{"name", call.Function.Name}, {"arguments", args}}})
	}
	return out, nil
}

// toolCallOut is a call in a reply: whole in a message; in a stream's
// deltas, first its index, id, type and name, then its arguments.
type toolCallOut struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// split parses a finished reply: its content (nil when it is only calls)
// and its calls, each with an id of its own; a reply with calls finishes
// with "tool_calls" where it stopped by itself.
func (u *toolUse) split(text string, finish *string) (*string, []toolCallOut) {
	content, calls := u.family.Parse(text)
	if len(calls) == 0 {
		return &text, nil
	}
	if !u.parallel {
		calls = calls[:1]
	}
	out := make([]toolCallOut, len(calls))
	for i, c := range calls {
		out[i] = toolCallOut{ID: u.callID(), Type: "function", Function: functionCall{Name: c.Name, Arguments: c.Arguments}}
	}
	if *finish == "stop" {
		*finish = "tool_calls"
	}
	if content == "" {
		return nil, out
	}
	return &content, out
}

// callID is OpenAI's call_<random>; Mistral's templates want 9 letters
// and digits, and get them.
func (u *toolUse) callID() string {
	if u.family == toolcall.Mistral {
		const abc = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		b := make([]byte, 9)
		rand.Read(b)
		for i := range b {
			b[i] = abc[int(b[i])%len(abc)]
		}
		return string(b)
	}
	return newID("call_")
}

// message is the reply's message: text, or with u its content and calls.
func (u *toolUse) message(text string, finish *string) *message {
	if u == nil {
		return &message{Role: "assistant", Content: &text}
	}
	content, calls := u.split(text, finish)
	return &message{Role: "assistant", Content: content, ToolCalls: calls}
}

// stream takes a piece of the streamed reply and returns the content that
// may be sent now: text that may open a call is held back until the end.
func (u *toolUse) stream(piece string) string {
	if u == nil {
		return piece
	}
	u.text.WriteString(piece)
	all := u.text.String()
	h := u.family.Held(all)
	if h <= u.sent {
		return ""
	}
	out := all[u.sent:h]
	u.sent = h
	return out
}

// end is the streamed reply's remaining content and, one delta each, its
// calls' heads (index, id, type, name) and arguments.
func (u *toolUse) end(finish *string) (string, [][]toolCallOut) {
	all := u.text.String()
	content, calls := u.split(all, finish)
	var rest string
	if content != nil {
		// Held guarantees the content begins with what was sent.
		rest = strings.TrimPrefix(*content, all[:u.sent])
	}
	var deltas [][]toolCallOut
	for i, c := range calls {
		head := c
		head.Index, head.Function.Arguments = ptr(i), ""
		deltas = append(deltas, []toolCallOut{head}, []toolCallOut{{Index: ptr(i), Function: functionCall{Arguments: c.Function.Arguments}}})
	}
	return rest, deltas
}

// sendEnd sends the streamed reply's held-back content and its calls.
func (u *toolUse) sendEnd(send func(any) error, chunk func(*string, []TokenLogprob, *string) reply, finish *string) error {
	rest, deltas := u.end(finish)
	if rest != "" {
		if err := send(chunk(&rest, nil, nil)); err != nil {
			return err
		}
	}
	for _, d := range deltas {
		c := chunk(nil, nil, nil)
		c.Choices[0].Delta.ToolCalls = d
		if err := send(c); err != nil {
			return err
		}
	}
	return nil
}
