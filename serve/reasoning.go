package serve

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
)

// ReasoningFormat says what a chat reply's think block becomes
// (llama-server's --reasoning-format).
type ReasoningFormat string

const (
	// ReasoningDeepSeek puts a reply's leading <think>…</think> block in
	// message.reasoning_content (delta.reasoning_content when streamed),
	// stripped of surrounding whitespace, and the rest in content:
	// llama-server's default.
	ReasoningDeepSeek ReasoningFormat = "deepseek"
	// ReasoningNone leaves the think block in content.
	ReasoningNone ReasoningFormat = "none"
)

// ParseReasoningFormat reads --reasoning-format or a request's
// reasoning_format: "" is the default (deepseek), and "auto", newer
// llama-servers' name for their default, is deepseek too, so that their
// command lines work unchanged.
func ParseReasoningFormat(s string) (ReasoningFormat, error) {
	switch s {
	case "", "auto", "deepseek":
		return ReasoningDeepSeek, nil
	case "none":
		return ReasoningNone, nil
	}
	return "", fmt.Errorf("reasoning format %q: want none, deepseek or auto", s)
}

// chatExtras are llama-server's chat fields beside OpenAI's.
type chatExtras struct {
	// ChatTemplateKwargs are extra template variables over the server's
	// (--chat-template-kwargs), e.g. {"enable_thinking": false}.
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
	// ReasoningFormat overrides the server's --reasoning-format.
	ReasoningFormat *string `json:"reasoning_format"`
}

// templateKwargs merges the request's chat_template_kwargs over the
// server's: an object whose keys the renderer does not set itself.
func (x *chatExtras) templateKwargs(server map[string]any) (map[string]any, error) {
	if absent(x.ChatTemplateKwargs) {
		return server, nil
	}
	var kw map[string]json.RawMessage
	if err := json.Unmarshal(x.ChatTemplateKwargs, &kw); err != nil {
		return nil, badRequest(`"chat_template_kwargs": want an object of template variables, got %s`, clip(x.ChatTemplateKwargs))
	}
	out := maps.Clone(server)
	if out == nil {
		out = make(map[string]any, len(kw))
	}
	for k, v := range kw {
		if k == "messages" || k == "add_generation_prompt" {
			return nil, badRequest(`"chat_template_kwargs": %q is set by the server, not a variable a request sets`, k)
		}
		out[k] = v
	}
	return out, nil
}

// reasoning is the request's reasoning format, else the server's.
func (x *chatExtras) reasoning(server ReasoningFormat) (ReasoningFormat, error) {
	if x.ReasoningFormat == nil {
		return server, nil
	}
	f, err := ParseReasoningFormat(*x.ReasoningFormat)
	if err != nil {
		return "", badRequest(`"reasoning_format": %v`, err)
	}
	return f, nil
}

// clip is a client's value, shortened for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	// spaces are what is stripped around the reasoning and before the
	// content after it (llama.cpp's string_strip and find_first_not_of).
	spaces = " \t\r\n"
)

// opensThink reports whether a rendered prompt ends inside a think block
// (DeepSeek-R1's template opens one at the generation prompt, Qwen3's
// thinking variants too), so that the reply starts in its reasoning. A
// block the prompt also closes (Qwen3 with enable_thinking false) is not
// open.
func opensThink(prompt string) bool {
	return strings.HasSuffix(strings.TrimRight(prompt, spaces), thinkOpen)
}

// ThinkSplit splits a reply into its reasoning and content as llama.cpp's
// DeepSeek-R1 parser does — a leading <think> (or one the prompt opened)
// up to </think> is the reasoning, trimmed; the rest is the content, its
// leading whitespace dropped — text piece by text piece, so that a stream
// sends each part as it is made. Text that may be the start of a tag, or
// whitespace that may turn out to be trimmed, is held back until the next
// piece says which. A reply that never closes its block is all reasoning,
// as newer llama-servers have it: a stream cannot take back what it sent.
// A reply that does not start with the block is left whole, whitespace
// and all: it is a model that does not reason.
type ThinkSplit struct {
	state   thinkState
	opened  bool   // the prompt opened the block
	started bool   // reasoning text was sent: no more leading space to drop
	held    string // text not yet sent
}

type thinkState uint8

const (
	thinkStart   thinkState = iota // nothing but spaces yet
	thinkInside                    // in the block
	thinkAfter                     // past </think>, before any content
	thinkContent                   // content: passed through
)

// Feed takes the next piece of the reply and returns what of the reasoning
// and of the content can be sent now.
func (t *ThinkSplit) Feed(s string) (reasoning, content string) {
	t.held += s
	if t.state == thinkStart {
		rest := strings.TrimLeft(t.held, spaces)
		switch {
		case strings.HasPrefix(rest, thinkOpen):
			t.state, t.held = thinkInside, rest[len(thinkOpen):]
		case rest == "" || strings.HasPrefix(thinkOpen, rest):
			return "", "" // may still open
		case t.opened:
			t.state = thinkInside
		default:
			t.state = thinkContent
		}
	}
	if t.state == thinkInside {
		if !t.started {
			t.held = strings.TrimLeft(t.held, spaces)
		}
		i := strings.Index(t.held, thinkClose)
		if i < 0 {
			// Hold a tail that may begin </think>, and the spaces before
			// it, which are trimmed if the block closes there.
			n := len(t.held) - partialSuffix(t.held, thinkClose)
			n = len(strings.TrimRight(t.held[:n], spaces))
			reasoning, t.held = t.held[:n], t.held[n:]
			t.started = t.started || reasoning != ""
			return reasoning, ""
		}
		reasoning = strings.TrimRight(t.held[:i], spaces)
		t.state, t.held = thinkAfter, t.held[i+len(thinkClose):]
	}
	if t.state == thinkAfter {
		t.held = strings.TrimLeft(t.held, spaces)
		if t.held == "" {
			return reasoning, ""
		}
		t.state = thinkContent
	}
	content, t.held = t.held, ""
	return reasoning, content
}

// Flush ends the reply: what was held back is sent as what it turned out
// to be.
func (t *ThinkSplit) Flush() (reasoning, content string) {
	held := t.held
	t.held = ""
	switch t.state {
	case thinkStart:
		if t.opened {
			return strings.Trim(held, spaces), ""
		}
		return "", held
	case thinkInside:
		return strings.TrimRight(held, spaces), ""
	}
	return "", held
}

// partialSuffix is the length of the longest tail of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// NewThinkSplit is the splitter of a chat reply to a prompt, nil where the
// think block stays in content ("" is the default, deepseek).
func NewThinkSplit(f ReasoningFormat, prompt string) *ThinkSplit {
	if f == ReasoningNone {
		return nil
	}
	return &ThinkSplit{opened: opensThink(prompt)}
}
