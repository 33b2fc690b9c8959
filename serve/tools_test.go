package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	oshared "github.com/openai/openai-go/v3/shared"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/internal/shared"
)

// llama32Tools is llama3-tiny (random weights) served with the staged
// Llama 3.2 Instruct template.
func llama32Tools(t *testing.T) *testServer {
	return toolServer(t, "meta-llama-Llama-3.2-3B-Instruct.jinja")
}

// toolServer is llama3-tiny served with a staged template.
func toolServer(t *testing.T, template string) *testServer {
	t.Helper()
	path := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	tmpl := shared.Models(t, "chat-templates/"+template)
	return start(t, load(t, path, LoadOptions{Template: chattemplate.Choice{File: tmpl},
		TemplateKwargs: map[string]any{"date_string": "26 Jul 2024"}}), Options{})
}

var weatherTool = openai.ChatCompletionFunctionTool(oshared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: openai.String("The weather in a city over the next days"),
	Parameters: oshared.FunctionParameters{
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string", "maxLength": 12},
			"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
			"unit": map[string]any{"enum": []any{"C", "F"}},
		},
		"required":             []any{"city", "days"},
		"additionalProperties": false,
	},
})

var timeTool = openai.ChatCompletionFunctionTool(oshared.FunctionDefinitionParam{
	Name:       "get_time",
	Parameters: oshared.FunctionParameters{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string", "maxLength": 6}}, "additionalProperties": false},
})

// checkCall holds a call to the tools' schemas, by hand.
func checkCall(t *testing.T, name, args string) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatalf("%s: arguments %q are not a JSON object: %v", name, args, err)
	}
	switch name {
	case "get_weather":
		city, ok := v["city"].(string)
		days, ok2 := v["days"].(float64)
		if !ok || len([]rune(city)) > 12 || !ok2 || days != float64(int(days)) || days < 1 || days > 7 {
			t.Errorf("get_weather: arguments %s break the schema", args)
		}
		if u, ok := v["unit"]; ok && u != "C" && u != "F" {
			t.Errorf("get_weather: unit %v", u)
		}
		for k := range v {
			if k != "city" && k != "days" && k != "unit" {
				t.Errorf("get_weather: extra argument %q", k)
			}
		}
	case "get_time":
		for k, x := range v {
			if s, ok := x.(string); k != "zone" || !ok || len([]rune(s)) > 6 {
				t.Errorf("get_time: arguments %s break the schema", args)
			}
		}
	default:
		t.Errorf("a call to %q, not a tool", name)
	}
}

// TestToolChoiceRequired: with tool_choice required or a named function,
// a random-weight model sampled at temperature 1 calls tools (the named
// one) with arguments valid under their schemas, finish_reason
// tool_calls; whole and streamed (reassembled by openai-go's
// accumulator), in each family's syntax: Llama 3.2's (the staged
// template; one call), Qwen 2.5's (Hermes), Mistral Nemo's, Gemma 3's
// (generic). Parallel calls are off but for Llama (whose grammar writes one
// call anyway): a random model, once a repetition of calls is open, rarely
// ends it (toolcall's tests hold the grammars of several calls).
func TestToolChoiceRequired(t *testing.T) {
	ctx := context.Background()
	named := openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
	for _, tmpl := range []string{"meta-llama-Llama-3.2-3B-Instruct.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
		"mistralai-Mistral-Nemo-Instruct-2407.jinja", "google-gemma-3-270m-it.jinja"} {
		ts := toolServer(t, tmpl)
		for _, choice := range []struct {
			name string
			tc   openai.ChatCompletionToolChoiceOptionUnionParam
		}{{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}, {"named", named}} {
			for seed := int64(1); seed <= 3; seed++ {
				what := fmt.Sprintf("%s %s seed %d", tmpl, choice.name, seed)
				p := openai.ChatCompletionNewParams{Model: "any", Seed: openai.Int(seed), Temperature: openai.Float(1), MaxTokens: openai.Int(600),
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
					Tools:    []openai.ChatCompletionToolUnionParam{weatherTool, timeTool}, ToolChoice: choice.tc}
				one := seed == 3 || !strings.HasPrefix(tmpl, "meta-llama")
				if one {
					p.ParallelToolCalls = openai.Bool(false)
				}
				got, err := ts.client.Chat.Completions.New(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				ch := got.Choices[0]
				if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) == 0 || ch.Message.Content != "" {
					t.Fatalf("%s: finish %q, content %q, calls %+v", what, ch.FinishReason, ch.Message.Content, ch.Message.ToolCalls)
				}
				if one && len(ch.Message.ToolCalls) != 1 {
					t.Errorf("%s: parallel_tool_calls false, %d calls", what, len(ch.Message.ToolCalls))
				}
				for _, call := range ch.Message.ToolCalls {
					if call.ID == "" || call.Type != "function" {
						t.Errorf("%s: id %q type %q", what, call.ID, call.Type)
					}
					if choice.name == "named" && call.Function.Name != "get_weather" {
						t.Errorf("%s: a call to %q", what, call.Function.Name)
					}
					t.Logf("%s: %s(%s)", what, call.Function.Name, call.Function.Arguments)
					checkCall(t, call.Function.Name, call.Function.Arguments)
				}

				// The same request streamed gives the same calls.
				stream := ts.client.Chat.Completions.NewStreaming(ctx, p)
				var acc openai.ChatCompletionAccumulator
				for stream.Next() {
					acc.AddChunk(stream.Current())
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				sc := acc.Choices[0]
				if sc.FinishReason != "tool_calls" || len(sc.Message.ToolCalls) != len(ch.Message.ToolCalls) || sc.Message.Content != "" {
					t.Fatalf("%s streamed: finish %q, content %q, calls %+v", what, sc.FinishReason, sc.Message.Content, sc.Message.ToolCalls)
				}
				for i, c := range sc.Message.ToolCalls {
					if w := ch.Message.ToolCalls[i].Function; c.Function.Name != w.Name || c.Function.Arguments != w.Arguments {
						t.Errorf("%s: streamed %s(%s), whole %s(%s)", what, c.Function.Name, c.Function.Arguments, w.Name, w.Arguments)
					}
					checkCall(t, c.Function.Name, c.Function.Arguments)
				}
			}
		}
	}
}

// TestToolHistory: an assistant's call and the tool's result in the
// history reach the template: the rendered prompt holds the call with
// its arguments as an object (not a quoted string), the result and the
// tools; the server's prompt is that many tokens, and the request runs.
func TestToolHistory(t *testing.T) {
	ts := llama32Tools(t)
	body := `{"messages": [{"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "22 C and sunny"}],
 "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
 "max_tokens": 2, "temperature": 0}`
	var c chatRequest
	if err := decodeJSON([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	var r Request
	if err := c.useTools(&r, ts.m); err != nil {
		t.Fatal(err)
	}
	ids, err := c.prompt(context.Background(), ts.m)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, id := range ids {
		text.Write(ts.m.Tokenizer.SpecialPiece(id))
	}
	for _, want := range []string{
		"Environment: ipython\n",
		`"name": "get_weather"`,
		"<|start_header_id|>assistant<|end_header_id|>\n\n" + `{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}<|eot_id|>`,
		"<|start_header_id|>ipython<|end_header_id|>\n\n\"22 C and sunny\"<|eot_id|>",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the prompt lacks %q:\n%s", want, text.String())
		}
	}
	code, b := ts.post(t, "/v1/chat/completions", body)
	var rp struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &rp) != nil || rp.Usage.PromptTokens != len(ids) {
		t.Errorf("status %d, %s; want 200 and %d prompt tokens", code, b, len(ids))
	}
}

// TestToolErrors: tool fields that are wrong get a 400 naming them.
func TestToolErrors(t *testing.T) {
	ts := llama32Tools(t)
	const msgs = `"messages": [{"role": "user", "content": "x"}]`
	const tool = `"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]`
	for _, tc := range []struct{ body, want string }{
		{`{` + msgs + `, "tools": {}}`, `"tools": want an array`},
		{`{` + msgs + `, "tools": [{"type": "web"}]}`, `"tools[0]": want {"type": "function"`},
		{`{` + msgs + `, "tools": [{"type": "function", "function": {"name": "a b"}}]}`, `function name "a b"`},
		{`{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]}`, `function "f" is given twice`},
		{`{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]}`, `want a JSON Schema object`},
		{`{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)"}}}}}], "tool_choice": "required"}`, `pattern`},
		{`{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}], "tool_choice": "required"}`, `want "object"`},
		{`{` + msgs + `, "tool_choice": "required"}`, `"tool_choice": "required" needs "tools"`},
		{`{` + msgs + `, ` + tool + `, "tool_choice": "sometimes"}`, `"tool_choice": "sometimes"`},
		{`{` + msgs + `, ` + tool + `, "tool_choice": "required", "ignore_eos": true}`, `"ignore_eos"`},
		{`{` + msgs + `, ` + tool + `, "response_format": {"type": "json_object"}}`, `"response_format" and "tools"`},
		{`{"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}]}`, `"messages[0].tool_calls[0].function.arguments": want a string of JSON`},
		{`{"messages": [{"role": "assistant", "tool_calls": {}}]}`, `"messages[0].tool_calls": want an array`},
		{`{"messages": [{"role": "tool", "tool_call_id": 5, "content": "x"}]}`, `"messages[0].tool_call_id": want string or null, got number`},
	} {
		code, b := ts.post(t, "/v1/chat/completions", tc.body)
		checkError(t, tc.body, code, b, http.StatusBadRequest, tc.want)
	}
}

// TestToolAutoStream: with tool_choice auto the reply is free; streamed,
// with text held back while it may open a call, it is the whole reply's
// text and finish reason.
func TestToolAutoStream(t *testing.T) {
	ts := llama32Tools(t)
	ctx := context.Background()
	for seed := int64(1); seed <= 3; seed++ {
		p := openai.ChatCompletionNewParams{Model: "any", Seed: openai.Int(seed), Temperature: openai.Float(1), MaxTokens: openai.Int(24),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")},
			Tools:    []openai.ChatCompletionToolUnionParam{weatherTool}}
		got, err := ts.client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		stream := ts.client.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		w, s := got.Choices[0], acc.Choices[0]
		if w.Message.Content != s.Message.Content || w.FinishReason != s.FinishReason || len(w.Message.ToolCalls) != len(s.Message.ToolCalls) {
			t.Errorf("seed %d: whole %q (%s, %d calls), streamed %q (%s, %d calls)", seed, w.Message.Content, w.FinishReason,
				len(w.Message.ToolCalls), s.Message.Content, s.FinishReason, len(s.Message.ToolCalls))
		}
	}
}
