package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"
)

func serveBenchCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve-bench",
		Usage: "aggregate generated tokens/s of concurrent clients against an OpenAI-compatible server (a benchmark)",
		UsageText: "generate serve-bench [--url http://127.0.0.1:8080] [--clients 8] [--requests 1] [-n 32] [-p PROMPT]\n\n" +
			"Each of --clients clients sends --requests greedy /v1/completions requests one after the other\n" +
			"(prompt: PROMPT and the client's number, max_tokens -n, ignore_eos), all clients at once, after one\n" +
			"untimed warm-up request. Aggregate tokens/s is the completion tokens the server reports over the\n" +
			"time from the first request to the last reply. Works against generate serve and llama-server.\n" +
			"stdout: one line, `tokens=… seconds=… tok_s=… latency_ms_median=…`.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Value: "http://127.0.0.1:8080", Usage: "the server's base URL"},
			&cli.IntFlag{Name: "clients", Value: 8, Usage: "concurrent clients"},
			&cli.IntFlag{Name: "requests", Value: 1, Usage: "requests each client sends, one after the other"},
			&cli.IntFlag{Name: "n-predict", Aliases: []string{"n"}, Value: 32, Usage: "max_tokens of each request"},
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Value: "Once upon a time, in a village by the sea, there lived", Usage: "prompt (each client adds its number)"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "give up after this long"},
			&cli.StringFlag{Name: "api-key", EnvVars: []string{"GLINT_API_KEY"}, Usage: "the server's API key (sent as Authorization: Bearer)"},
		},
		Action: runServeBench,
	}
}

func runServeBench(c *cli.Context) error {
	clients, requests, n := c.Int("clients"), c.Int("requests"), c.Int("n-predict")
	if clients < 1 || requests < 1 || n < 1 {
		return usageError("serve-bench: --clients, --requests and -n must be at least 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Duration("timeout"))
	defer cancel()
	url := strings.TrimSuffix(c.String("url"), "/") + "/v1/completions"
	prompt := func(client int) string { return fmt.Sprintf("%s %d", c.String("prompt"), client) }
	key := c.String("api-key")
	if _, _, err := complete(ctx, url, key, prompt(-1), 4); err != nil {
		return fmt.Errorf("serve-bench: warm-up: %w", err)
	}
	var (
		mu        sync.Mutex
		tokens    int
		latencies []time.Duration
		firstErr  error
		wg        sync.WaitGroup
	)
	start := time.Now()
	for k := range clients {
		wg.Go(func() {
			for range requests {
				got, d, err := complete(ctx, url, key, prompt(k), n)
				mu.Lock()
				tokens += got
				latencies = append(latencies, d)
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return fmt.Errorf("serve-bench: %w", firstErr)
	}
	slices.Sort(latencies)
	med := latencies[len(latencies)/2]
	if len(latencies)%2 == 0 {
		med = (latencies[len(latencies)/2-1] + med) / 2
	}
	fmt.Fprintf(os.Stderr, "%d clients × %d requests of %d tokens: %d tokens in %.2f s, %.2f tokens/s, median latency %.0f ms\n",
		clients, requests, n, tokens, wall.Seconds(), float64(tokens)/wall.Seconds(), float64(med.Microseconds())/1000)
	fmt.Printf("tokens=%d seconds=%.3f tok_s=%.3f latency_ms_median=%.1f\n", tokens, wall.Seconds(), float64(tokens)/wall.Seconds(),
		float64(med.Microseconds())/1000)
	return nil
}

// complete sends one greedy completion of n tokens and returns the
// completion tokens the server counted and the time it took.
func complete(ctx context.Context, url, key, prompt string, n int) (int, time.Duration, error) {
	body, err := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": true})
	if err != nil {
		return 0, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	begin := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	d := time.Since(begin)
	if err != nil {
		return 0, d, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, d, fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	var r struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, d, fmt.Errorf("%s: reply: %w", url, err)
	}
	return r.Usage.CompletionTokens, d, nil
}
