package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/grammar"
	"github.com/glint-llm/glint/internal/shared"
)

// TestDetect: each staged real template's family, as llama.cpp's
// common_chat_params_init picks its format.
func TestDetect(t *testing.T) {
	dir := shared.Models(t, "chat-templates")
	for file, want := range map[string]Family{
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": Hermes,
		"Qwen-Qwen2.5-7B-Instruct.jinja":                    Hermes,
		"meta-llama-Llama-3.1-8B-Instruct.jinja":            Llama3,
		"meta-llama-Llama-3.2-3B-Instruct.jinja":            Llama3,
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":        Mistral,
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja":    Generic,
		"google-gemma-2-2b-it.jinja":                        Generic,
		"google-gemma-3-270m-it.jinja":                      Generic,
		"microsoft-Phi-3.5-mini-instruct.jinja":             Generic,
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := Detect(string(b)); got != want {
			t.Errorf("%s: %v, want %v", file, got, want)
		}
	}
}

// TestParse: replies as the families' models write them.
func TestParse(t *testing.T) {
	weather := Call{Name: "get_weather", Arguments: `{"city":"Paris","days":2}`}
	clock := Call{Name: "time", Arguments: `{}`}
	for _, tc := range []struct {
		name    string
		f       Family
		text    string
		content string
		calls   []Call
	}{
		{"llama3 plain", Llama3, `{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}`, "", []Call{weather}},
		{"llama3 typed, python tag", Llama3, `<|python_tag|>{"type": "function", "name": "get_weather", "parameters": {"city": "Paris", "days": 2}}`, "", []Call{weather}},
		{"llama3 arguments key, spaces", Llama3, "\n {\n  \"name\": \"get_weather\",\n  \"arguments\": {\"city\": \"Paris\", \"days\": 2}\n}\n", "", []Call{weather}},
		{"llama3 two", Llama3, `{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}; {"name": "time", "parameters": {}}`, "", []Call{weather, clock}},
		{"llama3 stringified arguments", Llama3, `{"name": "get_weather", "parameters": "{\"city\": \"Paris\", \"days\": 2}"}`, "", []Call{weather}},
		{"llama3 text", Llama3, "The weather is fine.", "The weather is fine.", nil},
		{"llama3 text then JSON", Llama3, `Sure: {"name": "time", "parameters": {}}`, `Sure: {"name": "time", "parameters": {}}`, nil},
		{"llama3 unfinished", Llama3, `{"name": "get_weather", "parameters": {"city": "Par`, `{"name": "get_weather", "parameters": {"city": "Par`, nil},
		{"llama3 not a call", Llama3, `{"a": 1}`, `{"a": 1}`, nil},
		{"llama3 other type", Llama3, `{"type": "x", "name": "time", "parameters": {}}`, `{"type": "x", "name": "time", "parameters": {}}`, nil},
		{"llama3 array arguments", Llama3, `{"name": "time", "parameters": [1]}`, `{"name": "time", "parameters": [1]}`, nil},
		{"llama3 trailing text", Llama3, `{"name": "time", "parameters": {}} done`, `{"name": "time", "parameters": {}} done`, nil},

		{"hermes one", Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>", "", []Call{weather}},
		{"hermes content and two", Hermes, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call>\n", "Let me check.", []Call{weather, clock}},
		{"hermes text", Hermes, "no calls <here>", "no calls <here>", nil},
		{"hermes unclosed", Hermes, "x <tool_call>{\"name\": \"time\", \"arguments\": {}}", "x <tool_call>{\"name\": \"time\", \"arguments\": {}}", nil},
		{"hermes text after", Hermes, "<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call> and more", "<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call> and more", nil},
		{"hermes bad JSON", Hermes, "<tool_call>{\"name\": time}</tool_call>", "<tool_call>{\"name\": time}</tool_call>", nil},

		{"mistral tagged", Mistral, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}, "id": "abcDEF123"}]`, "", []Call{weather}},
		{"mistral bare two", Mistral, ` [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}, {"name": "time", "arguments": {}}]`, "", []Call{weather, clock}},
		{"mistral empty", Mistral, `[]`, `[]`, nil},
		{"mistral text", Mistral, `[1] is a footnote`, `[1] is a footnote`, nil},

		{"generic call", Generic, `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}`, "", []Call{weather}},
		{"generic calls", Generic, `{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}, "id": "c1"}, {"name": "time", "arguments": {}}]}`, "", []Call{weather, clock}},
		{"generic response", Generic, `{"response": "It is sunny."}`, "It is sunny.", nil},
		{"generic response object", Generic, `{"response": {"a": 1}}`, `{"a": 1}`, nil},
		{"generic text", Generic, `It is sunny.`, `It is sunny.`, nil},
		{"generic other object", Generic, `{"x": 1}`, `{"x": 1}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content, calls := tc.f.Parse(tc.text)
			if content != tc.content || !reflect.DeepEqual(calls, tc.calls) {
				t.Errorf("Parse(%q) = %q, %+v; want %q, %+v", tc.text, content, calls, tc.content, tc.calls)
			}
			checkHeld(t, tc.f, tc.text)
		})
	}
}

// checkHeld: at every byte of text, what Held lets a stream send is the
// start of the content Parse finds in the whole.
func checkHeld(t *testing.T, f Family, text string) {
	t.Helper()
	content, _ := f.Parse(text)
	for k := 0; k <= len(text); k++ {
		h := f.Held(text[:k])
		if h < 0 || h > k || !strings.HasPrefix(content, text[:h]) {
			t.Fatalf("%v: Held(%q) = %d, but the whole's content is %q", f, text[:k], h, content)
		}
	}
}

var tools = []Tool{
	{Name: "get_weather", Description: "The weather in a city", Parameters: json.RawMessage(`{"type": "object",
	 "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 7}, "unit": {"$ref": "#/$defs/unit"}},
	 "required": ["city", "days"], "$defs": {"unit": {"enum": ["C", "F"]}}}`)},
	{Name: "time", Parameters: json.RawMessage(`{"type": "object", "properties": {}}`)},
}

// accepts reports whether g takes text whole.
func accepts(g *grammar.Grammar, text string) bool {
	m := grammar.NewMatcher(g, nil)
	return m.Accept([]byte(text)) == nil && m.IsComplete()
}

// TestGrammar: the required-call grammar of each family takes the calls
// the family's template writes (an independent spelling), rejects
// arguments against the schema, a wrong name and a second call where
// parallel calls are off; and every call it takes parses back.
func TestGrammar(t *testing.T) {
	for _, tc := range []struct {
		f        Family
		parallel bool
		good     []string
		bad      []string
	}{
		{Llama3, true,
			[]string{`{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}`, `{"name": "get_weather", "parameters": {"city": "Paris", "days": 7, "unit": "F"}}`, `{"name": "time", "parameters": {}}`},
			[]string{`{"name": "get_weather", "parameters": {"city": "Paris", "days": 8}}`, `{"name": "get_weather", "parameters": {"city": "Paris"}}`,
				`{"name": "get_weather", "parameters": {"city": "Paris", "days": 2, "unit": "K"}}`, `{"name": "other", "parameters": {}}`,
				`{"name": "time", "parameters": {}}; {"name": "time", "parameters": {}}`, `{"name": "time", "arguments": {}}`}},
		{Hermes, true,
			[]string{"<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n</tool_call>", "<tool_call>\n{\"name\": \"time\", \"arguments\": {}}</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 1}}</tool_call>"},
			[]string{"{\"name\": \"time\", \"arguments\": {}}", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome and its whole province\", \"days\": 1}}</tool_call>"}},
		{Hermes, false,
			[]string{"<tool_call>\n{\"name\": \"time\", \"arguments\": {}}</tool_call>"},
			[]string{"<tool_call>\n{\"name\": \"time\", \"arguments\": {}}</tool_call>\n<tool_call>\n{\"name\": \"time\", \"arguments\": {}}</tool_call>"}},
		{Mistral, true,
			[]string{`[{"name": "time", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}]`},
			[]string{`[]`, `[{"name": "time"}]`, `[{"name": "get_weather", "arguments": {"city": "Oslo", "days": "3"}}]`}},
		{Mistral, false,
			[]string{`[{"name": "time", "arguments": {}}]`},
			[]string{`[{"name": "time", "arguments": {}}, {"name": "time", "arguments": {}}]`}},
		{Generic, true,
			[]string{`{"tool_calls": [{"name": "time", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}]}`},
			[]string{`{"tool_calls": []}`, `{"tool_call": {"name": "time", "arguments": {}}}`, `{"response": "hi"}`}},
		{Generic, false,
			[]string{`{"tool_call": {"name": "time", "arguments": {}}}`},
			[]string{`{"tool_calls": [{"name": "time", "arguments": {}}]}`}},
	} {
		g, err := Grammar(tc.f, tools, tc.parallel)
		if err != nil {
			t.Fatalf("%v: %v", tc.f, err)
		}
		for _, s := range tc.good {
			if !accepts(g, s) {
				t.Errorf("%v parallel=%v: rejects %q\n%s", tc.f, tc.parallel, s, g)
			}
			if _, calls := tc.f.Parse(s); len(calls) == 0 {
				t.Errorf("%v: %q, which the grammar takes, parses to no call", tc.f, s)
			}
		}
		for _, s := range tc.bad {
			if accepts(g, s) {
				t.Errorf("%v parallel=%v: takes %q", tc.f, tc.parallel, s)
			}
		}
	}
}

func TestGrammarErrors(t *testing.T) {
	for _, tc := range []struct {
		tools []Tool
		want  string
	}{
		{nil, "no tools"},
		{[]Tool{{Name: "a b"}}, `function name "a b"`},
		{[]Tool{{Name: "f", Parameters: json.RawMessage(`[1]`)}}, "want a JSON Schema object"},
		{[]Tool{{Name: "f", Parameters: json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}`)}}, "pattern"},
		{[]Tool{{Name: "f", Parameters: json.RawMessage(`{"type": "string"}`)}}, "want \"object\""},
		{[]Tool{{Name: "f", Parameters: json.RawMessage(`{"$defs": {"a": {"type": "string"}}}`)},
			{Name: "g", Parameters: json.RawMessage(`{"$defs": {"a": {"type": "integer"}}}`)}}, "differs"},
	} {
		_, err := Grammar(Hermes, tc.tools, true)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.tools, err, tc.want)
		}
	}
}

// TestTemplatesRoundTrip: a conversation holding a call, rendered by each
// family's real template, spells the call in a way Parse reads back.
func TestTemplatesRoundTrip(t *testing.T) {
	dir := shared.Models(t, "chat-templates")
	args := `{"city": "Paris", "days": 2}`
	for file, cut := range map[string][2]string{
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": {"<|im_start|>assistant\n", "<|im_end|>"},
		"Qwen-Qwen2.5-7B-Instruct.jinja":                    {"<|im_start|>assistant\n", "<|im_end|>"},
		"meta-llama-Llama-3.1-8B-Instruct.jinja":            {"<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
		"meta-llama-Llama-3.2-3B-Instruct.jinja":            {"<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":        {"[/INST]", "</s>"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := chattemplate.Parse(string(b), file)
		if err != nil {
			t.Fatal(err)
		}
		msgs := json.RawMessage(`[{"role": "user", "content": "Weather in Paris?"},
 {"role": "assistant", "content": "", "tool_calls": [{"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": ` + args + `}}]}]`)
		out, err := tmpl.Render(context.Background(), chattemplate.Input{Messages: msgs, BOS: "<s>", EOS: "</s>",
			Kwargs: map[string]any{"date_string": "26 Jul 2024"}})
		var re *chattemplate.RaiseError
		if errors.As(err, &re) || err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		i := strings.LastIndex(out, cut[0])
		if i < 0 {
			t.Fatalf("%s: no %q in %q", file, cut[0], out)
		}
		reply, _, _ := strings.Cut(out[i+len(cut[0]):], cut[1])
		f := Detect(string(b))
		content, calls := f.Parse(reply)
		if content != "" || len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"city":"Paris","days":2}` {
			t.Errorf("%s (%v): %q parses to %q, %+v", file, f, reply, content, calls)
		}
	}
}
