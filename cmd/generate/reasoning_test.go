package main

import (
	"strings"
	"testing"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/serve"
)

// TestChatReasoning: with a template that opens a think block, chat's
// deepseek format shows the reply (random weights: never a </think>) as
// thoughts, trimmed, and an empty reply; none shows it as the reply. The
// conversation keeps the whole text either way.
func TestChatReasoning(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-F16.gguf")
	tmpl, err := chattemplate.Parse("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"+
		"{% if add_generation_prompt %}assistant: <think>\n{% endif %}", "thinking")
	if err != nil {
		t.Fatal(err)
	}
	reply := func(f serve.ReasoningFormat) (out, thoughts, kept string) {
		s := openChat(t, path, 12)
		s.tmpl, s.reasoning = tmpl, f
		var o, th strings.Builder
		s.thoughts = &th
		if _, err := s.turn("Hello", &o); err != nil {
			t.Fatal(err)
		}
		return o.String(), th.String(), s.msgs[len(s.msgs)-1].Content
	}
	raw, th, kept := reply(serve.ReasoningNone)
	if raw == "" || th != "" || kept != raw {
		t.Fatalf("none: reply %q, thoughts %q, kept %q", raw, th, kept)
	}
	out, th, kept := reply(serve.ReasoningDeepSeek)
	if want := strings.Trim(raw, " \t\r\n"); out != "" || th != want || kept != raw {
		t.Errorf("deepseek: reply %q, thoughts %q, kept %q; want \"\", %q, %q", out, th, kept, want, raw)
	}
}
