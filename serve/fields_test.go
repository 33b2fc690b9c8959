package serve

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestFieldTable: the table's implemented fields are exactly what each
// route's request type reads, every name is in the table once per route,
// and docs/serving.md shows the table as it is.
func TestFieldTable(t *testing.T) {
	for _, c := range []struct {
		ep  endpoint
		typ reflect.Type
	}{{chatEP, reflect.TypeFor[chatRequest]()}, {completionsEP, reflect.TypeFor[completionRequest]()}} {
		var table []string
		seen := map[string]bool{}
		for _, r := range requestFields {
			if r.in&c.ep == 0 {
				continue
			}
			if seen[r.name] {
				t.Errorf("%v: %q is in the table twice", c.ep, r.name)
			}
			seen[r.name] = true
			if r.use == implemented {
				table = append(table, r.name)
			}
			if r.use == ignored && r.why == "" {
				t.Errorf("%v: %q is ignored without a reason", c.ep, r.name)
			}
		}
		read := jsonFields(c.typ)
		slices.Sort(table)
		slices.Sort(read)
		if !slices.Equal(table, read) {
			t.Errorf("%v: the table implements\n%q, the request type reads\n%q", c.ep, table, read)
		}
	}
	doc, err := os.ReadFile("../docs/serving.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), fieldTable()) {
		t.Errorf("docs/serving.md lacks the field table as it is now:\n%s", fieldTable())
	}
}

// TestNeutralFields: a refused field's default value, or null, is
// accepted (an ignored field with any value too); anything else is a 400
// naming it.
func TestNeutralFields(t *testing.T) {
	ts := start(t, tinyModel(t), Options{})
	chat := `{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1, `
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{chat + `"tools": null}`, true},
		{chat + `"tools": []}`, true},
		{chat + `"tool_choice": "none"}`, true},
		{chat + `"functions": [{"name": "f"}]}`, false},
		{chat + `"response_format": {"type": "text"}}`, true},
		{chat + `"n": 1.0}`, true},
		{chat + `"n": 3}`, false},
		{chat + `"store": false, "metadata": {"a": "b"}, "user": "u", "parallel_tool_calls": true, "service_tier": "auto"}`, true},
		{chat + `"modalities": ["text"]}`, true},
		{chat + `"modalities": ["text", "audio"]}`, false},
		{chat + `"presence_penalty": 0, "frequency_penalty": 0}`, true},
		{chat + `"frequency_penalty": 0.1}`, false},
		{chat + `"cache_prompt": false}`, true},
		{`{"prompt": "x", "max_tokens": 1, "echo": false, "best_of": 1, "suffix": ""}`, true},
		{`{"prompt": "x", "max_tokens": 1, "suffix": "end"}`, false},
	} {
		path := "/v1/chat/completions"
		if strings.Contains(c.body, `"prompt"`) {
			path = "/v1/completions"
		}
		code, b := ts.post(t, path, c.body)
		if c.ok && code != 200 {
			t.Errorf("%s: %d %s, want 200", c.body, code, b)
		}
		if !c.ok && (code != 400 || !strings.Contains(string(b), "is not supported")) {
			t.Errorf("%s: %d %s, want a 400 saying what is not supported", c.body, code, b)
		}
	}
}
