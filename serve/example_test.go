package serve_test

import (
	"context"
	"fmt"
	"log"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// A client of `generate serve -m model.gguf` (docs/serving.md's snippet; it
// needs a running server, so it is compiled, not run).
func Example_openAIClient() {
	client := openai.NewClient(option.WithBaseURL("http://127.0.0.1:8080/v1/"), option.WithAPIKey("unused"))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:     "model.gguf", // any name: the server has one model
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxTokens: openai.Int(200),
	}, option.WithJSONSet("top_k", 40)) // llama-server's extra fields ride along
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			fmt.Print(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		log.Fatal(err)
	}
}
