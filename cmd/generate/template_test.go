package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glint-llm/glint/internal/shared"
)

// TestTemplateCommandRecords: `generate template` prints, byte for byte,
// what Jinja2 renders for every record of expected_public.json, and exits 1
// with the template's own message for the one that raises.
func TestTemplateCommandRecords(t *testing.T) {
	dir := shared.Models(t, "chat-templates")
	b, err := os.ReadFile(filepath.Join(dir, "expected_public.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Records []struct {
			Template            string          `json:"template"`
			Messages            json.RawMessage `json:"messages"`
			AddGenerationPrompt bool            `json:"add_generation_prompt"`
			BOS                 string          `json:"bos_token"`
			EOS                 string          `json:"eos_token"`
			Kwargs              json.RawMessage `json:"chat_template_kwargs"`
			Expected            *string         `json:"expected"`
			ExpectedError       *string         `json:"expected_error"`
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for i, r := range f.Records {
		t.Run(filepath.Base(r.Template), func(t *testing.T) {
			msgs := filepath.Join(tmp, filepath.Base(r.Template)+".json")
			if err := os.WriteFile(msgs, r.Messages, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"template", "--chat-template-file", filepath.Join(filepath.Dir(dir), r.Template),
				"--messages", msgs, "--bos-token", r.BOS, "--eos-token", r.EOS}
			if len(r.Kwargs) > 0 {
				args = append(args, "--chat-template-kwargs", string(r.Kwargs))
			}
			if !r.AddGenerationPrompt {
				args = append(args, "--no-generation-prompt")
			}
			stdout, stderr, code := run(t, args...)
			if r.ExpectedError != nil {
				if code != 1 || stdout != "" || !strings.Contains(stderr, *r.ExpectedError) {
					t.Fatalf("record %d: exit %d, stdout %q, stderr %q; want exit 1 with %q", i, code, stdout, stderr, *r.ExpectedError)
				}
				return
			}
			if code != 0 {
				t.Fatalf("record %d: exit %d: %s", i, code, stderr)
			}
			if stdout != *r.Expected {
				t.Fatalf("record %d:\n got %q\nwant %q", i, stdout, *r.Expected)
			}
		})
	}
}

// TestTemplateCommandOwnConversations: the model's own template (from the
// GGUF, with its BOS) on conversations written here — unicode, template
// syntax in user text, with and without the generation prompt — against
// the Llama 3 format written out by hand.
func TestTemplateCommandOwnConversations(t *testing.T) {
	model := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	tmp := t.TempDir()
	msgs := filepath.Join(tmp, "m.json")
	conv := `[{"role":"system","content":"Réponds en français. 🙂"},{"role":"user","content":"{{ 7*7 }} {% raw %} and {# not a comment #}"},` +
		`{"role":"assistant","content":"  49?  "},{"role":"user","content":"日本語でどうぞ\nline two"}]`
	if err := os.WriteFile(msgs, []byte(conv), 0o644); err != nil {
		t.Fatal(err)
	}
	turn := func(role, content string) string {
		return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + content + "<|eot_id|>"
	}
	body := "<|begin_of_text|>" + turn("system", "Réponds en français. 🙂") + turn("user", "{{ 7*7 }} {% raw %} and {# not a comment #}") +
		turn("assistant", "49?") + turn("user", "日本語でどうぞ\nline two")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, body + "<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{[]string{"--no-generation-prompt"}, body},
		{[]string{"--bos-token", "<B>"}, strings.Replace(body, "<|begin_of_text|>", "<B>", 1) + "<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{[]string{"--chat-template", "llama3"}, body + "<|start_header_id|>assistant<|end_header_id|>\n\n"},
	} {
		stdout, stderr, code := run(t, append([]string{"template", "-m", model, "--messages", msgs}, c.args...)...)
		if code != 0 || stdout != c.want {
			t.Fatalf("%v: exit %d (%s)\n got %q\nwant %q", c.args, code, stderr, stdout, c.want)
		}
	}

	// Bad input: a clear message naming what is wrong, exit 1; no template
	// at all says how to choose one.
	bad := filepath.Join(tmp, "bad.json")
	os.WriteFile(bad, []byte(`{"role":"user"}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", model, "--messages", bad}, "messages"},
		{[]string{"-m", model, "--messages", filepath.Join(tmp, "missing.json")}, "missing.json"},
		{[]string{"--messages", msgs}, "--chat-template"},
		{[]string{"--chat-template", "vicuna", "--messages", msgs}, "vicuna"},
		{[]string{"-m", model, "--messages", msgs, "--chat-template-kwargs", "[1]"}, "--chat-template-kwargs"},
	} {
		stdout, stderr, code := run(t, append([]string{"template"}, c.args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "panic") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 naming %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// TestTemplateCommandHostile: a template that would crash or hang an
// unlimited interpreter makes `generate template` exit 1 with a message
// naming the template and the limit, without a stack trace, within 20 s.
func TestTemplateCommandHostile(t *testing.T) {
	dir := t.TempDir()
	msgs := filepath.Join(dir, "msgs.json")
	if err := os.WriteFile(msgs, []byte(`[{"role":"user","content":"hi"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, src, want string }{
		{"macro", `{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`, "depth limit"},
		{"range", `{% for i in range(100000000) %}{% endfor %}`, "steps limit"},
		{"nested", `{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}`, "limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, c.name+".jinja")
			if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out, errOut, code := run(t, "template", "--chat-template-file", file, "--messages", msgs)
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
			if code != 1 || out != "" || !strings.Contains(errOut, "chat template "+file) ||
				!strings.Contains(errOut, c.want) || strings.Contains(errOut, "goroutine") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 naming the template and %q", code, out, errOut, c.want)
			}
		})
	}
	// Python's "x" * -1 is "": the template renders.
	file := filepath.Join(dir, "neg.jinja")
	if err := os.WriteFile(file, []byte(`[{{ "x" * -1 }}{{ messages[0].content }}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "template", "--chat-template-file", file, "--messages", msgs)
	if code != 0 || out != "[hi]" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want [hi]", code, out, errOut)
	}
}
