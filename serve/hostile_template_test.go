package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/model/synth"
)

// TestHostileTemplates serves a model whose chat template would, unbounded,
// overflow the stack, exhaust memory or spin for minutes: each chat request
// gets a server error naming the template, a conversation the template
// itself rejects gets 400, and the server goes on answering completions.
func TestHostileTemplates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 2, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, src string
		code      int
		msg       string
	}{
		{"recursive macro", `{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`, 500, "chat template"},
		{"range 1e8", `{% for i in range(100000000) %}{{ i }}{% endfor %}`, 500, "chat template"},
		{"nested range 20000", `{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}`, 500, "chat template"},
		{"doubling string", `{% set s = "xx" %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}{{ s }}`, 500, "chat template"},
		{"raise", `{{ raise_exception("roles must alternate") }}`, 400, "roles must alternate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "hostile.jinja")
			if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			ts := start(t, load(t, p, LoadOptions{Template: chattemplate.Choice{File: file}}), Options{})
			code, body := ts.post(t, "/v1/chat/completions",
				`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
			checkError(t, "chat", code, body, c.code, c.msg)
			if c.code == 500 && !strings.Contains(string(body), file) {
				t.Errorf("the error does not name the template %s: %s", file, body)
			}
			code, body = ts.post(t, "/v1/completions", `{"prompt": "Once", "max_tokens": 2, "temperature": 0}`)
			if code != 200 {
				t.Fatalf("completion after the hostile template: %d %s", code, body)
			}
			var r struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(body, &r); err != nil || r.Usage.CompletionTokens == 0 {
				t.Fatalf("completion after the hostile template: %s (%v)", body, err)
			}
		})
	}
}
