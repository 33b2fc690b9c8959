package serve

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// endpoint is a set of the generation routes, for the field table.
type endpoint uint8

const (
	chatEP endpoint = 1 << iota
	completionsEP
	bothEPs = chatEP | completionsEP
)

func (e endpoint) String() string {
	if e == chatEP {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// fieldUse is what glint does with a request field.
type fieldUse uint8

const (
	// implemented: a field of chatRequest or completionRequest, honoured.
	implemented fieldUse = iota
	// ignored: harmless to ignore by its definition (why says so).
	ignored
	// refused: a 400 naming it, unless its value asks for nothing (null
	// or one of neutral: the field's default).
	refused
)

// fieldRule is one request field: OpenAI's, or llama-server's.
type fieldRule struct {
	name string
	in   endpoint
	use  fieldUse
	// why: for ignored, why that is harmless; for refused, what the 400
	// says after "is not supported" ("" : "yet").
	why string
	// neutral are the JSON values of a refused field that ask for what
	// glint does anyway.
	neutral []string
}

// requestFields is every field the generation routes know: a field not
// here (for its route) is a 400, so that no field is ever ignored
// without a reason written down. The implemented ones are exactly the
// JSON fields of chatRequest and completionRequest (TestFieldTable).
var requestFields = []fieldRule{
	// OpenAI's, both routes.
	{name: "model", in: bothEPs, use: implemented},
	{name: "stream", in: bothEPs, use: implemented},
	{name: "stream_options", in: bothEPs, use: implemented},
	{name: "temperature", in: bothEPs, use: implemented},
	{name: "top_p", in: bothEPs, use: implemented},
	{name: "seed", in: bothEPs, use: implemented},
	{name: "max_tokens", in: bothEPs, use: implemented},
	// Chat's name for max_tokens; glint takes it on both routes.
	{name: "max_completion_tokens", in: bothEPs, use: implemented},
	{name: "stop", in: bothEPs, use: implemented},
	{name: "logit_bias", in: bothEPs, use: implemented},
	{name: "logprobs", in: bothEPs, use: implemented},
	{name: "user", in: bothEPs, use: ignored, why: "an end user's id for OpenAI's abuse monitoring"},
	{name: "n", in: bothEPs, use: refused, why: "only one choice per request", neutral: []string{"1"}},
	{name: "presence_penalty", in: bothEPs, use: refused, why: "use repeat_penalty", neutral: []string{"0"}},
	{name: "frequency_penalty", in: bothEPs, use: refused, why: "use repeat_penalty", neutral: []string{"0"}},

	// OpenAI's, chat.
	{name: "messages", in: chatEP, use: implemented},
	{name: "top_logprobs", in: chatEP, use: implemented},
	{name: "metadata", in: chatEP, use: ignored, why: "tags for OpenAI's stored completions; glint stores nothing"},
	{name: "safety_identifier", in: chatEP, use: ignored, why: "an end user's id for OpenAI's abuse monitoring"},
	{name: "prompt_cache_key", in: chatEP, use: ignored, why: "a routing hint for OpenAI's prompt cache; glint's slots are chosen by the prompt itself"},
	{name: "service_tier", in: chatEP, use: ignored, why: "glint has one tier"},
	{name: "prediction", in: chatEP, use: ignored, why: "predicted output only speeds a reply up, it never changes it"},
	{name: "store", in: chatEP, use: refused, why: "glint stores nothing", neutral: []string{"false"}},
	// response_format: the grammar work flips this entry to implemented.
	{name: "response_format", in: bothEPs, use: implemented},
	{name: "tools", in: chatEP, use: implemented},
	{name: "tool_choice", in: chatEP, use: implemented},
	{name: "parallel_tool_calls", in: chatEP, use: implemented},
	{name: "functions", in: chatEP, use: refused, neutral: []string{"[]"}},
	{name: "function_call", in: chatEP, use: refused, neutral: []string{`"none"`, `"auto"`}},
	{name: "audio", in: chatEP, use: refused},
	{name: "modalities", in: chatEP, use: refused, neutral: []string{`["text"]`}},
	{name: "reasoning_effort", in: chatEP, use: refused},
	{name: "verbosity", in: chatEP, use: refused},
	{name: "web_search_options", in: chatEP, use: refused},

	// OpenAI's, completions.
	{name: "prompt", in: completionsEP, use: implemented},
	{name: "echo", in: completionsEP, use: refused, neutral: []string{"false"}},
	{name: "best_of", in: completionsEP, use: refused, neutral: []string{"1"}},
	{name: "suffix", in: completionsEP, use: refused, neutral: []string{`""`}},

	// llama-server's.
	{name: "top_k", in: bothEPs, use: implemented},
	{name: "min_p", in: bothEPs, use: implemented},
	{name: "repeat_penalty", in: bothEPs, use: implemented},
	{name: "repeat_last_n", in: bothEPs, use: implemented},
	{name: "n_predict", in: bothEPs, use: implemented},
	{name: "ignore_eos", in: bothEPs, use: implemented},
	{name: "n_keep", in: bothEPs, use: implemented},
	{name: "cache_prompt", in: bothEPs, use: ignored, why: "glint always reuses a slot's cached prefix of the same owner"},
	{name: "typical_p", in: bothEPs, use: refused, neutral: []string{"1"}},
	{name: "top_n_sigma", in: bothEPs, use: refused, neutral: []string{"-1"}},
	{name: "min_keep", in: bothEPs, use: refused, neutral: []string{"0"}},
	{name: "dynatemp_range", in: bothEPs, use: refused, neutral: []string{"0"}},
	{name: "dynatemp_exponent", in: bothEPs, use: refused, neutral: []string{"1"}},
	{name: "mirostat", in: bothEPs, use: refused, neutral: []string{"0"}},
	{name: "mirostat_tau", in: bothEPs, use: refused},
	{name: "mirostat_eta", in: bothEPs, use: refused},
	{name: "dry_multiplier", in: bothEPs, use: refused, neutral: []string{"0"}},
	{name: "dry_base", in: bothEPs, use: refused},
	{name: "dry_allowed_length", in: bothEPs, use: refused},
	{name: "dry_penalty_last_n", in: bothEPs, use: refused},
	{name: "dry_sequence_breakers", in: bothEPs, use: refused},
	{name: "xtc_probability", in: bothEPs, use: refused, neutral: []string{"0"}},
	{name: "xtc_threshold", in: bothEPs, use: refused},
	{name: "samplers", in: bothEPs, use: refused},
	{name: "n_probs", in: bothEPs, use: refused, why: "use logprobs", neutral: []string{"0"}},
	{name: "post_sampling_probs", in: bothEPs, use: refused, neutral: []string{"false"}},
	{name: "grammar", in: bothEPs, use: refused, neutral: []string{`""`}},
	{name: "json_schema", in: bothEPs, use: refused},
	{name: "id_slot", in: bothEPs, use: refused, neutral: []string{"-1"}},
	{name: "t_max_predict_ms", in: bothEPs, use: refused, neutral: []string{"0"}},
	{name: "n_indent", in: bothEPs, use: refused, neutral: []string{"0"}},
	{name: "return_tokens", in: bothEPs, use: refused, neutral: []string{"false"}},
	{name: "timings_per_token", in: bothEPs, use: refused, neutral: []string{"false"}},
	{name: "lora", in: bothEPs, use: refused, neutral: []string{"[]"}},
	{name: "chat_template_kwargs", in: chatEP, use: implemented},
	{name: "reasoning_format", in: chatEP, use: implemented},
}

// checkFields holds a request's top-level fields to requestFields; the
// first offending field, by name, is the 400.
func checkFields(fields map[string]json.RawMessage, ep endpoint) error {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		i := slices.IndexFunc(requestFields, func(r fieldRule) bool { return r.name == k && r.in&ep != 0 })
		if i < 0 {
			return badRequest("%q is not a field of %v", k, ep)
		}
		r := requestFields[i]
		if r.use != refused || neutral(fields[k], r.neutral) {
			continue
		}
		why := "yet"
		if r.why != "" {
			why = "(" + r.why + ")"
		}
		return badRequest("%q is not supported %s", k, why)
	}
	return nil
}

// neutral reports whether raw is null or one of values, as JSON values
// (1 and 1.0 are the same).
func neutral(raw json.RawMessage, values []string) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	if v == nil {
		return true
	}
	for _, s := range values {
		var w any
		if json.Unmarshal([]byte(s), &w) == nil && reflect.DeepEqual(v, w) {
			return true
		}
	}
	return false
}

// fieldTable is requestFields as the markdown table of docs/serving.md.
func fieldTable() string {
	var b strings.Builder
	b.WriteString("| field | route | glint |\n|---|---|---|\n")
	for _, r := range requestFields {
		route := "both"
		if r.in != bothEPs {
			route = "chat"
			if r.in == completionsEP {
				route = "completions"
			}
		}
		var what string
		switch r.use {
		case implemented:
			what = "implemented"
		case ignored:
			what = "ignored: " + r.why
		case refused:
			what = "400"
			if len(r.neutral) > 0 {
				what += " unless `" + strings.Join(r.neutral, "` or `") + "`"
			}
			if r.why != "" {
				what += " (" + r.why + ")"
			}
		}
		b.WriteString("| `" + r.name + "` | " + route + " | " + what + " |\n")
	}
	return b.String()
}

// jsonFields are the JSON names of t's fields, embedded structs' too.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.Anonymous {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
