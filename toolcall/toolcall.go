// Package toolcall is the tool-call syntax of chat-template families: which
// family a template belongs to (Detect, from its source, as llama.cpp's
// common/chat.cpp tells them apart), how a reply's text splits into content
// and calls (Parse, Held), and the grammar that holds a reply to a valid
// call of the given tools (GBNF). It does no I/O; serve puts it on the wire.
package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Family is a template family's tool-call syntax.
type Family uint8

const (
	// Generic is for templates with no call syntax of their own, as
	// llama.cpp's generic format: the reply is one JSON object,
	// {"tool_call": {"name", "arguments"}}, {"tool_calls": [...]} or
	// {"response": "..."}, which a system message asks for.
	Generic Family = iota
	// Llama3 is Llama 3.1–3.3's JSON call, {"name": …, "parameters": …},
	// at the start of the reply (after <|python_tag|>, a control token that
	// is not in the text); one call per turn, as its template holds.
	Llama3
	// Hermes is Hermes 2 Pro/3 and Qwen 2.5/3:
	// <tool_call>{"name": …, "arguments": …}</tool_call>, after any content,
	// one or more.
	Hermes
	// Mistral is Mistral's [TOOL_CALLS][{"name": …, "arguments": …}, …] at
	// the start of the reply ([TOOL_CALLS] is a control token: the text may
	// lack it).
	Mistral
)

func (f Family) String() string {
	switch f {
	case Llama3:
		return "llama3"
	case Hermes:
		return "hermes"
	case Mistral:
		return "mistral"
	}
	return "generic"
}

// Detect is the family of the template whose Jinja source is src, told
// apart by the markers llama.cpp looks for, in its order.
func Detect(src string) Family {
	switch {
	case strings.Contains(src, "<tool_call>"):
		return Hermes
	case strings.Contains(src, "<|start_header_id|>ipython<|end_header_id|>"):
		return Llama3
	case strings.Contains(src, "[TOOL_CALLS]"):
		return Mistral
	}
	return Generic
}

// RendersTools reports whether the template reads the tools variable; one
// that does not never shows the model the tools, so Generic's system
// message lists them.
func RendersTools(src string) bool { return toolsVar.MatchString(src) }

var toolsVar = regexp.MustCompile(`\btools\b`)

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (an object's).
	Parameters json.RawMessage
}

// Call is a call parsed from a reply (ids the model may write are left
// out: the server gives each call its own).
type Call struct {
	Name string
	// Arguments is a JSON object, compact, as the model wrote it.
	Arguments string
}

const (
	pythonTag    = "<|python_tag|>"
	mistralTag   = "[TOOL_CALLS]"
	hermesOpen   = "<tool_call>"
	hermesClose  = "</tool_call>"
	genericIntro = "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's request"
)

// SystemPrompt is the instruction the Generic family adds to the system
// message: llama.cpp's, preceded by the tools when the template does not
// show them itself (toolsJSON: the request's tools array).
func SystemPrompt(toolsJSON []byte, templateShowsTools bool) string {
	if templateShowsTools {
		return genericIntro
	}
	return "You can call these tools:\n" + string(toolsJSON) + "\n\n" + genericIntro
}

// Parse splits a finished reply into its content and its calls. Text that
// opens a call the way the family does but is not a well-formed one is
// content, whole, as llama.cpp treats it.
func (f Family) Parse(text string) (content string, calls []Call) {
	var ok bool
	switch f {
	case Llama3:
		calls, ok = parseLlama3(text)
	case Hermes:
		return parseHermes(text)
	case Mistral:
		calls, ok = parseMistral(text)
	default:
		return parseGeneric(text)
	}
	if !ok {
		return text, nil
	}
	return "", calls
}

// Held is how much of a reply's text so far is content whatever follows:
// a stream sends text[:Held(text)] and holds the rest, which may open a
// call. Parse's content of any continuation starts with that much.
func (f Family) Held(text string) int {
	if f == Hermes {
		if i := strings.Index(text, hermesOpen); i >= 0 {
			return len(strings.TrimRightFunc(text[:i], unicode.IsSpace))
		}
		// A partial opener at the end, and the white space before it.
		end := len(text)
		for k := min(len(hermesOpen)-1, len(text)); k > 0; k-- {
			if strings.HasSuffix(text, hermesOpen[:k]) {
				end = len(text) - k
				break
			}
		}
		return len(strings.TrimRightFunc(text[:end], unicode.IsSpace))
	}
	t := strings.TrimLeftFunc(text, unicode.IsSpace)
	if t == "" || opensCall(f, t) {
		return 0
	}
	return len(text)
}

// opensCall: t (no leading space) is, or may grow into, the start of a
// start-anchored family's call.
func opensCall(f Family, t string) bool {
	prefixOf := func(tag string) bool {
		n := min(len(t), len(tag))
		return t[:n] == tag[:n]
	}
	switch f {
	case Llama3:
		return t[0] == '{' || prefixOf(pythonTag)
	case Mistral:
		return t[0] == '[' || prefixOf(mistralTag)
	}
	return t[0] == '{'
}

// object reads one JSON value from the start of s (after white space),
// returning it raw and the rest of s.
func object(s string) (json.RawMessage, string, bool) {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	d := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if d.Decode(&raw) != nil {
		return nil, s, false
	}
	return raw, s[d.InputOffset():], true
}

// callOf reads a call object: its name, and its arguments under argKey
// (or "arguments"): an object, or a string holding one, as some models
// write it.
func callOf(raw json.RawMessage, argKey string) (Call, bool) {
	var c struct {
		Type       *string         `json:"type"`
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Name == "" || c.Type != nil && *c.Type != "function" {
		return Call{}, false
	}
	args := c.Arguments
	if argKey == "parameters" && c.Parameters != nil {
		args = c.Parameters
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(s)
	}
	var b bytes.Buffer
	if json.Compact(&b, args) != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
		return Call{}, false
	}
	return Call{Name: c.Name, Arguments: b.String()}, true
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// parseLlama3: one JSON call, or several separated by ";" as Llama 3.1
// sometimes writes them.
func parseLlama3(text string) ([]Call, bool) {
	rest := strings.TrimLeftFunc(text, unicode.IsSpace)
	rest = strings.TrimPrefix(rest, pythonTag)
	var calls []Call
	for {
		raw, r, ok := object(rest)
		if !ok {
			return nil, false
		}
		c, ok := callOf(raw, "parameters")
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		rest = strings.TrimLeftFunc(r, unicode.IsSpace)
		if blank(rest) {
			return calls, true
		}
		if rest[0] != ';' {
			return nil, false
		}
		rest = rest[1:]
	}
}

func parseHermes(text string) (string, []Call) {
	i := strings.Index(text, hermesOpen)
	if i < 0 {
		return text, nil
	}
	content := strings.TrimRightFunc(text[:i], unicode.IsSpace)
	rest := text[i:]
	var calls []Call
	for strings.HasPrefix(rest, hermesOpen) {
		raw, r, ok := object(rest[len(hermesOpen):])
		if !ok {
			return text, nil
		}
		c, ok := callOf(raw, "arguments")
		if !ok {
			return text, nil
		}
		r = strings.TrimLeftFunc(r, unicode.IsSpace)
		if !strings.HasPrefix(r, hermesClose) {
			return text, nil
		}
		calls = append(calls, c)
		rest = strings.TrimLeftFunc(r[len(hermesClose):], unicode.IsSpace)
	}
	if rest != "" {
		return text, nil
	}
	return content, calls
}

func parseMistral(text string) ([]Call, bool) {
	rest := strings.TrimLeftFunc(text, unicode.IsSpace)
	rest = strings.TrimPrefix(rest, mistralTag)
	raw, r, ok := object(rest)
	if !ok || !blank(r) {
		return nil, false
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return nil, false
	}
	calls := make([]Call, 0, len(list))
	for _, e := range list {
		c, ok := callOf(e, "arguments")
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

func parseGeneric(text string) (string, []Call) {
	if !strings.HasPrefix(strings.TrimLeftFunc(text, unicode.IsSpace), "{") {
		return text, nil
	}
	raw, r, ok := object(text)
	if !ok || !blank(r) {
		return text, nil
	}
	var v struct {
		ToolCalls []json.RawMessage `json:"tool_calls"`
		ToolCall  json.RawMessage   `json:"tool_call"`
		Response  json.RawMessage   `json:"response"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return text, nil
	}
	if v.ToolCall != nil {
		v.ToolCalls = append(v.ToolCalls, v.ToolCall)
	}
	if len(v.ToolCalls) > 0 {
		calls := make([]Call, 0, len(v.ToolCalls))
		for _, e := range v.ToolCalls {
			c, ok := callOf(e, "arguments")
			if !ok {
				return text, nil
			}
			calls = append(calls, c)
		}
		return "", calls
	}
	if v.Response != nil {
		var s string
		if json.Unmarshal(v.Response, &s) == nil {
			return s, nil
		}
		return string(v.Response), nil
	}
	return text, nil
}

// validName is OpenAI's rule for a function's name; it also keeps names
// out of the grammar's and the templates' quoting.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// CheckName says what is wrong with a function name, if anything.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("function name %q: want 1 to 64 of a-z, A-Z, 0-9, _ and -", name)
	}
	return nil
}
