package chattemplate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/glint-llm/glint/tokenizer"
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
// limits, renders or fails with an error: never a panic, never a hang; so does
// RenderPrompt, whose literal ranges lie inside its text.
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
	f.Add(`{{ messages[1].content[1:] }}{{ messages[1].content[::-1] }}`, "</s>\uE000\uE001<s>", false)
	tok := tinyTokenizer(f)
	f.Fuzz(func(t *testing.T, src, content string, agp bool) {
		tmpl, err := Parse(src, "fuzz")
		if err != nil {
			return
		}
		tmpl.Limits = Limits{Steps: 200_000, Bytes: 4 << 20, Depth: 20, Time: 2 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs := []Message{{"system", "be brief"}, {"user", content}, {"assistant", content + content}}
		in := Input{Messages: msgs, AddGenerationPrompt: agp, BOS: "<s>", EOS: "</s>"}
		_, err = tmpl.Render(ctx, in)
		if ctx.Err() != nil {
			t.Fatalf("render ran past its time limit: %v", err)
		}
		p, err := tmpl.RenderPrompt(ctx, tok, in, false)
		if err != nil {
			return
		}
		for _, r := range p.Literal {
			if r[0] < 0 || r[0] >= r[1] || r[1] > len(p.Text) {
				t.Fatalf("literal range %v in a text of %d bytes", r, len(p.Text))
			}
		}
		for _, id := range p.Encode(tok, true) {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("id %d outside the vocabulary", id)
			}
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

// tinyTokenizer is a SentencePiece vocabulary of byte tokens and a few
// control tokens.
func tinyTokenizer(t testing.TB) *tokenizer.Tokenizer {
	v := &tokenizer.Vocab{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>", "<|eot_id|>", "▁"},
		Types: []int32{tokenizer.TypeUnknown, tokenizer.TypeControl, tokenizer.TypeControl, tokenizer.TypeControl, tokenizer.TypeNormal},
		BOS:   1, EOS: 2, EOT: 3, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true}
	for b := range 256 {
		v.Tokens = append(v.Tokens, fmt.Sprintf("<0x%02X>", b))
		v.Types = append(v.Types, tokenizer.TypeByte)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
