package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glint-llm/glint/internal/shared"
)

// record is one entry of expected_public.json: Jinja2's rendering, set up as
// transformers sets it up, of llama.cpp's test conversation.
type record struct {
	Template            string          `json:"template"`
	Messages            json.RawMessage `json:"messages"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	BOS                 string          `json:"bos_token"`
	EOS                 string          `json:"eos_token"`
	Kwargs              json.RawMessage `json:"chat_template_kwargs"`
	Expected            *string         `json:"expected"`
	ExpectedError       *string         `json:"expected_error"`
}

func loadRecords(t *testing.T) (string, []record) {
	t.Helper()
	dir := shared.Models(t, "chat-templates")
	b, err := os.ReadFile(filepath.Join(dir, "expected_public.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Records []record }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Records) == 0 {
		t.Fatal("expected_public.json: no records")
	}
	return filepath.Dir(dir), f.Records
}

func kwargs(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestRecordsMatchJinja2(t *testing.T) {
	root, recs := loadRecords(t)
	for _, r := range recs {
		t.Run(filepath.Base(r.Template), func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(root, r.Template))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := Parse(string(src), r.Template)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(context.Background(), Input{Messages: r.Messages, AddGenerationPrompt: r.AddGenerationPrompt,
				BOS: r.BOS, EOS: r.EOS, Kwargs: kwargs(t, r.Kwargs)})
			if r.ExpectedError != nil {
				var re *RaiseError
				if !errors.As(err, &re) || re.Msg != *r.ExpectedError {
					t.Fatalf("got %q, %v; want the template's error %q", got, err, *r.ExpectedError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Expected == nil {
				t.Fatal("record has neither expected nor expected_error")
			}
			if got != *r.Expected {
				t.Fatalf("rendering differs from Jinja2's\n got %q\nwant %q", got, *r.Expected)
			}
		})
	}
}

// TestBuiltinsMatchModelTemplates renders the records' conversation with
// each built-in and compares with the model template it imitates, which
// Jinja2 rendered.
func TestBuiltinsMatchModelTemplates(t *testing.T) {
	root, recs := loadRecords(t)
	byBase := map[string]record{}
	for _, r := range recs {
		byBase[filepath.Base(r.Template)] = r
	}
	for _, c := range []struct{ builtin, template string }{
		{"chatml", "Qwen-Qwen2.5-7B-Instruct.jinja"}, // the conversation has a system message, so Qwen adds none
		{"gemma", "google-gemma-3-270m-it.jinja"},
		{"phi3", "microsoft-Phi-3.5-mini-instruct.jinja"},
		{"mistral", "mistralai-Mistral-Nemo-Instruct-2407.jinja"},
	} {
		t.Run(c.builtin, func(t *testing.T) {
			r, ok := byBase[c.template]
			if !ok || r.Expected == nil {
				t.Skipf("no record for %s", c.template)
			}
			_ = root
			b, err := Builtin(c.builtin)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.Render(context.Background(), Input{Messages: r.Messages, AddGenerationPrompt: r.AddGenerationPrompt, BOS: r.BOS, EOS: r.EOS})
			if err != nil {
				t.Fatal(err)
			}
			if got != *r.Expected {
				t.Fatalf("built-in %s differs from %s\n got %q\nwant %q", c.builtin, c.template, got, *r.Expected)
			}
		})
	}
}

// TestBuiltinLlama3MatchesGGUF compares the llama3 built-in with the
// template the llama3-tiny GGUF carries (Meta's Llama 3 Instruct one) on
// conversations with and without a generation prompt.
func TestBuiltinLlama3MatchesGGUF(t *testing.T) {
	mt, err := FromModel(shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if mt.Source == "" || mt.BOS != "<|begin_of_text|>" {
		t.Fatalf("llama3-tiny: template %d bytes, bos %q; want a template and <|begin_of_text|>", len(mt.Source), mt.BOS)
	}
	model, err := Parse(mt.Source, mt.Origin)
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := Builtin("llama3")
	if err != nil {
		t.Fatal(err)
	}
	for _, msgs := range conversations {
		for _, agp := range []bool{true, false} {
			in := Input{Messages: msgs, AddGenerationPrompt: agp, BOS: mt.BOS, EOS: mt.EOS}
			want, err := model.Render(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := builtin.Render(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("agp=%v: built-in llama3\n got %q\nwant %q", agp, got, want)
			}
		}
	}
}

var conversations = [][]Message{
	{{"user", "Hello"}},
	{{"system", "Be brief."}, {"user", "Grüße aus Köln — 你好 👋"}, {"assistant", "  Hallo!  "}, {"user", "{{ 7*7 }} {% if x %}y{% endif %}"}},
}

// TestBuiltinsPlausible checks each built-in on conversations written here:
// every message's text appears literally (template syntax in user text
// stays text), in order, and the generation prompt is the only difference
// add_generation_prompt makes.
func TestBuiltinsPlausible(t *testing.T) {
	for _, name := range Builtins {
		b, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, msgs := range conversations {
			in := Input{Messages: msgs, AddGenerationPrompt: true, BOS: "<BOS>", EOS: "<EOS>"}
			with, err := b.Render(context.Background(), in)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			in.AddGenerationPrompt = false
			without, err := b.Render(context.Background(), in)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			at := 0
			for _, m := range msgs {
				if m.Role == "system" && name == "mistral" { // Mistral puts it before the last user message
					if !strings.Contains(with, m.Content+"\n\n"+msgs[len(msgs)-1].Content) {
						t.Fatalf("%s: system message not before the last user message in %q", name, with)
					}
					continue
				}
				i := strings.Index(with[at:], strings.TrimSpace(m.Content))
				if i < 0 {
					t.Fatalf("%s: %q missing or out of order in %q", name, m.Content, with)
				}
				at += i
			}
			if with == without || !strings.HasPrefix(with, strings.TrimSuffix(without, "<EOS>")) {
				if name != "mistral" { // Mistral's templates have no generation prompt
					t.Fatalf("%s: add_generation_prompt\n with %q\n without %q", name, with, without)
				}
			}
		}
	}
	if _, err := Builtin("nope"); err == nil || !strings.Contains(err.Error(), "chatml") {
		t.Fatalf("unknown built-in: %v", err)
	}
}

func TestHelpers(t *testing.T) {
	tmpl, err := Parse(`{{ messages | tojson }}|{{ strftime_now("%Y") }}|{{ greeting }}|{{ raise_exception("no " + who) if who }}`, "test")
	if err != nil {
		t.Fatal(err)
	}
	msgs := json.RawMessage(`[{"role":"user","content":"é ü 你好 <tag> & \"q\"","n":1,"f":1.5}]`)
	got, err := tmpl.Render(context.Background(), Input{Messages: msgs, Kwargs: map[string]any{"greeting": "hi", "who": ""}})
	if err != nil {
		t.Fatal(err)
	}
	// Python: json.dumps(..., ensure_ascii=False) keeps key order and writes
	// ", " and ": " separators.
	want := `[{"role": "user", "content": "é ü 你好 <tag> & \"q\"", "n": 1, "f": 1.5}]|` + time.Now().Format("2006") + `|hi|`
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	_, err = tmpl.Render(context.Background(), Input{Messages: msgs, Kwargs: map[string]any{"who": "way"}})
	var re *RaiseError
	if !errors.As(err, &re) || re.Msg != "no way" {
		t.Fatalf("raise_exception: %v", err)
	}
	for _, bad := range []string{`{"role":"user"}`, `[1]`, `[{"content":"x"}]`, `[{"role":"user"}] x`, `[`} {
		if _, err := tmpl.Render(context.Background(), Input{Messages: json.RawMessage(bad)}); err == nil || errors.As(err, &re) {
			t.Errorf("messages %s: want a clear input error, got %v", bad, err)
		}
	}
	if _, err := tmpl.Render(context.Background(), Input{Kwargs: map[string]any{"messages": 1}}); err == nil {
		t.Error("kwarg messages accepted")
	}
	if _, err := Parse("{% if %}", "bad"); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("bad template: %v", err)
	}
}

func TestTrimAndLstripBlocks(t *testing.T) {
	// Jinja2 with trim_blocks and lstrip_blocks renders this as "A\nB\n".
	tmpl, err := Parse("{% for x in ['A', 'B'] %}\n    {% if x %}\n{{ x }}\n    {% endif %}\n{% endfor %}\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(context.Background(), Input{})
	if err != nil {
		t.Fatal(err)
	}
	if got != "A\nB\n" {
		t.Fatalf("got %q", got)
	}
}

func TestFromHFDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tokenizer_config.json", `{"bos_token":{"content":"<s>","lstrip":false},"eos_token":"</s>","chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"CFG"}]}`)
	check := func(want string) {
		t.Helper()
		mt, err := FromModel(dir)
		if err != nil {
			t.Fatal(err)
		}
		if mt.Source != want || mt.BOS != "<s>" || mt.EOS != "</s>" {
			t.Fatalf("got %+v, want source %q, <s>, </s>", mt, want)
		}
	}
	check("CFG")
	write("chat_template.json", `{"chat_template":"JSON"}`)
	check("JSON")
	write("chat_template.jinja", "JINJA")
	check("JINJA")
	write("chat_template.json", `{"chat_template":`)
	os.Remove(filepath.Join(dir, "chat_template.jinja"))
	if _, err := FromModel(dir); err == nil || !strings.Contains(err.Error(), "chat_template.json") {
		t.Fatalf("bad chat_template.json: %v", err)
	}

	// Resolve: a file beats a built-in, which beats the model's.
	f := filepath.Join(dir, "x.jinja")
	write("x.jinja", "FILE")
	for _, c := range []struct {
		choice Choice
		want   string
	}{{Choice{File: f, Builtin: "chatml"}, "FILE"}, {Choice{Builtin: "chatml"}, builtinSources["chatml"]}, {Choice{}, "MODEL"}} {
		tm, err := Resolve(c.choice, ModelTemplate{Source: "MODEL"})
		if err != nil || tm.Source != c.want {
			t.Fatalf("%+v: %v %v", c.choice, tm, err)
		}
	}
	if _, err := Resolve(Choice{}, ModelTemplate{}); err == nil || !strings.Contains(err.Error(), "--chat-template") {
		t.Fatalf("no template: %v", err)
	}
}

// TestStagedHFFolder: the Gemma 3 folder's chat_template.jinja and
// tokenizer_config.json's BOS/EOS render the records' conversation as
// Jinja2 rendered the same template.
func TestStagedHFFolder(t *testing.T) {
	_, recs := loadRecords(t)
	mt, err := FromModel(shared.Models(t, "gemma-3-270m-it-hf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(mt.Origin, "chat_template.jinja") || mt.BOS != "<bos>" || mt.EOS != "<eos>" {
		t.Fatalf("got origin %q, bos %q, eos %q", mt.Origin, mt.BOS, mt.EOS)
	}
	tmpl, err := Parse(mt.Source, mt.Origin)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if filepath.Base(r.Template) != "google-gemma-3-270m-it.jinja" {
			continue
		}
		got, err := tmpl.Render(context.Background(), Input{Messages: r.Messages, AddGenerationPrompt: r.AddGenerationPrompt, BOS: mt.BOS, EOS: mt.EOS})
		if err != nil {
			t.Fatal(err)
		}
		if got != *r.Expected {
			t.Fatalf("got %q\nwant %q", got, *r.Expected)
		}
		return
	}
	t.Fatal("no Gemma 3 record")
}
