package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/glint-llm/glint"
	"github.com/glint-llm/glint/chattemplate"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/internal/progress"
	"github.com/glint-llm/glint/sample"
	"github.com/glint-llm/glint/serve"
)

func chatCommand() *cli.Command {
	fl := append(modelFlags(), samplingFlags()...)
	fl = append(fl, chatTemplateFlags(true)...)
	fl = append(fl, specFlags()...)
	fl = append(fl,
		&cli.StringFlag{Name: "system", Usage: "system message that opens the conversation"},
		&cli.IntFlag{Name: "n-predict", Aliases: []string{"n"}, Value: -1, Usage: "most tokens per reply (-1: until the end of the turn or a full context)"},
	)
	return &cli.Command{
		Name:  "chat",
		Usage: "chat with an instruct model, turn by turn (/clear, /save FILE, /load FILE, /exit)",
		UsageText: "generate chat -m MODEL [--system S] [-b cpu|opencl] [sampling flags] [--chat-template NAME | --chat-template-file FILE] [--chat-special-in-content]\n\n" +
			"Each line read is a user message; on a terminal Ctrl-C stops the reply under way and lines\n" +
			"starting with / are commands. Piped stdin works too: every line, / or not, is a message, and\n" +
			"stdout carries only the replies, one turn after another.",
		Flags:  fl,
		Action: runChat,
	}
}

// errInterrupted stops a reply when Ctrl-C is pressed.
var errInterrupted = errors.New("interrupted")

// chatSession is a conversation whose rendered prefix stays in an engine
// session's KV cells, so that a new turn feeds only the tokens it lacks.
type chatSession struct {
	m         *glint.Model
	sess      *engine.Session
	tmpl      *chattemplate.Template
	bos, eos  string
	kwargs    map[string]any
	system    string
	sampler   *sample.Sampler
	maxNew    int     // most tokens per reply; ≤ 0: no limit but the context
	endTokens []int32 // the template's end of turn
	// specialInContent: control-token text the user types becomes control
	// tokens (--chat-special-in-content); by default it is text.
	specialInContent bool
	// reasoning is what a reply's think block becomes; thoughts is where
	// deepseek shows it (stderr), apart from the reply.
	reasoning serve.ReasoningFormat
	thoughts  io.Writer

	msgs []chattemplate.Message
	// cached is the text the session holds, token for token: the rendered
	// conversation up to the last reply, with the reply's own tokens. Its
	// length in tokens is sess.Len().
	cached string
	// fed are the token ids the session holds.
	fed []int32
	// interrupt, when set, stops the reply under way.
	interrupt atomic.Bool
	// spec drafts for every reply (nil: none).
	spec *engine.Speculative
}

// turnStats is what one turn did.
type turnStats struct {
	Prefill   int  // tokens fed before the reply
	Reused    int  // tokens already in the cache
	Generated int  // tokens of the reply
	Stopped   bool // interrupted (Ctrl-C)
	TTFT      time.Duration
	TBT       time.Duration
}

func newChatSession(m *glint.Model, tmpl *chattemplate.Template, mt chattemplate.ModelTemplate, kw map[string]any, system string, sp sample.Params, maxNew int) (*chatSession, error) {
	// No context shift: the cached text must stay the conversation's prefix.
	sess, err := m.NewSession(engine.SessionOptions{})
	if err != nil {
		return nil, err
	}
	s := &chatSession{m: m, sess: sess, tmpl: tmpl, bos: mt.BOS, eos: mt.EOS, kwargs: kw, system: system,
		sampler: sample.New(sp, m.Vocab()), maxNew: maxNew, endTokens: chattemplate.EndOfTurn(m.Tokenizer, mt)}
	s.clear()
	return s, nil
}

// clear starts the conversation again, keeping the system message.
func (s *chatSession) clear() {
	s.msgs = s.msgs[:0]
	if s.system != "" {
		s.msgs = append(s.msgs, chattemplate.Message{Role: "system", Content: s.system})
	}
	s.sess.Truncate(0)
	s.cached, s.fed = "", s.fed[:0]
}

// load replaces the conversation; the next turn prefills all of it.
func (s *chatSession) load(msgs []chattemplate.Message) {
	s.msgs = append(s.msgs[:0], msgs...)
	s.sess.Truncate(0)
	s.cached, s.fed = "", s.fed[:0]
}

func (s *chatSession) render(addGen bool) (chattemplate.Prompt, error) {
	return s.tmpl.RenderPrompt(context.Background(), s.m.Tokenizer,
		chattemplate.Input{Messages: s.msgs, AddGenerationPrompt: addGen, BOS: s.bos, EOS: s.eos, Kwargs: s.kwargs}, s.specialInContent)
}

// turn adds the user's message, feeds what the cache lacks and streams the
// reply to out.
func (s *chatSession) turn(user string, out io.Writer) (turnStats, error) {
	var st turnStats
	s.msgs = append(s.msgs, chattemplate.Message{Role: "user", Content: user})
	rendered, err := s.render(true)
	if err != nil {
		s.msgs = s.msgs[:len(s.msgs)-1]
		return st, err
	}
	// The cache is reused only if the conversation, rendered again, starts
	// with exactly the text it holds. A template that rewrites earlier
	// turns (trimming a reply, dating the system message) costs a full
	// prefill.
	full := rendered.Text
	var delta chattemplate.Prompt
	if s.cached != "" && strings.HasPrefix(full, s.cached) && s.sess.Len() == len(s.fed) {
		delta = rendered.From(len(s.cached))
		st.Reused = s.sess.Len()
	} else {
		s.sess.Truncate(0)
		s.cached, s.fed = "", s.fed[:0]
		delta = rendered
	}
	prompt := delta.Encode(s.m.Tokenizer, s.cached == "")
	if len(prompt) == 0 {
		s.msgs = s.msgs[:len(s.msgs)-1]
		return st, errors.New("the template added nothing for this message")
	}
	room := s.m.Context() - s.sess.Len() - len(prompt)
	if room < 1 {
		s.msgs = s.msgs[:len(s.msgs)-1]
		return st, fmt.Errorf("the conversation no longer fits the context of %d tokens (-c): /clear to start again", s.m.Context())
	}
	st.Prefill = len(prompt)
	maxNew := room
	if s.maxNew > 0 && s.maxNew < maxNew {
		maxNew = s.maxNew
	}

	var reply strings.Builder
	// The reply goes to out and its reasoning, split off, to thoughts;
	// the conversation keeps the whole text (the reasoning models'
	// templates drop an earlier turn's think block themselves).
	split := serve.NewThinkSplit(s.reasoning, rendered.Text)
	show := func(text string) error {
		if split == nil || s.thoughts == nil {
			_, err := io.WriteString(out, text)
			return err
		}
		r, c := split.Feed(text)
		if r != "" {
			if _, err := io.WriteString(s.thoughts, r); err != nil {
				return err
			}
		}
		_, err := io.WriteString(out, c)
		return err
	}
	s.interrupt.Store(false)
	g, err := s.sess.NewGenerator(engine.Options{MaxTokens: maxNew, Sampler: s.sampler,
		EOG: s.m.IsEOG, EndTokens: s.endTokens, Tokenizer: s.m.Tokenizer, Speculative: s.spec})
	if err == nil {
		err = g.Start(context.Background(), prompt)
	}
	for err == nil {
		if s.interrupt.Load() {
			st.Stopped = true
			break
		}
		var t engine.Token
		if t, err = g.Next(context.Background()); err != nil {
			break
		}
		reply.WriteString(t.Text)
		if err = show(t.Text); err != nil || t.Finish != engine.Going {
			break
		}
	}
	if g != nil && g.Finish() == engine.Going {
		// Ended here (Ctrl-C, an error): show what the generator held.
		tail := g.Flush()
		reply.WriteString(tail)
		show(tail)
	}
	if split != nil && s.thoughts != nil {
		r, c := split.Flush()
		io.WriteString(s.thoughts, r)
		io.WriteString(out, c)
	}
	var tm engine.Timing
	if g != nil {
		tm = g.Timing()
	}
	st.Generated, st.TTFT, st.TBT = len(tm.Generated), tm.TTFT, tm.AvgTBT()
	if err != nil {
		// The session may hold part of this turn: start afresh next time.
		s.msgs = s.msgs[:len(s.msgs)-1]
		s.sess.Truncate(0)
		s.cached, s.fed = "", s.fed[:0]
		return st, err
	}
	// The session holds the prompt and the reply's tokens (never an end
	// token); the reply's text is theirs, and a reply Ctrl-C cut off may
	// end inside a character the stream showed as U+FFFD.
	text := reply.String()
	if st.Stopped {
		text = s.m.Tokenizer.Decode(tm.Generated)
	}
	s.fed = append(append(s.fed, prompt...), tm.Generated...)
	s.cached = s.cached + delta.Text + text
	s.msgs = append(s.msgs, chattemplate.Message{Role: "assistant", Content: text})
	return st, nil
}

func runChat(c *cli.Context) error {
	if c.String("model") == "" {
		return cli.Exit("chat: -m MODEL is required", 2)
	}
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("chat: unexpected argument %q (type messages once it starts)", c.Args().First()), 2)
	}
	if c.String("backend") == "onnx" {
		return errors.New("chat: -b onnx is not supported (cpu or opencl)")
	}
	sp, err := samplerParams(c)
	if err != nil {
		return err
	}
	reasoning, err := serve.ParseReasoningFormat(c.String("reasoning-format"))
	if err != nil {
		return usageError("chat: --reasoning-format: %v", err)
	}
	tmpl, mt, kw, err := chatTemplate(c, c.String("model"))
	if err != nil {
		return err
	}
	if err := tmpl.Check(c.Context, mt.BOS, mt.EOS, kw); err != nil {
		fmt.Fprintf(os.Stderr, "warning: chat template %s fails a plain conversation: %v\n", tmpl.Origin, err)
	}
	m, err := openModel(loadOpts(c), c.String("model"), false)
	if err != nil {
		return err
	}
	defer m.Close()
	if m.Tokenizer == nil {
		return fmt.Errorf("%s has no tokenizer, which a chat needs", c.String("model"))
	}
	tty := progress.IsTerminal(os.Stdin)
	fmt.Fprintf(os.Stderr, "%s (loaded in %d ms)\nchat template: %s\n", m.Info, m.LoadTime.Milliseconds(), tmpl.Origin)
	if tty {
		fmt.Fprintln(os.Stderr, "commands: /clear, /save FILE, /load FILE, /exit; Ctrl-C stops a reply, Ctrl-D or /exit ends")
	}
	s, err := newChatSession(m, tmpl, mt, kw, c.String("system"), sp, c.Int("n-predict"))
	if err != nil {
		return err
	}
	s.specialInContent = c.Bool("chat-special-in-content")
	spec, done, err := m.Speculation()
	if err != nil {
		return err
	}
	defer done()
	s.spec = spec
	s.reasoning, s.thoughts = reasoning, os.Stderr

	// Ctrl-C interrupts the reply under way; at the prompt it only reminds
	// how to leave.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	var generating atomic.Bool
	go func() {
		for range sig {
			if generating.Load() {
				s.interrupt.Store(true)
			} else {
				fmt.Fprint(os.Stderr, "\n(/exit or Ctrl-D to quit)\n> ")
			}
		}
	}()

	w := bufio.NewWriter(os.Stdout)
	flushing := writerFunc(func(p []byte) (int, error) {
		n, err := w.Write(p)
		if err == nil {
			err = w.Flush()
		}
		return n, err
	})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for {
		if tty {
			fmt.Fprint(os.Stderr, "> ")
		}
		if !in.Scan() {
			if err := in.Err(); err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
			if tty {
				fmt.Fprintln(os.Stderr)
			}
			return nil
		}
		line := strings.TrimRight(in.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		// Commands are a person's, at a terminal: piped lines may be
		// untrusted text, and a "/save FILE" there must not write a file.
		if tty && strings.HasPrefix(line, "/") {
			done, err := s.command(line)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%v\n", err)
			}
			if done {
				return nil
			}
			continue
		}
		generating.Store(true)
		st, err := s.turn(line, flushing)
		generating.Store(false)
		fmt.Fprintln(flushing)
		if err != nil {
			if !tty {
				return err
			}
			fmt.Fprintf(os.Stderr, "error: %v\n", err)
			continue
		}
		stopped := ""
		if st.Stopped {
			stopped = " (stopped)"
		}
		fmt.Fprintf(os.Stderr, "[prefill %d tokens (%d cached), generated %d tokens%s, TTFT %.1f ms, TBT %.1f ms]\n",
			st.Prefill, st.Reused, st.Generated, stopped, float64(st.TTFT.Microseconds())/1000, float64(st.TBT.Microseconds())/1000)
	}
}

// command runs a /command; done says the chat ends.
func (s *chatSession) command(line string) (done bool, err error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/exit", "/quit":
		return true, nil
	case "/clear":
		s.clear()
		fmt.Fprintln(os.Stderr, "(conversation cleared)")
	case "/save":
		if arg == "" {
			return false, errors.New("/save FILE: which file?")
		}
		b, err := json.MarshalIndent(s.msgs, "", "  ")
		if err != nil {
			return false, err
		}
		if err := os.WriteFile(arg, append(b, '\n'), 0o644); err != nil {
			return false, fmt.Errorf("/save: %w", err)
		}
		fmt.Fprintf(os.Stderr, "(saved %d messages to %s)\n", len(s.msgs), arg)
	case "/load":
		if arg == "" {
			return false, errors.New("/load FILE: which file?")
		}
		msgs, err := readConversation(arg)
		if err != nil {
			return false, err
		}
		s.load(msgs)
		fmt.Fprintf(os.Stderr, "(loaded %d messages from %s)\n", len(msgs), arg)
	default:
		return false, fmt.Errorf("unknown command %q: /clear, /save FILE, /load FILE or /exit", name)
	}
	return false, nil
}

// readConversation reads a conversation saved by /save (an OpenAI-style
// list of {role, content}).
func readConversation(path string) ([]chattemplate.Message, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("/load: %w", err)
	}
	var msgs []chattemplate.Message
	if err := json.Unmarshal(b, &msgs); err != nil {
		return nil, fmt.Errorf("/load %s: want a JSON list of {\"role\", \"content\"}: %w", path, err)
	}
	for i, m := range msgs {
		if m.Role == "" {
			return nil, fmt.Errorf("/load %s: message %d has no role", path, i)
		}
	}
	return msgs, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
