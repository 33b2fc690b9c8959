package serve

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/glint-llm/glint/internal/shared"
	"github.com/openai/openai-go/v3"
	oshared "github.com/openai/openai-go/v3/shared"
)

// TestResponseFormat: a json_schema response_format holds a random-weight
// model sampled at temperature 1 to the schema, and it ends by itself
// (finish_reason stop); checked with encoding/json and by hand.
var codeRE = regexp.MustCompile(`^[A-Z]{2}-\d{3}$`)

func TestResponseFormat(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	ts := start(t, load(t, path, LoadOptions{}), Options{})
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city":  map[string]any{"type": "string", "maxLength": 8},
			"temp":  map[string]any{"type": "integer", "minimum": -40, "maximum": 50},
			"sky":   map[string]any{"enum": []any{"clear", "cloudy"}},
			"alert": map[string]any{"type": "boolean"},
			"code":  map[string]any{"type": "string", "pattern": `^[A-Z]{2}-\d{3}$`},
		},
		"required":             []any{"city", "temp", "sky", "alert", "code"},
		"additionalProperties": false,
	}
	for seed := range int64(3) {
		params := openai.ChatCompletionNewParams{Model: "any", MaxTokens: openai.Int(400), Temperature: openai.Float(1), Seed: openai.Int(seed),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather as JSON?")},
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &oshared.ResponseFormatJSONSchemaParam{
				JSONSchema: oshared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "weather", Schema: schema, Strict: openai.Bool(true)}}}}
		res, err := ts.client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		c := res.Choices[0]
		if c.FinishReason != "stop" {
			t.Errorf("seed %d: finish_reason %q: %q", seed, c.FinishReason, c.Message.Content)
		}
		var v struct {
			City  *string
			Temp  *int
			Sky   *string
			Alert *bool
			Code  *string
		}
		d := json.NewDecoder(strings.NewReader(c.Message.Content))
		d.DisallowUnknownFields()
		if err := d.Decode(&v); err != nil || d.More() {
			t.Fatalf("seed %d: %q: %v", seed, c.Message.Content, err)
		}
		if v.City == nil || utf8.RuneCountInString(*v.City) > 8 || v.Temp == nil || *v.Temp < -40 || *v.Temp > 50 ||
			v.Sky == nil || (*v.Sky != "clear" && *v.Sky != "cloudy") || v.Alert == nil || v.Code == nil || !codeRE.MatchString(*v.Code) {
			t.Errorf("seed %d: %q breaks the schema", seed, c.Message.Content)
		}
	}
	for _, c := range []struct{ body, msg string }{
		{`{"prompt": "x", "response_format": {"type": "yaml"}}`, `"type" "yaml"`},
		{`{"prompt": "x", "response_format": {"type": "json_schema"}}`, `needs "json_schema"`},
		{`{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "(?=a)"}}}}`, `pattern "(?=a)"`},
		{`{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "number", "minimum": 0.5}}}}`, `bounds on a number`},
		{`{"prompt": "x", "response_format": {"type": "json_object"}, "ignore_eos": true}`, `"ignore_eos"`},
		{`{"prompt": "x", "response_format": "json"}`, `"response_format"`},
	} {
		code, body := ts.post(t, "/v1/completions", c.body)
		checkError(t, c.body, code, body, 400, c.msg)
	}
	code, body := ts.post(t, "/v1/completions", `{"prompt": "x", "max_tokens": 8, "temperature": 0, "response_format": {"type": "json_object"}}`)
	if code != 200 || !strings.Contains(string(body), `"text":"{`) {
		t.Errorf("json_object: %d %s", code, body)
	}
}
