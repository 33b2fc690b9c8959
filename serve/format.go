package serve

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/grammar"
)

// responseFormat is OpenAI's "response_format": {"type": "text"},
// {"type": "json_object"} (llama-server also takes a "schema" there), or
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}.
type responseFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// maxSchemaBytes bounds a request's schema; its grammar is bounded by the
// grammar package's own limits.
const maxSchemaBytes = 256 << 10

// responseGrammar is the grammar a request's response_format asks for
// (nil: none, for an absent one or "text"); a bad one is a 400 naming
// what is wrong.
func responseGrammar(raw json.RawMessage) (*grammar.Grammar, error) {
	if absent(raw) {
		return nil, nil
	}
	var f responseFormat
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, badRequest(`"response_format": want {"type": "text" | "json_object" | "json_schema", ...}: %v`, err)
	}
	schema, strict := f.Schema, false
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		if absent(schema) {
			return grammar.JSONObject(), nil
		}
	case "json_schema":
		if f.JSONSchema == nil || absent(f.JSONSchema.Schema) {
			return nil, badRequest(`"response_format": type json_schema needs "json_schema": {"schema": {...}}`)
		}
		schema = f.JSONSchema.Schema
		strict = f.JSONSchema.Strict != nil && *f.JSONSchema.Strict
	default:
		return nil, badRequest(`"response_format": "type" %q: want text, json_object or json_schema`, f.Type)
	}
	if len(schema) > maxSchemaBytes {
		return nil, badRequest(`"response_format": a schema of %d bytes is over the limit of %d`, len(schema), maxSchemaBytes)
	}
	g, err := grammar.FromJSONSchema(schema, grammar.SchemaOptions{Strict: strict})
	if err != nil {
		return nil, badRequest(`"response_format": %v`, err)
	}
	if err := grammar.NewMatcher(g, nil).Err(); err != nil {
		return nil, badRequest(`"response_format": %v`, err)
	}
	return g, nil
}

// setResponseFormat reads p's response_format into r.
func (p *genParams) setResponseFormat(r *Request, m *Model) error {
	g, err := responseGrammar(p.ResponseFormat)
	if err != nil || g == nil {
		return err
	}
	if m.Tokenizer == nil {
		return badRequest(`"response_format": the model has no tokenizer`)
	}
	if r.IgnoreEOS {
		return badRequest(`"response_format" and "ignore_eos": a constrained reply must be able to end`)
	}
	r.Grammar = g
	return nil
}

// constrain holds o to r's grammar, if any.
func (s *Scheduler) constrain(o *engine.Options, r Request) error {
	if r.Grammar == nil {
		return nil
	}
	if s.tok == nil {
		return fmt.Errorf("serve: a grammar needs the model's tokenizer")
	}
	return grammar.Constrain(o, grammar.NewMatcher(r.Grammar, grammar.TrieFor(s.tok)))
}
