package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/progress"
	"github.com/glint-llm/glint/serve"
)

func serveCommand() *cli.Command {
	fl := append(modelFlags(), samplingFlags()...)
	fl = append(fl, chatTemplateFlags(true)...)
	fl = append(fl, contextShiftFlags()...)
	fl = append(fl, specFlags()...)
	fl = append(fl,
		&cli.StringFlag{Name: "host", Value: "127.0.0.1", Usage: "address to listen on (0.0.0.0: every interface)"},
		&cli.IntFlag{Name: "port", Value: 8080, Usage: "port to listen on (0: any free one; the address is printed on stderr)"},
		&cli.IntFlag{Name: "parallel", Aliases: []string{"np"}, Value: 1, Usage: "slots: requests decoded together in one batch per step; -c is divided among them (each slot holds c/N tokens, as llama-server's)"},
		&cli.IntFlag{Name: "batch-size", Value: engine.StepTokens, Usage: "most tokens one step feeds (llama.cpp's n_batch): a longer prompt is fed in chunks, each sharing its step with the slots decoding"},
		&cli.IntFlag{Name: "queue", Value: 64, Usage: "most requests waiting for a slot; more get 503"},
		&cli.StringFlag{Name: "alias", Usage: "model id in /v1/models and in replies (default: the file's name)"},
		&cli.Int64Flag{Name: "max-body", Value: serve.DefaultMaxBody, Usage: "largest request body in bytes; larger ones get 413"},
		&cli.StringSliceFlag{Name: "api-key", EnvVars: []string{"GLINT_API_KEY"}, Usage: "API key clients must send as Authorization: Bearer KEY (repeatable; every route but /health)"},
		&cli.StringFlag{Name: "api-key-file", Usage: "file of API keys, one a line (blank lines and # comments skipped)"},
		&cli.StringSliceFlag{Name: "cors-origin", Usage: "browser origin allowed to call the API, e.g. https://app.example (repeatable; * for any); default none"},
		&cli.StringSliceFlag{Name: "allowed-host", Usage: "Host header value accepted besides loopback names (repeatable; * for any): without keys, a loopback server accepts only localhost/127.x/[::1]"},
		&cli.IntFlag{Name: "threads-http", Usage: "requests tokenizing, rendering or building replies at once (0: one per core)"},
		&cli.Int64Flag{Name: "work-memory", Value: serve.DefaultWorkMemory, Usage: "bytes that request work outside the slots may take at once, server-wide; beyond, 503 with Retry-After"},
		&cli.DurationFlag{Name: "shutdown-timeout", Value: 10 * time.Second, Usage: "on SIGTERM/SIGINT, how long running requests may finish before they are cancelled"},
		&cli.BoolFlag{Name: "embeddings", Aliases: []string{"embedding"}, Value: true, Usage: "serve /v1/embeddings and /embeddings beside generation (on by default; llama-server's flag, which there turns generation off; --embeddings=false: 501)"},
		&cli.StringFlag{Name: "pooling", Usage: "how embeddings pool a prompt's tokens: mean, cls, last, or none (per-token vectors, /embeddings only); default: the file's {arch}.pooling_type, else mean"},
	)
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the model over an OpenAI-compatible HTTP API (chat, completions, embeddings, models, tokenize)",
		UsageText: "generate serve -m MODEL [-b cpu|opencl] [--host 127.0.0.1] [--port 8080] [--parallel N] [-c CTX] [sampling defaults] [--chat-template NAME]\n\n" +
			"Endpoints: POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings, GET /v1/models,\n" +
			"GET /health, POST /tokenize, POST /detokenize, POST /embeddings. One log line per request on stderr.\n" +
			"SIGTERM or Ctrl-C stops taking requests, lets the running ones finish (for --shutdown-timeout, then\n" +
			"cancels them), and exits 0. With --api-key every route but /health wants Authorization: Bearer KEY.\n\n" +
			"The model is loaded once, with a KV cache of --parallel sequences: each slot holds -c / --parallel\n" +
			"tokens (as llama-server divides -c). The running slots decode together, one batch per step; a new\n" +
			"request joins at the next step. A full slot shifts its context (keeping the BOS and a request's\n" +
			"n_keep, --keep by default) unless --no-context-shift, which ends the reply there instead.",
		Flags:  fl,
		Action: runServe,
	}
}

func runServe(c *cli.Context) error {
	path := c.String("model")
	if path == "" {
		return usageError("serve: -m MODEL is required")
	}
	switch {
	case c.Int("parallel") < 1:
		return usageError("serve: --parallel %d: want at least 1", c.Int("parallel"))
	case c.Int("batch-size") < 1:
		return usageError("serve: --batch-size %d: want at least 1", c.Int("batch-size"))
	case c.Int("keep") < -1:
		return usageError("serve: --keep %d: want -1 (the whole prompt) or more", c.Int("keep"))
	case c.Int("queue") < 0:
		return usageError("serve: --queue %d: want 0 or more", c.Int("queue"))
	case c.Int("port") < 0 || c.Int("port") > 65535:
		return usageError("serve: --port %d: want 0…65535", c.Int("port"))
	case c.Int64("max-body") < 1:
		return usageError("serve: --max-body %d: want at least 1", c.Int64("max-body"))
	case c.Int("threads-http") < 0:
		return usageError("serve: --threads-http %d: want 0 or more", c.Int("threads-http"))
	case c.Int64("work-memory") < 1:
		return usageError("serve: --work-memory %d: want at least 1", c.Int64("work-memory"))
	case c.Duration("shutdown-timeout") < 0:
		return usageError("serve: --shutdown-timeout %v: want 0 or more", c.Duration("shutdown-timeout"))
	}
	if p := c.String("pooling"); p != "" {
		if _, err := engine.ParsePooling(p); err != nil {
			return usageError("serve: --%v", err)
		}
	}
	sp, err := samplerParams(c)
	if err != nil {
		return err
	}
	kw, err := templateKwargs(c)
	if err != nil {
		return err
	}
	reasoning, err := serve.ParseReasoningFormat(c.String("reasoning-format"))
	if err != nil {
		return usageError("serve: --reasoning-format: %v", err)
	}
	o := serve.LoadOptions{Reasoning: reasoning, Options: loadOpts(c), Parallel: c.Int("parallel"), Queue: c.Int("queue"),
		ContextShift: !c.Bool("no-context-shift"), Keep: c.Int("keep"),
		Template:       chattemplate.Choice{File: c.String("chat-template-file"), Builtin: c.String("chat-template")},
		TemplateKwargs: kw, SpecialInContent: c.Bool("chat-special-in-content"), Defaults: &sp, Name: c.String("alias"),
		DisableEmbeddings: !c.Bool("embeddings"), Pooling: c.String("pooling")}
	if c.String("seed") != "-1" {
		o.Seed = &sp.Seed
	}
	o.StepTokens = c.Int("batch-size")

	keys, err := apiKeys(c.StringSlice("api-key"), c.String("api-key-file"))
	if err != nil {
		return err
	}

	host := c.String("host")
	ln, err := net.Listen(listenNetwork(host), net.JoinHostPort(host, strconv.Itoa(c.Int("port"))))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && len(keys) == 0 {
		fmt.Fprintf(os.Stderr, "warning: listening on %s without an API key: anyone who can reach it can use it (--api-key, --api-key-file or GLINT_API_KEY)\n", ln.Addr())
	}
	srv := serve.New(serve.Options{Log: os.Stderr, MaxBody: c.Int64("max-body"), APIKeys: keys,
		CORSOrigins: c.StringSlice("cors-origin"), AllowedHosts: c.StringSlice("allowed-host"),
		HTTPThreads: c.Int("threads-http"), WorkMemory: c.Int64("work-memory")})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "listening on http://%s (loading the model: /health answers 503 until it is ready)\n", ln.Addr())

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)

	type loaded struct {
		m   *serve.Model
		err error
	}
	ready := make(chan loaded, 1)
	go func() {
		bar := progress.New("loading " + filepath.Base(path))
		o.Progress = bar.Update
		m, err := serve.Load(path, o)
		bar.Finish()
		ready <- loaded{m, err}
	}()
	var m *serve.Model
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "%v while loading: stopping\n", s)
		return srv.Shutdown(context.Background())
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case l := <-ready:
		if l.err != nil {
			srv.Shutdown(context.Background())
			return l.err
		}
		m = l.m
	}
	srv.SetModel(m)
	shift := "on"
	if !o.ContextShift {
		shift = "off"
	}
	fmt.Fprintf(os.Stderr, "%s\n%d slot(s) of %d tokens, context shift %s, queue %d; chat template: %s\nready on http://%s\n",
		m.Info, m.Sched.Status().Slots, m.Sched.Context(), shift, o.Queue, templateOrigin(m), ln.Addr())

	select {
	case err := <-served:
		m.Close()
		return fmt.Errorf("serve: %w", err)
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "%v: draining (no new requests; the running ones finish; again to quit now)\n", s)
	}
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "second signal: quitting without draining")
		os.Exit(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), c.Duration("shutdown-timeout"))
	defer cancel()
	switch err := srv.Shutdown(ctx); {
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "still running after %v: cancelled\n", c.Duration("shutdown-timeout"))
	case err != nil && !errors.Is(err, http.ErrServerClosed):
		return err
	}
	if err := m.Close(); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "stopped")
	return nil
}

// listenNetwork is the network for --host: an IPv4 literal (0.0.0.0
// included) listens on IPv4 only and an IPv6 literal on IPv6 only, where
// "tcp" would take 0.0.0.0 for every address of both; a name, as it
// resolves.
func listenNetwork(host string) string {
	ip := net.ParseIP(strings.Trim(host, "[]"))
	switch {
	case ip == nil:
		return "tcp"
	case ip.To4() != nil:
		return "tcp4"
	}
	return "tcp6"
}

// apiKeys gathers the keys of --api-key (or GLINT_API_KEY) and of
// --api-key-file.
func apiKeys(flags []string, file string) ([]string, error) {
	var keys []string
	for _, k := range flags {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if file == "" {
		return keys, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("serve: --api-key-file: %w", err)
	}
	n := len(keys)
	for line := range strings.Lines(string(b)) {
		if k := strings.TrimSpace(line); k != "" && !strings.HasPrefix(k, "#") {
			keys = append(keys, k)
		}
	}
	if len(keys) == n {
		return nil, fmt.Errorf("serve: --api-key-file %s holds no key", file)
	}
	return keys, nil
}

func templateOrigin(m *serve.Model) string {
	if m.Template == nil {
		return fmt.Sprintf("none (%v): chat requests get 400", m.TemplateErr)
	}
	return m.Template.Origin
}
