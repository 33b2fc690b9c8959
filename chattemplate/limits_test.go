package chattemplate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/glint-llm/glint/internal/jinja"
)

// TestErrorClasses: raise_exception is the client's fault (*RaiseError); a
// template over a limit or failing on its own is the model's
// (*TemplateError, naming its origin); each hostile template stops quickly.
func TestErrorClasses(t *testing.T) {
	for _, c := range []struct {
		name, src string
		raise     bool
		limit     string
	}{
		{"raise", `{{ raise_exception("roles must alternate") }}`, true, ""},
		{"recursive macro", `{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`, false, "depth"},
		{"range 1e8", `{% for i in range(100000000) %}{% endfor %}`, false, "steps"},
		{"nested range", `{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}`, false, "steps"},
		{"string doubling", `{% set s = "xx" %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}`, false, "bytes"},
		{"call of a non-function", `{{ messages() }}`, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Parse(c.src, "test "+c.name)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = tmpl.Render(ctx, Input{Messages: conversations[1]})
			if ctx.Err() != nil {
				t.Fatalf("ran past 20 s: %v", err)
			}
			var re *RaiseError
			var te *TemplateError
			var le *jinja.LimitError
			switch {
			case c.raise:
				if !errors.As(err, &re) || re.Msg != "roles must alternate" {
					t.Fatalf("got %v; want the RaiseError", err)
				}
			case !errors.As(err, &te) || te.Origin != "test "+c.name || errors.As(err, &re):
				t.Fatalf("got %T %v; want a TemplateError", err, err)
			case c.limit != "" && (!errors.As(err, &le) || (le.Limit != c.limit && le.Limit != "time")):
				t.Fatalf("got %v; want the %s limit", err, c.limit)
			}
		})
	}
}

// TestRenderCancel: a render stops promptly when its context ends, with the
// context's error.
func TestRenderCancel(t *testing.T) {
	tmpl, err := Parse(`{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}`, "t")
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Limits = Limits{Steps: 1 << 62, Time: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = tmpl.Render(ctx, Input{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stopped after %v", d)
	}
}

// TestCheck: the built-ins pass Check, a template that fails a plain
// conversation does not.
func TestCheck(t *testing.T) {
	for _, name := range Builtins {
		b, _ := Builtin(name)
		if err := b.Check(context.Background(), "<s>", "</s>", nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad, err := Parse(`{% for m in messages %}{% if m.role == "system" %}{{ raise_exception("no system role") }}{% endif %}{% endfor %}`, "bad")
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Check(context.Background(), "", "", nil); err == nil {
		t.Fatal("Check passed a template that rejects a system message")
	}
}
