package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/tokenizer"
)

// maxEmbedInputs is the most inputs one embeddings request may hold
// (OpenAI's limit).
const maxEmbedInputs = 2048

// EmbedRequest is an embeddings request as the HTTP layer hands it to a
// Scheduler: its prompts, embedded one after the other on one slot.
type EmbedRequest struct {
	Prompts [][]int32
	Pooling engine.Pooling
	// Owner is whose request it is (see Request.Owner): the slot's cells
	// hold the last prompt afterwards, reusable by that owner's requests.
	Owner string
}

// embedJob is an embedding's part of a job: what to embed, and the
// vectors (written on the slot's goroutine before the job ends).
type embedJob struct {
	prompts [][]int32
	pooling engine.Pooling
	out     [][][]float32
}

// Embed runs r on a slot, queued as a generation is, and returns each
// prompt's vectors: one pooled and L2-normalised, or with PoolingNone one
// per token as the model gives them (llama-server's normalisation). A
// prompt longer than a slot's context is ErrBadRequest.
func (s *Scheduler) Embed(ctx context.Context, r EmbedRequest) ([][][]float32, Result, error) {
	if len(r.Prompts) == 0 {
		return nil, Result{}, fmt.Errorf("%w: no input", ErrBadRequest)
	}
	for i, p := range r.Prompts {
		if len(p) == 0 {
			return nil, Result{}, fmt.Errorf("%w: input %d is empty", ErrBadRequest, i)
		}
		if len(p) > s.Context() {
			return nil, Result{}, fmt.Errorf("%w: input %d of %d tokens does not fit the context of %d tokens (a slot's share of -c)", ErrBadRequest, i, len(p), s.Context())
		}
		for _, id := range p {
			if id < 0 || int(id) >= s.e.Vocab() {
				return nil, Result{}, fmt.Errorf("%w: input %d: token id %d is outside the vocabulary of %d", ErrBadRequest, i, id, s.e.Vocab())
			}
		}
	}
	ej := &embedJob{prompts: r.Prompts, pooling: r.Pooling}
	j := &job{ctx: ctx, req: Request{Owner: r.Owner}, out: newStream(), submitted: time.Now(), embed: ej}
	if err := s.enqueue(j); err != nil {
		return nil, Result{}, err
	}
	// The job ends (its vectors written) before its stream says so: on
	// the slot, or at once when it leaves the queue.
	for {
		if _, done, err := j.out.Next(context.Background()); done {
			if err != nil {
				return nil, j.out.Result(), err
			}
			return ej.out, j.out.Result(), nil
		}
	}
}

// embed runs j's prompts on its slot's session.
func (s *Scheduler) embed(j *job, sl *slot) error {
	ej := j.embed
	j.res = Result{Slot: sl.id}
	for _, p := range ej.prompts {
		v, err := sl.sess.Embed(j.ctx, p, ej.pooling)
		if err != nil {
			return err
		}
		if ej.pooling != engine.PoolingNone {
			for _, x := range v {
				engine.Normalize(x)
			}
		}
		ej.out = append(ej.out, v)
		j.res.PromptTokens += len(p)
	}
	return nil
}

// embeddingRequest is the body of /v1/embeddings (OpenAI's) and of
// llama-server's /embeddings, which also takes "content".
type embeddingRequest struct {
	Input          json.RawMessage `json:"input"`
	Content        json.RawMessage `json:"content"`
	Model          string          `json:"model"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// route makes decodeJSON refuse a field the request does not have, so
// that none is silently ignored.
func (*embeddingRequest) route() string { return "/v1/embeddings" }

// embedPrompts reads "input" as llama-server's tokenize_input_prompts: a
// string, an array of token ids, or an array mixing strings and ids is one
// prompt (a string first gets BOS); an array of those is one prompt each.
func embedPrompts(t *tokenizer.Tokenizer, field string, raw json.RawMessage) ([][]int32, error) {
	one := func(raw json.RawMessage) ([]int32, error) {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) == nil && len(list) == 0 {
			return nil, fmt.Errorf("an empty array")
		}
		return tokenizeMixed(t, raw, true)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || !nested(list) {
		p, err := one(raw)
		if err != nil {
			return nil, badRequest("%q: %v", field, err)
		}
		return [][]int32{p}, nil
	}
	if len(list) > maxEmbedInputs {
		return nil, badRequest("%q: %d inputs are over the limit of %d", field, len(list), maxEmbedInputs)
	}
	out := make([][]int32, len(list))
	for i, e := range list {
		if b := bytes.TrimSpace(e); len(b) == 0 || b[0] != '"' && b[0] != '[' {
			return nil, badRequest("%q[%d]: want a string, an array of token ids, or an array of strings and token ids", field, i)
		}
		p, err := one(e)
		if err != nil {
			return nil, badRequest("%q[%d]: %v", field, i, err)
		}
		out[i] = p
	}
	return out, nil
}

// nested: list is several prompts, not one — an array of strings only, or
// holding an array.
func nested(list []json.RawMessage) bool {
	strs := 0
	for _, e := range list {
		b := bytes.TrimSpace(e)
		if len(b) > 0 && b[0] == '[' {
			return true
		}
		if len(b) > 0 && b[0] == '"' {
			strs++
		}
	}
	return len(list) > 0 && strs == len(list)
}

// oaiEmbedding is one item of OpenAI's embeddings list: Embedding is the
// floats, or their little-endian float32 bytes in base64.
type oaiEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embedUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (s *Server) embeddingsOAI(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	s.embeddings(w, r, m, rec, true)
}

func (s *Server) embeddingsNative(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	s.embeddings(w, r, m, rec, false)
}

// embeddings answers /v1/embeddings (oai) in OpenAI's shape, and
// llama-server's /embeddings in its own: an array of {index, embedding},
// each embedding an array of vectors (one per token without pooling).
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request, m *Model, rec *record, oai bool) {
	if !m.Embeddings {
		writeError(w, http.StatusNotImplemented, "this server does not serve embeddings (it was started with --embeddings=false)")
		return
	}
	var req embeddingRequest
	if err := s.readBody(w, r, rec, &req); err != nil {
		fail(w, err)
		return
	}
	if oai && m.Pooling == engine.PoolingNone {
		fail(w, badRequest("pooling type 'none' is not OpenAI-compatible: start the server with another --pooling, or use /embeddings"))
		return
	}
	b64 := false
	if f := req.EncodingFormat; f != nil {
		switch *f {
		case "base64":
			b64 = true
		case "float":
		default:
			fail(w, badRequest(`"encoding_format": %q: want float or base64`, *f))
			return
		}
	}
	if d := req.Dimensions; d != nil && *d != m.Embd {
		fail(w, badRequest(`"dimensions": %d: this model's embeddings have %d`, *d, m.Embd))
		return
	}
	field, raw := "input", req.Input
	if absent(raw) {
		field, raw = "content", req.Content
	}
	if absent(raw) {
		fail(w, badRequest(`"input" or "content" must be provided`))
		return
	}
	prompts, err := embedPrompts(m.Tokenizer, field, raw)
	if err != nil {
		fail(w, err)
		return
	}
	// The prompts are made: the request now waits for, and holds, a slot,
	// with the memory of its reply reserved (floats as JSON text, twice:
	// the values and their encoding).
	s.release(rec)
	vectors := len(prompts)
	if m.Pooling == engine.PoolingNone {
		vectors = 0
		for _, p := range prompts {
			vectors += len(p)
		}
	}
	replyBytes := int64(vectors) * int64(m.Embd) * 48
	if replyBytes > s.opts.WorkMemory {
		fail(w, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the reply of %d vectors of %d would be over the server's work memory (send fewer inputs)", vectors, m.Embd)})
		return
	}
	if !s.reserve(rec, replyBytes) {
		writeError(w, http.StatusServiceUnavailable, "the server is busy: the memory for request work is taken, try again")
		return
	}
	vecs, res, err := m.Sched.Embed(r.Context(), EmbedRequest{Prompts: prompts, Pooling: m.Pooling, Owner: rec.owner})
	rec.extra = fmt.Sprintf(" embed=%d prompt=%d pooling=%v slot=%d", len(prompts), res.PromptTokens, m.Pooling, res.Slot)
	if err != nil {
		if r.Context().Err() == nil {
			fail(w, err)
		}
		return
	}
	if err := s.turn(r.Context(), rec); err != nil {
		return
	}
	if !oai {
		type item struct {
			Index     int         `json:"index"`
			Embedding [][]float32 `json:"embedding"`
		}
		out := make([]item, len(vecs))
		for i, v := range vecs {
			out[i] = item{Index: i, Embedding: v}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	data := make([]oaiEmbedding, len(vecs))
	for i, v := range vecs {
		data[i] = oaiEmbedding{Object: "embedding", Index: i, Embedding: v[0]}
		if b64 {
			data[i].Embedding = base64Floats(v[0])
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": m.Name,
		"usage": embedUsage{PromptTokens: res.PromptTokens, TotalTokens: res.PromptTokens}})
}
