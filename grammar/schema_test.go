package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// accepts runs the recognizer over the whole of doc.
func accepts(g *Grammar, doc string) bool {
	m := NewMatcher(g, nil)
	return m.Accept([]byte(doc)) == nil && m.IsComplete()
}

func TestSchema(t *testing.T) {
	cases := []struct {
		name   string
		schema string
		strict bool
		ok     []string
		bad    []string
	}{
		{"string", `{"type":"string"}`, false,
			[]string{`""`, `"abc"`, `"a\"b"`, `"\u00e9"`, `"é"`, `"x" `},
			[]string{`abc`, `"a`, `"a"b"`, "\"\n\"", `"\q"`, `1`}},
		{"length", `{"type":"string","minLength":2,"maxLength":3}`, false,
			[]string{`"ab"`, `"abc"`, `"a\nb"`, `"éé"`},
			[]string{`"a"`, `"abcd"`, `""`}},
		{"integer", `{"type":"integer"}`, false,
			[]string{`0`, `-7`, `123456`},
			[]string{`01`, `1.5`, `-`, `"1"`, `+1`}},
		{"bounds", `{"type":"integer","minimum":-5,"maximum":120}`, false,
			[]string{`-5`, `0`, `9`, `99`, `100`, `120`, `-1`},
			[]string{`-6`, `121`, `200`, `1000`, `-0`, `007`}},
		{"exclusive", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10.5}`, false,
			[]string{`1`, `10`}, []string{`0`, `11`, `-1`}},
		{"number", `{"type":"number"}`, false,
			[]string{`1`, `-1.25`, `3e5`, `0.5E-3`}, []string{`.5`, `1.`, `--1`}},
		{"boolean-null", `{"type":["boolean","null"]}`, false,
			[]string{`true`, `false`, `null`}, []string{`0`, `"true"`, `nul`}},
		{"enum", `{"enum":["red","green",3,null]}`, false,
			[]string{`"red"`, `"green"`, `3`, `null`}, []string{`"blue"`, `"Red"`, `4`}},
		{"const", `{"const":{"a":[1,"x"]}}`, false,
			[]string{`{"a":[1,"x"]}`}, []string{`{"a":[1,"y"]}`, `{"a": [1,"x"]}`}},
		{"array", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`, false,
			[]string{`[1]`, `[1,2,3]`, `[ 1 , 2 ]`},
			[]string{`[]`, `[1,2,3,4]`, `[1,]`, `["a"]`}},
		{"empty-array", `{"type":"array","maxItems":0}`, false, []string{`[]`}, []string{`[1]`}},
		{"object", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"],"additionalProperties":false}`, false,
			[]string{`{"b":"x"}`, `{"a":1,"b":"x"}`, `{"b":"x","c":true}`, `{"a":1,"b":"x","c":false}`, `{ "b" : "" }`},
			[]string{`{}`, `{"a":1}`, `{"b":"x","a":1}`, `{"b":"x","d":1}`, `{"b":"x",}`, `{,"b":"x"}`, `{"c":true,"b":"x"}`}},
		{"all-optional", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"additionalProperties":false}`, false,
			[]string{`{}`, `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
			[]string{`{"b":2,"a":1}`, `{"a":1,}`, `{,}`}},
		{"additional", `{"type":"object","properties":{"a":{"type":"integer"}}}`, false,
			[]string{`{}`, `{"a":1}`, `{"a":1,"z":[true]}`, `{"z":null}`, `{"ab":"x","":1,"b":2}`},
			[]string{`{"a":"x"}`, `{"z":}`, `{"a":1,"a":2}`}},
		{"additional-strict", `{"type":"object","properties":{"a":{"type":"integer"}}}`, true,
			[]string{`{}`, `{"a":1}`}, []string{`{"a":1,"z":[true]}`, `{"z":null}`}},
		{"additional-schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, false,
			[]string{`{}`, `{"x":1,"y":2}`}, []string{`{"x":"1"}`}},
		{"anyOf", `{"anyOf":[{"type":"integer","maximum":3,"minimum":1},{"type":"string","maxLength":1}]}`, false,
			[]string{`1`, `3`, `"a"`, `""`}, []string{`4`, `"ab"`}},
		{"ref", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`, false,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`},
			[]string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
		{"formats", `{"type":"array","items":{"anyOf":[{"type":"string","format":"date"},{"type":"string","format":"uuid"},{"type":"string","format":"date-time"}]}}`, false,
			[]string{`["2024-02-29"]`, `["123e4567-e89b-12d3-a456-426614174000"]`, `["2024-01-01T10:20:30Z","2024-01-01T10:20:30.123+01:00"]`},
			[]string{`["2024-13-01"]`, `["123e4567"]`, `["2024-01-01T25:00:00Z"]`}},
		{"any", `{}`, false, []string{`1`, `{"a":[null]}`, `"x"`}, []string{`{`, `nul`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := FromJSONSchema([]byte(c.schema), SchemaOptions{Strict: c.strict})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range c.ok {
				if !accepts(g, d) {
					t.Errorf("rejects %s\n%s", d, g)
				}
			}
			for _, d := range c.bad {
				if accepts(g, d) {
					t.Errorf("accepts %s\n%s", d, g)
				}
			}
		})
	}
}

// TestIntRange holds the bounded-integer grammars to a direct comparison,
// for every pair of bounds in a window and every integer near it.
func TestIntRange(t *testing.T) {
	vals := []int64{-1001, -1000, -999, -120, -100, -99, -10, -9, -1, 0, 1, 7, 9, 10, 19, 20, 99, 100, 101, 250, 999, 1000, 1009}
	var some []string
	for _, lo := range vals {
		for _, hi := range vals {
			if lo > hi {
				continue
			}
			g, err := Parse("root ::= " + intRange(&lo, &hi))
			if err != nil {
				t.Fatal(err)
			}
			for x := int64(-1100); x <= 1100; x++ {
				if got, want := accepts(g, strconv.FormatInt(x, 10)), lo <= x && x <= hi; got != want {
					t.Fatalf("[%d, %d]: %d accepted %v\n%s", lo, hi, x, got, g)
				}
			}
			for _, s := range []string{"-0", "00", "01", "-01", ""} {
				if accepts(g, s) {
					t.Fatalf("[%d, %d] accepts %q", lo, hi, s)
				}
			}
		}
	}
	// One side open.
	for _, b := range vals {
		up, err := Parse("root ::= " + intRange(&b, nil))
		if err != nil {
			t.Fatal(err)
		}
		down, err := Parse("root ::= " + intRange(nil, &b))
		if err != nil {
			t.Fatal(err)
		}
		for x := int64(-1100); x <= 1100; x++ {
			s := strconv.FormatInt(x, 10)
			if accepts(up, s) != (x >= b) || accepts(down, s) != (x <= b) {
				t.Fatalf("bound %d: %d wrong", b, x)
			}
		}
		some = append(some, fmt.Sprint(b))
	}
	_ = some
}

func TestSchemaErrors(t *testing.T) {
	for _, s := range []string{
		`{"type":"string","pattern":"^a$|^b$"}`,
		`{"type":"number","minimum":1}`,
		`{"type":"frob"}`,
		`{"$ref":"#/$defs/missing"}`,
		`{"type":"integer","minimum":5,"maximum":4}`,
		`{"type":"string","maxLength":-1}`,
		`false`,
		`{"type":"object","required":["x"]}`,
		`[1`,
		`{"allOf":[{}]}`,
	} {
		if _, err := FromJSONSchema([]byte(s), SchemaOptions{}); err == nil {
			t.Errorf("%s: no error", s)
		} else {
			t.Logf("%s: %v", s, err)
		}
	}
}

// FuzzSchema: any schema is either an error or a grammar that parses
// (SchemaToGBNF's output is GBNF whatever names and values it quotes).
func FuzzSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a b\"":{"enum":["x\n",1.5e3,null]},"é":{"type":"integer","minimum":-7}},"required":["é"]}`, false)
	f.Add(`{"$defs":{"n":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"array","items":{"$ref":"#"},"maxItems":2}]}},"$ref":"#/$defs/n"}`, true)
	f.Add(`{"type":["string","null"],"format":"date-time","minLength":3}`, false)
	f.Fuzz(func(t *testing.T, schema string, strict bool) {
		src, err := SchemaToGBNF([]byte(schema), SchemaOptions{Strict: strict})
		if err != nil {
			return
		}
		if _, err := Parse(src); err != nil && !strings.Contains(err.Error(), "left recursion") {
			t.Fatalf("%s: grammar does not parse: %v\n%s", schema, err, src)
		}
	})
}
