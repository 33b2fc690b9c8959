package jinja

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// hostile are templates that crashed or hung the unlimited interpreter, and
// the limit each must stop at.
var hostile = []struct{ name, src, limit string }{
	{"recursive macro", `{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`, "depth"},
	{"range 1e8", `{% for i in range(100000000) %}{% endfor %}`, "steps"},
	{"range 1e18", `{{ range(1000000000000000000) | length }}`, "steps"},
	{"nested range", `{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}`, "steps"},
	{"string doubling", `{% set s = "xx" %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}{{ s }}`, "bytes"},
	{"string repeat", `{{ "x" * 100000000000 }}`, "bytes"},
	{"append loop", `{% set l = [] %}{% for i in range(1000000) %}{% for j in range(1000000) %}{% set _ = l.append(j) %}{% endfor %}{% endfor %}`, "steps"},
	{"list doubling", `{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`, "bytes"},
	{"self-containing list", `{% set l = [] %}{% set _ = l.append(l) %}{{ l }}`, "nesting"},
	{"self-containing tojson", `{% set l = [] %}{% set _ = l.append(l) %}{{ l | tojson }}`, "nesting"},
	{"self-containing equals", `{% set l = [] %}{% set _ = l.append(l) %}{% set m = [] %}{% set _ = m.append(m) %}{{ l == m }}`, "nesting"},
	{"shared refs repr", `{% set ns = namespace(l=["xxxxxxxx"]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}`, "steps"},
	{"shared refs join", `{% set ns = namespace(l=["xxxxxxxx"]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l | join(",") }}`, "steps"},
	{"huge join", `{% set s = "x" * 1000000 %}{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set _ = ns.l.append(s) %}{% endfor %}{{ ns.l | join(s) }}`, "bytes"},
	{"huge indent", `{{ "a\nb" | indent(10000000000) }}`, "bytes"},
	{"huge tojson indent", `{{ [[[1]]] | tojson(indent=10000000000) }}`, "bytes"},
	{"replace blowup", `{% set s = "x" * 1000000 %}{{ s.replace("x", s) }}`, "bytes"},
	{"deep concat chain", `{{ 1` + strings.Repeat("+1", 100000) + ` }}`, "nesting"},
	{"output flood", `{% for i in range(100000) %}{{ "x" * 10000 }}{% endfor %}`, "bytes"},
}

func TestHostileTemplatesStop(t *testing.T) {
	for _, c := range hostile {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tm, err := Compile(c.src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = tm.RenderLimited(ctx, Limits{}, nil)
			var le *LimitError
			// Under the race detector the clock may stop a costly one first.
			if !errors.As(err, &le) || (le.Limit != c.limit && le.Limit != "time") {
				t.Fatalf("got %v after %v; want the %s limit", err, time.Since(start), c.limit)
			}
		})
	}
}

// TestParseNesting: source nested beyond maxNesting is a compile error, not
// a stack overflow.
func TestParseNesting(t *testing.T) {
	for _, src := range []string{
		"{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}",
		"{{ " + strings.Repeat("not ", 100000) + "1 }}",
		"{{ " + strings.Repeat("-", 100000) + "1 }}",
		strings.Repeat("{% if 1 %}", 100000) + strings.Repeat("{% endif %}", 100000),
	} {
		if _, err := Compile(src); err == nil || !strings.Contains(err.Error(), "nested more than") {
			t.Errorf("%.30q…: %v", src, err)
		}
	}
}

func TestPythonSemantics(t *testing.T) {
	for src, want := range map[string]string{
		`[{{ "x" * -1 }}]`:                                           "[]",
		`[{{ "ab" * 0 }}{{ "ab" * 2 }}]`:                             "[abab]",
		`{% set l = [1] %}{{ l == l }}`:                              "True",
		`{{ range(3) | list | length }}{{ range(5, 0, -2) | list }}`: "3[5, 3, 1]",
	} {
		tm, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tm.RenderLimited(context.Background(), Limits{}, nil)
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", src, got, err, want)
		}
	}
}

// TestCancel: a render stops soon after its context ends.
func TestCancel(t *testing.T) {
	tm, err := Compile(`{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = tm.RenderLimited(ctx, Limits{Steps: 1 << 62, Time: time.Hour}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopped %v after the cancel", d)
	}
}

func TestTimeLimit(t *testing.T) {
	tm, err := Compile(`{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.RenderLimited(context.Background(), Limits{Steps: 1 << 62, Time: 50 * time.Millisecond}, nil)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "time" {
		t.Fatalf("got %v", err)
	}
}
