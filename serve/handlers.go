package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/glint-llm/glint/chattemplate"
)

// promptRequest is the body of a completion or a chat completion.
type promptRequest interface {
	params() *genParams
	// prompt checks the request's own fields and makes its prompt.
	prompt(ctx context.Context, m *Model) ([]int32, error)
	// logprobs is how many alternatives each token's log-probability
	// comes with; -1: no log-probabilities.
	logprobs() (int, error)
	// endpoint is the route, for the field table.
	endpoint() endpoint
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	s.serveRequest(w, r, m, rec, &completionRequest{}, false)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	s.serveRequest(w, r, m, rec, &chatRequest{}, true)
}

func (s *Server) serveRequest(w http.ResponseWriter, r *http.Request, m *Model, rec *record, req promptRequest, chat bool) {
	err := s.readBody(w, r, rec, req)
	var gen Request
	if err == nil {
		gen, err = req.params().request(m, s.opts.Limits)
	}
	if c, ok := req.(*chatRequest); ok && err == nil && len(c.Messages) > s.opts.Limits.Messages {
		err = badRequest(`"messages": %d messages are over the limit of %d`, len(c.Messages), s.opts.Limits.Messages)
	}
	if err == nil {
		var n int
		if n, err = req.logprobs(); n >= 0 {
			gen.Logprobs, gen.TopLogprobs = true, n
		}
	}
	if c, ok := req.(*chatRequest); ok && err == nil {
		err = c.useTools(&gen, m)
	}
	if err == nil {
		gen.Prompt, err = req.prompt(r.Context(), m)
	}
	if err != nil {
		fail(w, err)
		return
	}
	// The prompt is made: the request now waits for, and holds, a slot.
	s.release(rec)
	gen.Owner = rec.owner
	if chat {
		gen.EndTokens = m.EndOfTurn
	}
	var tools *toolUse
	if c, ok := req.(*chatRequest); ok {
		tools = c.use
	}
	s.generate(w, r, m, rec, gen, req.params(), chat, tools)
}

func (c *completionRequest) params() *genParams { return &c.genParams }

func (c *completionRequest) prompt(_ context.Context, m *Model) ([]int32, error) {
	return completionPrompt(m.Tokenizer, c.Prompt)
}

func (c *chatRequest) params() *genParams { return &c.genParams }

// prompt renders the conversation with the model's template; control-token
// text in the messages is text unless the model serves SpecialInContent.
func (c *chatRequest) prompt(ctx context.Context, m *Model) ([]int32, error) {
	msgs, err := c.messages()
	if err != nil {
		return nil, err
	}
	if m.Template == nil {
		return nil, badRequest("%v", m.TemplateErr)
	}
	kw, err := c.templateKwargs(m.Kwargs)
	if err != nil {
		return nil, err
	}
	reasoning, err := c.reasoning(m.Reasoning)
	if err != nil {
		return nil, err
	}
	in := chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, BOS: m.Chat.BOS, EOS: m.Chat.EOS, Kwargs: kw}
	if err := c.templateInput(&in, msgs); err != nil {
		return nil, err
	}
	p, err := m.Template.RenderPrompt(ctx, m.Tokenizer, in, m.SpecialInContent)
	if err != nil {
		// The template rejecting the conversation is the client's fault (400);
		// a template failing on its own is the model's (TemplateError: fail
		// answers 500, naming the template).
		var re *chattemplate.RaiseError
		if errors.As(err, &re) {
			return nil, badRequest("chat template: %s", re.Msg)
		}
		return nil, err
	}
	c.think = NewThinkSplit(reasoning, p.Text)
	return p.Encode(m.Tokenizer, true), nil
}

// usage is OpenAI's token count.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *predictionDetails `json:"completion_tokens_details,omitempty"`
}

func usageOf(res Result) *usage {
	u := &usage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens,
		TotalTokens: res.PromptTokens + res.CompletionTokens}
	u.PromptTokensDetails.CachedTokens = res.CachedTokens
	u.CompletionTokensDetails = predictions(res)
	return u
}

type message struct {
	Role             string        `json:"role"`
	Content          *string       `json:"content"`
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}

type delta struct {
	Role             string        `json:"role,omitempty"`
	Content          *string       `json:"content,omitempty"`
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}

// choice is one choice of a reply or a chunk: Text for completions,
// Message or Delta for chat.
type choice struct {
	Index        int      `json:"index"`
	Text         *string  `json:"text,omitempty"`
	Message      *message `json:"message,omitempty"`
	Delta        *delta   `json:"delta,omitempty"`
	Logprobs     any      `json:"logprobs"`
	FinishReason *string  `json:"finish_reason"`
}

type reply struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
}

func newID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// generate runs gen and answers with the whole reply, or streams it; a
// chat reply with tools has its calls parsed.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, m *Model, rec *record, gen Request, p *genParams, chat bool, tools *toolUse) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st, err := m.Sched.Submit(ctx, gen)
	if err != nil {
		fail(w, err)
		return
	}
	rp := reply{Model: m.Name, Created: time.Now().Unix(), ID: newID("cmpl-"), Object: "text_completion"}
	if chat {
		rp.ID, rp.Object = newID("chatcmpl-"), "chat.completion"
	}
	// A constrained reply is the document asked for, never a think block.
	think := p.think
	if gen.Grammar != nil {
		think = nil
	}
	// logprobsOf shapes log-probabilities as the route shows them; nil
	// (JSON null) when the request asked for none.
	offset := 0
	logprobsOf := func(lps []TokenLogprob) any {
		switch {
		case !gen.Logprobs:
			return nil
		case chat:
			return chatLogprobsOf(m.Tokenizer, lps)
		}
		return legacyLogprobsOf(m.Tokenizer, lps, &offset)
	}
	var end error
	defer func() {
		// A client gone cancels the generation; its slot frees at the next
		// step. Waiting for that keeps the log line exact, and lets a
		// shutdown drain every generation.
		cancel()
		res := st.Wait()
		rec.extra = fmt.Sprintf(" prompt=%d cached=%d gen=%d finish=%s slot=%d shifts=%d ttft=%.1fms",
			res.PromptTokens, res.CachedTokens, res.CompletionTokens, res.Finish, res.Slot, res.Shifts,
			float64(res.TTFT.Microseconds())/1000)
		if end != nil {
			rec.extra += fmt.Sprintf(" ended=%q", end.Error())
		}
	}()

	if !p.streaming() {
		var text strings.Builder
		var lps []TokenLogprob
		for {
			c, done, err := st.Next(ctx)
			if done {
				end = err
				break
			}
			text.WriteString(c.Text)
			lps = append(lps, c.Logprobs...)
		}
		if end != nil {
			if ctx.Err() == nil {
				fail(w, end)
			}
			return
		}
		res := st.Result()
		c := choice{FinishReason: &res.Finish}
		if chat {
			// The think block is split off first; calls are parsed from
			// what follows it.
			reasoning, content := "", text.String()
			if think != nil {
				r1, c1 := think.Feed(content)
				r2, c2 := think.Flush()
				reasoning, content = r1+r2, c1+c2
			}
			c.Message = tools.message(content, &res.Finish)
			c.Message.ReasoningContent = reasoning
		} else {
			c.Text = ptr(text.String())
		}
		c.Logprobs = logprobsOf(lps)
		rp.Choices, rp.Usage = []choice{c}, usageOf(res)
		writeJSON(w, http.StatusOK, rp)
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) error {
		b, err := marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if chat {
		rp.Object = "chat.completion.chunk"
	}
	chunk := func(text *string, lps []TokenLogprob, finish *string) reply {
		c := choice{FinishReason: finish, Logprobs: logprobsOf(lps)}
		if chat {
			c.Delta = &delta{Content: text}
		} else {
			c.Text = text
			if c.Text == nil {
				c.Text = ptr("")
			}
		}
		out := rp
		out.Choices = []choice{c}
		return out
	}
	// piece is a chunk of text and, in a chat, reasoning; either may be
	// empty.
	piece := func(reasoning, text string, lps []TokenLogprob) reply {
		out := chunk(&text, lps, nil)
		if reasoning != "" {
			out.Choices[0].Delta.ReasoningContent = &reasoning
			if text == "" {
				out.Choices[0].Delta.Content = nil
			}
		}
		return out
	}
	if chat {
		first := chunk(ptr(""), nil, nil)
		first.Choices[0].Delta.Role = "assistant"
		if end = send(first); end != nil {
			return
		}
	}
	for {
		c, done, err := st.Next(ctx)
		if done {
			end = err
			break
		}
		reasoning, text := "", c.Text
		if think != nil {
			reasoning, text = think.Feed(c.Text)
		}
		if text = tools.stream(text); reasoning == "" && text == "" && len(c.Logprobs) == 0 {
			continue // held back: maybe a tag, a trimmed space, or the start of a call
		}
		if end = send(piece(reasoning, text, c.Logprobs)); end != nil {
			return // the client is gone: cancel (deferred) frees the slot
		}
	}
	if end == nil && think != nil {
		if r, t := think.Flush(); r != "" || t != "" {
			t = tools.stream(t)
			if end = send(piece(r, t, nil)); end != nil {
				return
			}
		}
	}
	if end != nil {
		if ctx.Err() == nil {
			var e apiError
			e.Error.Code, e.Error.Message, e.Error.Type = http.StatusInternalServerError, end.Error(), errorType(500)
			send(e)
		}
		return
	}
	res := st.Result()
	if tools != nil {
		if end = tools.sendEnd(send, chunk, &res.Finish); end != nil {
			return
		}
	}
	if end = send(chunk(nil, nil, &res.Finish)); end != nil {
		return
	}
	if p.includeUsage() {
		u := rp
		u.Choices, u.Usage = []choice{}, usageOf(res)
		if end = send(u); end != nil {
			return
		}
	}
	if _, end = fmt.Fprint(w, "data: [DONE]\n\n"); end == nil {
		end = rc.Flush()
	}
}

func ptr[T any](v T) *T { return &v }

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	var req struct {
		Content    json.RawMessage `json:"content"`
		AddSpecial bool            `json:"add_special"`
		WithPieces bool            `json:"with_pieces"`
	}
	if err := s.readBody(w, r, rec, &req); err != nil {
		fail(w, err)
		return
	}
	if n := len(req.Content); n > s.opts.Limits.TokenizeBytes {
		fail(w, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf(`"content": %d bytes are over the limit of %d`, n, s.opts.Limits.TokenizeBytes)})
		return
	}
	ids := []int32{}
	if len(req.Content) > 0 && string(req.Content) != "null" {
		var err error
		if ids, err = tokenizeMixed(m.Tokenizer, req.Content, req.AddSpecial); err != nil {
			fail(w, badRequest(`"content": %v`, err))
			return
		}
	}
	if !req.WithPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	type piece struct {
		ID    int32 `json:"id"`
		Piece any   `json:"piece"`
	}
	out := make([]piece, len(ids))
	for i, id := range ids {
		b := m.Tokenizer.SpecialPiece(id)
		out[i] = piece{ID: id, Piece: string(b)}
		if !utf8.Valid(b) {
			// As llama-server: a piece that is not valid UTF-8 is its bytes.
			bs := make([]int, len(b))
			for k, c := range b {
				bs[k] = int(c)
			}
			out[i].Piece = bs
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	var req struct {
		Tokens []int64 `json:"tokens"`
	}
	if err := s.readBody(w, r, rec, &req); err != nil {
		fail(w, err)
		return
	}
	lim := s.opts.Limits
	if len(req.Tokens) > lim.DetokenizeIDs {
		fail(w, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf(`"tokens": %d ids are over the limit of %d`, len(req.Tokens), lim.DetokenizeIDs)})
		return
	}
	var b []byte
	for i, id := range req.Tokens {
		if id < 0 || id >= int64(m.Tokenizer.VocabSize()) {
			fail(w, badRequest(`"tokens[%d]": token id %d is outside the vocabulary of %d`, i, id, m.Tokenizer.VocabSize()))
			return
		}
		b = append(b, m.Tokenizer.SpecialPiece(int32(id))...)
		if len(b) > lim.ResponseBytes {
			fail(w, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf(`"tokens": their text is over the limit of %d bytes`, lim.ResponseBytes)})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": strings.ToValidUTF8(string(b), "\uFFFD")})
}
