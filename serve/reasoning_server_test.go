package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/model/synth"
)

// thinkingTemplate is Qwen3's way with enable_thinking, in plain text: the
// generation prompt opens a think block, or with enable_thinking false
// writes an empty one, closed.
const thinkingTemplate = `{% for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}{% if add_generation_prompt %}assistant: {% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% else %}<think>
{% endif %}{% endif %}`

// thinkingModel is the synthetic model served with thinkingTemplate, or
// with lo's template where it names one.
func thinkingModel(t *testing.T, lo LoadOptions) *Model {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 2, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	if lo.Template.File == "" {
		lo.Template.File = filepath.Join(dir, "thinking.jinja")
		if err := os.WriteFile(lo.Template.File, []byte(thinkingTemplate), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return load(t, p, lo)
}

// TestReasoningDeepSeekR1: DeepSeek-R1's own template opens the think block
// at the generation prompt, so the reply is reasoning from its first token,
// streamed or not; an earlier turn's thoughts, sent back, are dropped by
// the template (its split on </think>), as the model was trained.
func TestReasoningDeepSeekR1(t *testing.T) {
	tp := shared.Models(t, "chat-templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")
	ts := start(t, thinkingModel(t, LoadOptions{Template: chattemplate.Choice{File: tp}}), Options{})
	raw := ts.chatReply(t, chatBody(`"reasoning_format": "none"`))
	wantR, wantC := refSplit(raw.Content, true)
	if wantR == "" {
		t.Fatalf("the raw reply %q holds no reasoning", raw.Content)
	}
	if got := ts.chatReply(t, chatBody("")); got.Reasoning != wantR || got.Content != wantC {
		t.Errorf("reasoning %q, content %q; want %q, %q", got.Reasoning, got.Content, wantR, wantC)
	}
	if got := ts.streamReply(t, chatBody(`"stream": true`)); got.Reasoning != wantR || got.Content != wantC {
		t.Errorf("streamed: reasoning %q, content %q; want %q, %q", got.Reasoning, got.Content, wantR, wantC)
	}
	history := func(reply string) int {
		b := `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ` + strconv.Quote(reply) +
			`}, {"role": "user", "content": "and?"}], "max_tokens": 1}`
		return ts.chatReply(t, b).PromptTokens
	}
	if with, without := history("<think>\nlong thoughts here\n</think>Fine."), history("Fine."); with != without {
		t.Errorf("a turn sent back with its thoughts makes a prompt of %d tokens, without %d: the template should drop them", with, without)
	}
}

// chatReply is what a test reads of a chat reply.
type chatReply struct {
	Reasoning, Content string
	PromptTokens       int
}

// chatBody is a greedy chat request of 16 tokens saying "hi", with extra
// fields.
func chatBody(extra string) string {
	b := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, "temperature": 0, "ignore_eos": true`
	if extra != "" {
		b += ", " + extra
	}
	return b + "}"
}

func (ts *testServer) chatReply(t *testing.T, body string) chatReply {
	t.Helper()
	code, b := ts.post(t, "/v1/chat/completions", body)
	var r struct {
		Choices []struct {
			Message map[string]any
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if code != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
		t.Fatalf("%s: %d %s", body, code, b)
	}
	msg := r.Choices[0].Message
	content, _ := msg["content"].(string)
	reasoning, has := msg["reasoning_content"].(string)
	if has && reasoning == "" {
		t.Errorf("%s: an empty reasoning_content is sent (want it left out): %s", body, b)
	}
	return chatReply{Reasoning: reasoning, Content: content, PromptTokens: r.Usage.PromptTokens}
}

// streamReply joins a streamed chat reply's deltas.
func (ts *testServer) streamReply(t *testing.T, body string) chatReply {
	t.Helper()
	resp, err := http.Post(ts.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", body, resp.StatusCode)
	}
	var out chatReply
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					Reasoning *string `json:"reasoning_content"`
				}
			}
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, ch := range c.Choices {
			if d := ch.Delta; d.Reasoning != nil {
				if *d.Reasoning == "" {
					t.Errorf("a chunk with an empty reasoning_content: %s", data)
				}
				out.Reasoning += *d.Reasoning
			}
			if d := ch.Delta; d.Content != nil {
				out.Content += *d.Content
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReasoningServer: with a template that opens a think block, the reply
// (random weights: never a </think>) is the reasoning, as llama.cpp's
// parser makes of the same text, which reasoning_format none shows raw;
// streamed, the deltas join to the same; chat_template_kwargs (the
// request's over the server's) reach the template, and with the block
// closed in the prompt the reply is content.
func TestReasoningServer(t *testing.T) {
	ts := start(t, thinkingModel(t, LoadOptions{}), Options{})
	tok := ts.m.Tokenizer
	openPrompt := len(tok.Encode("user: hi\nassistant: <think>\n", true))
	closedPrompt := len(tok.Encode("user: hi\nassistant: <think>\n\n</think>\n\n", true))

	raw := ts.chatReply(t, chatBody(`"reasoning_format": "none"`))
	if raw.Reasoning != "" || raw.Content == "" || raw.PromptTokens != openPrompt {
		t.Fatalf("reasoning_format none: %+v, want the raw reply in content after a %d-token prompt", raw, openPrompt)
	}
	wantR, wantC := refSplit(raw.Content, true)
	for _, f := range []string{``, `"reasoning_format": "deepseek"`, `"reasoning_format": "auto"`} {
		got := ts.chatReply(t, chatBody(f))
		if got.Reasoning != wantR || got.Content != wantC {
			t.Errorf("%s: reasoning %q, content %q; want %q, %q", f, got.Reasoning, got.Content, wantR, wantC)
		}
		if s := ts.streamReply(t, chatBody(f+sep(f)+`"stream": true`)); s.Reasoning != wantR || s.Content != wantC {
			t.Errorf("%s streamed: reasoning %q, content %q; want %q, %q", f, s.Reasoning, s.Content, wantR, wantC)
		}
	}

	off := `"chat_template_kwargs": {"enable_thinking": false}`
	closed := ts.chatReply(t, chatBody(off+`, "reasoning_format": "none"`))
	if closed.PromptTokens != closedPrompt {
		t.Errorf("enable_thinking false: a prompt of %d tokens, want %d (the block closed)", closed.PromptTokens, closedPrompt)
	}
	if got := ts.chatReply(t, chatBody(off)); got.Reasoning != "" || got.Content != closed.Content {
		t.Errorf("enable_thinking false: %+v, want the reply %q as content", got, closed.Content)
	}

	// A server default, overridden by a request.
	ts2 := start(t, thinkingModel(t, LoadOptions{TemplateKwargs: map[string]any{"enable_thinking": false}, Reasoning: ReasoningNone}), Options{})
	if got := ts2.chatReply(t, chatBody("")); got.PromptTokens != closedPrompt || got != closed {
		t.Errorf("--chat-template-kwargs enable_thinking false, --reasoning-format none: %+v, want %+v", got, closed)
	}
	if got := ts2.chatReply(t, chatBody(`"chat_template_kwargs": {"enable_thinking": true}`)); got != raw {
		t.Errorf("a request's enable_thinking over the server's: %+v, want %+v", got, raw)
	}

	// A constrained reply is the document: never split.
	js := ts.chatReply(t, `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, "temperature": 0, "response_format": {"type": "json_object"}}`)
	if js.Reasoning != "" || !strings.HasPrefix(strings.TrimLeft(js.Content, " \n"), "{") {
		t.Errorf("json_object under an open think block: %+v, want the JSON in content", js)
	}

	for _, c := range []struct{ extra, msg string }{
		{`"chat_template_kwargs": 3`, `"chat_template_kwargs": want an object`},
		{`"chat_template_kwargs": ["enable_thinking"]`, `"chat_template_kwargs": want an object`},
		{`"chat_template_kwargs": "x"`, `"chat_template_kwargs": want an object`},
		{`"chat_template_kwargs": {"add_generation_prompt": false}`, `"add_generation_prompt" is set by the server`},
		{`"reasoning_format": "deepseek-legacy"`, `"reasoning_format": reasoning format "deepseek-legacy"`},
		{`"reasoning_format": 1`, `"reasoning_format"`},
	} {
		code, b := ts.post(t, "/v1/chat/completions", chatBody(c.extra))
		checkError(t, c.extra, code, b, 400, c.msg)
	}
}

func sep(s string) string {
	if s == "" {
		return ""
	}
	return ", "
}

// TestMessageFields: a message is held to its fields as the request is to
// the field table; text parts are the text they hold.
func TestMessageFields(t *testing.T) {
	ts := start(t, tinyModel(t), Options{})
	chat := func(msgs string) string {
		return `{"messages": ` + msgs + `, "max_tokens": 8, "temperature": 0, "ignore_eos": true}`
	}
	for _, c := range []struct{ msgs, msg string }{
		{`[{"role": "user", "content": "a"}, {"role": "user", "content": "b", "foo": 1}]`, `"messages[1].foo": is not a field of a message`},
		{`[{"role": "user", "content": 5}]`, `"messages[0].content": want string or array or null, got number`},
		{`[{"role": 1, "content": "x"}]`, `"messages[0].role": want string, got number`},
		{`[{"role": "user", "content": "x", "name": {}}]`, `"messages[0].name": want string or null, got object`},
		{`["hi"]`, `"messages[0]": want an object`},
		{`[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}]`,
			`"messages[0].content[1]": "image_url" parts are not supported`},
		{`[{"role": "user", "content": [{"type": "text", "text": 3}]}]`, `"messages[0].content[0].text": want string, got number`},
		{`[{"role": "user", "content": [{"type": "text"}]}]`, `"messages[0].content[0]": a text part needs "text"`},
		{`[{"role": "user", "content": [{"type": "text", "text": "a", "extra": 1}]}]`, `"messages[0].content[0].extra": is not a field of a text part`},
		{`[{"role": "user", "content": ["a"]}]`, `"messages[0].content[0]": want a {"type": "text"`},
	} {
		code, b := ts.post(t, "/v1/chat/completions", chat(c.msgs))
		checkError(t, c.msgs, code, b, 400, c.msg)
	}

	// Text parts are their text joined; tool use's fields are allowed.
	want := ts.chatReply(t, chat(`[{"role": "user", "content": "Hello there"}]`))
	for _, msgs := range []string{
		`[{"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]}]`,
		`[{"role": "user", "content": "Hello there", "name": "ann"}]`,
	} {
		if got := ts.chatReply(t, chat(msgs)); got != want {
			t.Errorf("%s: %+v, want %+v", msgs, got, want)
		}
	}
	tools := `[{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},` +
		` {"role": "tool", "tool_call_id": "c1", "content": "1"}, {"role": "assistant", "content": "ok", "reasoning_content": "because"}, {"role": "user", "content": "y"}]`
	if code, b := ts.post(t, "/v1/chat/completions", chat(tools)); code != 200 {
		t.Errorf("a conversation with tool calls: %d %s", code, bytes.TrimSpace(b))
	}
}
