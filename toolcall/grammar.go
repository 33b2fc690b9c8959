package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/glint-llm/glint/grammar"
)

// GBNF is the grammar of a reply that calls one of tools (several, if
// parallel and the family has a syntax for several; Llama 3's has not) in
// f's syntax, each call's arguments valid under its tool's Parameters.
// Control tokens have no text to constrain, so Mistral's reply is the bare
// array, without [TOOL_CALLS].
func GBNF(f Family, tools []Tool, parallel bool) (string, error) {
	if len(tools) == 0 {
		return "", errors.New("toolcall: no tools to call")
	}
	argKey := "arguments"
	if f == Llama3 {
		argKey = "parameters"
	}
	defs := map[string]json.RawMessage{}
	var alts [][]byte
	for _, t := range tools {
		if err := CheckName(t.Name); err != nil {
			return "", fmt.Errorf("toolcall: %w", err)
		}
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type": "object"}`)
		}
		// A parameters schema's $refs point into its own $defs; the call's
		// schema holds it inside, so they move to the root, where the
		// references resolve.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(params, &top); err != nil {
			return "", fmt.Errorf("toolcall: function %q: parameters: want a JSON Schema object: %v", t.Name, err)
		}
		if ty, ok := top["type"]; ok && string(bytes.TrimSpace(ty)) != `"object"` {
			// Every family writes the arguments as a JSON object.
			return "", fmt.Errorf("toolcall: function %q: parameters: type %s: want \"object\"", t.Name, ty)
		}
		for _, k := range []string{"$defs", "definitions"} {
			if top[k] == nil {
				continue
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(top[k], &m); err != nil {
				return "", fmt.Errorf("toolcall: function %q: parameters: %s: want an object", t.Name, k)
			}
			for name, d := range m {
				key := k + "\x00" + name
				if old, ok := defs[key]; ok && !bytes.Equal(old, d) {
					return "", fmt.Errorf("toolcall: function %q: parameters: %s/%s differs from another function's", t.Name, k, name)
				}
				defs[key] = d
			}
		}
		name, _ := json.Marshal(t.Name)
		alts = append(alts, fmt.Appendf(nil, `{"type": "object", "properties": {"name": {"const": %s}, %q: %s}, "required": ["name", %q], "additionalProperties": false}`,
			name, argKey, params, argKey))
	}
	call := alts[0]
	if len(alts) > 1 {
		call = fmt.Appendf(nil, `{"anyOf": [%s]}`, bytes.Join(alts, []byte(", ")))
	}
	if f == Generic {
		if parallel {
			call = fmt.Appendf(nil, `{"type": "object", "properties": {"tool_calls": {"type": "array", "items": %s, "minItems": 1}}, "required": ["tool_calls"], "additionalProperties": false}`, call)
		} else {
			call = fmt.Appendf(nil, `{"type": "object", "properties": {"tool_call": %s}, "required": ["tool_call"], "additionalProperties": false}`, call)
		}
	}
	schema := withDefs(call, defs)
	src, err := grammar.SchemaToGBNF(schema, grammar.SchemaOptions{})
	if err != nil {
		return "", fmt.Errorf("toolcall: %w", err)
	}
	// The schema's root is one call; the family's syntax goes around it,
	// in rules whose underscore no schema rule has.
	src = strings.Replace(src, "root ::= ", "tc_call ::= ", 1)
	var root string
	switch f {
	case Llama3, Generic:
		root = `root ::= tc_call`
	case Hermes:
		root = "root ::= tc_one\ntc_one ::= \"<tool_call>\\n\" tc_call \"</tool_call>\""
		if parallel {
			root = "root ::= tc_one (\"\\n\" tc_one)*\ntc_one ::= \"<tool_call>\\n\" tc_call \"</tool_call>\""
		}
	case Mistral:
		root = `root ::= "[" tc_call "]"`
		if parallel {
			root = `root ::= "[" tc_call ("," space tc_call)* "]"`
		}
	}
	return root + "\n" + src, nil
}

// Grammar is GBNF parsed.
func Grammar(f Family, tools []Tool, parallel bool) (*grammar.Grammar, error) {
	src, err := GBNF(f, tools, parallel)
	if err != nil {
		return nil, err
	}
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("toolcall: the calls' grammar: %w", err)
	}
	return g, nil
}

// withDefs adds defs (keyed "$defs\x00name" or "definitions\x00name") to
// the schema object s.
func withDefs(s []byte, defs map[string]json.RawMessage) []byte {
	if len(defs) == 0 {
		return s
	}
	groups := map[string]map[string]json.RawMessage{}
	for k, d := range defs {
		kind, name, _ := strings.Cut(k, "\x00")
		if groups[kind] == nil {
			groups[kind] = map[string]json.RawMessage{}
		}
		groups[kind][name] = d
	}
	var b bytes.Buffer
	b.WriteString("{")
	for kind, m := range groups {
		enc, _ := json.Marshal(m) // raw messages already valid JSON
		fmt.Fprintf(&b, "%q: %s, ", kind, enc)
	}
	b.WriteString(`"anyOf": [`)
	b.Write(s)
	b.WriteString("]}")
	return b.Bytes()
}
