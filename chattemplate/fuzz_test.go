package chattemplate

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// FuzzParseJSON: the order-keeping decoder accepts exactly what
// encoding/json accepts, and never panics.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`[{"role":"user","content":"hi"}]`, `{"a":1,"b":[1.5,null,true,"é"]}`, `[`, `{"a"}`, `1 2`, ``, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ParseJSON(b)
		if valid := json.Valid(b); valid != (err == nil) {
			t.Fatalf("%q: json.Valid %v, ParseJSON error %v", b, valid, err)
		}
	})
}

// FuzzRender: any template source with a small conversation, under small
// limits, renders or fails with an error: never a panic, never a hang.
func FuzzRender(f *testing.F) {
	for _, s := range append([]string{
		`{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`,
		`{% for i in range(100000000) %}{% endfor %}`,
		`{{ "x" * -1 }}{{ messages | tojson(indent=2) }}`,
		`{% set l = [] %}{% set _ = l.append(l) %}{{ l }}{{ l == l }}`,
		`{% set s = "xx" %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}`,
		`{{ messages[0].content.replace("i", "ii" * 9) | indent(3) | join("-") }}`,
	}, builtinSourceList()...) {
		f.Add(s, "hi", true)
	}
	f.Fuzz(func(t *testing.T, src, content string, agp bool) {
		tmpl, err := Parse(src, "fuzz")
		if err != nil {
			return
		}
		tmpl.Limits = Limits{Steps: 200_000, Bytes: 4 << 20, Depth: 20, Time: 2 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs := []Message{{"system", "be brief"}, {"user", content}, {"assistant", content + content}}
		_, err = tmpl.Render(ctx, Input{Messages: msgs, AddGenerationPrompt: agp, BOS: "<s>", EOS: "</s>"})
		if ctx.Err() != nil {
			t.Fatalf("render ran past its time limit: %v", err)
		}
	})
}

func builtinSourceList() []string {
	var out []string
	for _, name := range Builtins {
		out = append(out, builtinSources[name])
	}
	return out
}
