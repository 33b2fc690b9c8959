package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/model/synth"
)

// FuzzRequest: no body makes a route crash (a panic answers 500) or
// answer anything but a result, a 400 or a 413; every error is an OpenAI
// error body.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}`,
		`{"prompt": [1, "a", 2], "stream": true, "stop": ["a"], "max_tokens": 3}`,
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "seed": 3, "top_k": 5}`,
		`{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stream": true, "max_tokens": 2}`,
		`{"content": "hello", "with_pieces": true}`, `{"tokens": [1, 2, 3]}`,
		`{"prompt": 5}`, `[]`, `{`, ``, `{"prompt": "x", "temperature": "hot"}`,
		`{"messages": [{"role": "user"}]}`, `{"prompt": "x", "stop": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"]}`,
		`{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]}], "max_tokens": 1}`,
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "logprobs": true, "top_logprobs": 20, "stream": true}`,
		`{"prompt": "x", "max_tokens": 2, "logprobs": 5, "logit_bias": {"3": -100, "7": 100}}`,
		`{"prompt": "x", "logit_bias": {"99999": 1, "x": 2}}`, `{"prompt": "x", "logprobs": -1}`,
		`{"messages": [{"role": "user", "content": "hi"}], "tools": [], "tool_choice": "auto", "response_format": {"type": "text"}, "store": false, "user": "u"}`,
		`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}], "n": 2}`, `{"prompt": "x", "unknown_field": 1, "mirostat": 2}`,
		`{"input": ["a", "b"], "encoding_format": "base64"}`, `{"input": [[1, 2], [3, "x"]]}`, `{"content": [1, "a"], "dimensions": 64}`,
		`{"prompt": "x", "max_tokens": 3, "response_format": {"type": "json_object"}}`,
		`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "max_tokens": 8, "stream": true, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}], "tool_choice": "required"}`,
		`{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c", "name": "f", "content": "2"}], "max_tokens": 4, "tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": false}`,
		`{"messages": [{"role": "user", "content": "hi", "x": 1}], "chat_template_kwargs": {"enable_thinking": false}, "reasoning_format": "none", "stream": true, "max_tokens": 3}`,
		`{"messages": [{"role": "user", "content": [{"type": "image_url"}, 3]}], "chat_template_kwargs": [1], "reasoning_format": "auto"}`,
		`{"prompt": "x", "max_tokens": 3, "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"a": {"enum": [1, "b"]}}}, "strict": true}}}`,
	} {
		f.Add(s)
	}
	p := filepath.Join(f.TempDir(), "tiny.gguf")
	if err := synth.WriteGGUF(p, synth.Options{Shape: "tiny", Type: "Q8_0", Seed: 2, Std: 0.2}); err != nil {
		f.Fatal(err)
	}
	m, err := Load(p, LoadOptions{Options: glint.Options{Backend: "cpu", Threads: 1, Context: 32},
		Template: chattemplate.Choice{Builtin: "chatml"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	srv := New(Options{MaxBody: 1 << 16})
	srv.SetModel(m)
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/v1/embeddings", "/embeddings"} {
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			srv.ServeHTTP(w, req)
			switch w.Code {
			case http.StatusOK:
				if !json.Valid(w.Body.Bytes()) && !bytes.HasPrefix(w.Body.Bytes(), []byte("data: ")) {
					t.Errorf("%s %q: 200 with %q", path, body, w.Body)
				}
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
				var e apiError
				if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
					t.Errorf("%s %q: %d with %q", path, body, w.Code, w.Body)
				}
			default:
				t.Errorf("%s %q: status %d: %s", path, body, w.Code, w.Body)
			}
		}
	})
}
