package grammar_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/grammar"
	"github.com/glint-llm/glint/internal/shared"
	"github.com/glint-llm/glint/sample"
)

const personSchema = `{"type":"object","properties":{
	"name":{"type":"string","minLength":1,"maxLength":12},
	"age":{"type":"integer","minimum":-3,"maximum":130},
	"role":{"enum":["admin","user","guest"]},
	"ok":{"type":"boolean"},
	"tags":{"type":"array","items":{"type":"string","maxLength":5},"maxItems":3}},
	"required":["name","age","role"],"additionalProperties":false}`

// checkPerson validates doc against personSchema by hand, independently of
// the grammar.
func checkPerson(t *testing.T, doc string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%q is not a JSON object: %v", doc, err)
	}
	if dec.More() {
		t.Fatalf("%q: data after the object", doc)
	}
	for _, k := range []string{"name", "age", "role"} {
		if _, ok := v[k]; !ok {
			t.Errorf("%q: required %q missing", doc, k)
		}
	}
	for k, x := range v {
		switch k {
		case "name":
			s, ok := x.(string)
			if n := utf8.RuneCountInString(s); !ok || n < 1 || n > 12 {
				t.Errorf("%q: name %v", doc, x)
			}
		case "age":
			n, ok := x.(json.Number)
			i, err := n.Int64()
			if !ok || err != nil || i < -3 || i > 130 {
				t.Errorf("%q: age %v", doc, x)
			}
		case "role":
			if x != "admin" && x != "user" && x != "guest" {
				t.Errorf("%q: role %v", doc, x)
			}
		case "ok":
			if _, ok := x.(bool); !ok {
				t.Errorf("%q: ok %v", doc, x)
			}
		case "tags":
			a, ok := x.([]any)
			if !ok || len(a) > 3 {
				t.Errorf("%q: tags %v", doc, x)
			}
			for _, e := range a {
				if s, ok := e.(string); !ok || utf8.RuneCountInString(s) > 5 {
					t.Errorf("%q: tag %v", doc, e)
				}
			}
		default:
			t.Errorf("%q: property %q not allowed", doc, k)
		}
	}
}

// TestGenerateUnderSchema samples a random-weight model with the real
// Llama 3 vocabulary at temperature 1: whatever it would say, the grammar
// makes it a valid document that ends with an end token.
func TestGenerateUnderSchema(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	m, err := glint.Open(path, glint.Options{Backend: "cpu", Threads: 1, Context: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g, err := grammar.FromJSONSchema([]byte(personSchema), grammar.SchemaOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.Tokenizer.Encode("Describe a person as JSON:", true)
	for seed := range uint64(3) {
		o := engine.Options{MaxTokens: 600, Sampler: sample.New(sample.Params{Temp: 1, TopP: 1, RepeatPenalty: 1, Seed: seed}, m.Vocab()),
			EOG: m.IsEOG, Tokenizer: m.Tokenizer}
		if err := grammar.Constrain(&o, grammar.NewMatcher(g, grammar.TrieFor(m.Tokenizer))); err != nil {
			t.Fatal(err)
		}
		s, err := m.NewSession(engine.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gen, err := s.NewGenerator(o)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := gen.Start(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for {
			tk, err := gen.Next(ctx)
			if err != nil {
				t.Fatalf("seed %d after %q: %v", seed, m.Tokenizer.Decode(gen.Timing().Generated), err)
			}
			text.WriteString(tk.Text)
			if tk.Finish != engine.Going {
				break
			}
		}
		s.Close()
		if gen.Finish() != engine.FinishEnd {
			t.Errorf("seed %d: finished by %v after %d tokens: %q", seed, gen.Finish(), len(gen.Timing().Generated), text.String())
		}
		t.Logf("seed %d (%d tokens): %s", seed, len(gen.Timing().Generated), text.String())
		checkPerson(t, text.String())
	}
}
