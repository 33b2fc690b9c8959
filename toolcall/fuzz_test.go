package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParse: any reply parses without a panic, each call's arguments are a
// JSON object, and a stream's held-back text never cuts into the content
// the whole reply parses to.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"name": "f", "parameters": {"a": 1}}`, "hi <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
		`[TOOL_CALLS][{"name": "f", "arguments": "{}"}]`, `{"tool_calls": [{"name": "f", "arguments": {}}]}`,
		`{"response": 1}`, "<tool_ca", "  {", "<|python_tag|>", `[{"name": "f", "arguments": {}}] x`,
	} {
		for fam := range 4 {
			f.Add(s, uint8(fam))
		}
	}
	f.Fuzz(func(t *testing.T, text string, fam uint8) {
		fm := Family(fam % 4)
		content, calls := fm.Parse(text)
		for _, c := range calls {
			var m map[string]any
			if json.Unmarshal([]byte(c.Arguments), &m) != nil || c.Name == "" {
				t.Fatalf("%v: %q: call %+v", fm, text, c)
			}
		}
		if len(calls) == 0 && fm != Generic && content != text {
			t.Fatalf("%v: %q: no call, content %q", fm, text, content)
		}
		for k := 0; k <= len(text); k++ {
			h := fm.Held(text[:k])
			if h < 0 || h > k || !strings.HasPrefix(content, text[:h]) {
				t.Fatalf("%v: Held(%q) = %d, the whole's content is %q", fm, text[:k], h, content)
			}
		}
	})
}

// FuzzGBNF: any parameters schema gives a grammar or an error, never a
// panic.
func FuzzGBNF(f *testing.F) {
	f.Add(`{"type": "object", "properties": {"a": {"type": "string"}}}`, "f", true)
	f.Add(`{"$defs": {"x": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/x"}}}`, "g_1", false)
	f.Add(`[`, "", true)
	f.Fuzz(func(t *testing.T, params, name string, parallel bool) {
		for fam := range 4 {
			_, _ = Grammar(Family(fam), []Tool{{Name: name, Parameters: json.RawMessage(params)}}, parallel)
		}
	})
}
