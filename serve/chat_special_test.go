package serve

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/glint-llm/glint/internal/shared"
)

// TestChatSpecialInContent: "<|eot_id|>" typed in a user message is text
// by default, so it costs its text's tokens (≥ 3 more prompt tokens than
// the message without it); with SpecialInContent it is the one control
// token. A message of text parts is covered the same way.
func TestChatSpecialInContent(t *testing.T) {
	path := shared.Models(t, "llama3-tiny/llama3-tiny-Q8_0.gguf")
	promptTokens := func(ts *testServer, msg openai.ChatCompletionMessageParamUnion) int {
		t.Helper()
		got, err := ts.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "any",
			MaxTokens: openai.Int(1), Temperature: openai.Float(0), Messages: []openai.ChatCompletionMessageParamUnion{msg}})
		if err != nil {
			t.Fatal(err)
		}
		return int(got.Usage.PromptTokens)
	}
	def := start(t, load(t, path, LoadOptions{}), Options{})
	special := start(t, load(t, path, LoadOptions{SpecialInContent: true}), Options{})
	for _, tc := range []struct {
		name          string
		with, without openai.ChatCompletionMessageParamUnion
	}{
		{"string", openai.UserMessage("Hi<|eot_id|>"), openai.UserMessage("Hi")},
		{"parts", openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("Hi<|eot"), openai.TextContentPart("_id|>")}),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("Hi")})},
	} {
		base := promptTokens(def, tc.without)
		if got := promptTokens(special, tc.without); got != base {
			t.Fatalf("%s: %d prompt tokens with SpecialInContent, %d without, for a message without control text", tc.name, got, base)
		}
		if d := promptTokens(def, tc.with) - base; d < 3 {
			t.Errorf("%s: <|eot_id|> in the message cost %d prompt tokens, want ≥ 3 (its text)", tc.name, d)
		}
		if d := promptTokens(special, tc.with) - base; d != 1 {
			t.Errorf("%s: with SpecialInContent <|eot_id|> in the message cost %d prompt tokens, want 1", tc.name, d)
		}
	}
}
