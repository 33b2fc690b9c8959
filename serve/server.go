// Package serve is glint's OpenAI-compatible HTTP server (`generate serve`):
// /v1/chat/completions (rendered with the model's chat template),
// /v1/completions, /v1/embeddings, /v1/models, /health, and llama-server's
// /tokenize, /detokenize and /embeddings, streaming as server-sent events. Requests run on slots, the
// sessions of one engine over one loaded model: a Scheduler queues them,
// boundedly, and the engine decodes every running slot in one batch per
// step. Bad input gets an OpenAI-style error body, never a crash; the work
// a request does outside its slot (reading, tokenizing, rendering, building
// the reply) is bounded in time, concurrency and memory, and with API keys
// set every route but /health wants one.
package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Server.
type Options struct {
	// MaxBody is the largest request body accepted (0: DefaultMaxBody);
	// a larger one gets 413.
	MaxBody int64
	// Log receives one line per request (nil: none).
	Log io.Writer
	// WriteTimeout bounds each write to a client, of a stream or of a
	// whole reply (0: 30 s): a client that stops reading is dropped and
	// its generation cancelled.
	WriteTimeout time.Duration
	// ReadHeaderTimeout bounds the reading of a request's headers (0: 10 s).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body, from the end of
	// its headers (0: 20 s): a client that sends a body slowly, or part of
	// one and then nothing, is cut off.
	BodyTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no request
	// (0: 2 min).
	IdleTimeout time.Duration
	// HTTPThreads is the most requests tokenizing, detokenizing, rendering
	// or building a reply at once (0: GOMAXPROCS); the others wait for a
	// turn, their memory already reserved.
	HTTPThreads int
	// WorkMemory is the server-wide budget of bytes that this work may
	// take at once (0: DefaultWorkMemory). Each request reserves an
	// estimate from its body's size before reading it; one that does not
	// fit gets 503 with Retry-After.
	WorkMemory int64
	// Limits are the per-request caps (zero fields: the defaults).
	Limits Limits
	// APIKeys: when any is set, every route but /health wants
	// "Authorization: Bearer KEY" (401 otherwise), and a slot's cached
	// prompt is reused and reported only for requests of the key that
	// filled it.
	APIKeys []string
	// CORSOrigins are the browser origins allowed to call the API ("*":
	// any). None: no CORS headers, preflights are refused, and a request
	// from another origin than the server's own is refused (403).
	CORSOrigins []string
	// AllowedHosts are Host header values accepted besides loopback names
	// ("*": any). Without keys, a server listening on a loopback address
	// accepts only loopback Host values (localhost, 127.0.0.0/8, ::1), so
	// that a web page cannot reach it through DNS rebinding; with
	// AllowedHosts set, every server checks Host against them and the
	// loopback names.
	AllowedHosts []string
}

// Limits cap what one request may ask for.
type Limits struct {
	TokenizeBytes int // /tokenize "content", its JSON bytes (0: MaxBody)
	DetokenizeIDs int // /detokenize "tokens" (0: 1M)
	ResponseBytes int // /detokenize's text (0: 8 MiB)
	Stops         int // stop strings (0: 16)
	StopBytes     int // stop strings' bytes together (0: 4 KiB)
	Messages      int // chat messages (0: 4096)
	MaxTokens     int // max_tokens and its aliases (0: 1M)
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.DetokenizeIDs, 1<<20)
	def(&l.ResponseBytes, 8<<20)
	def(&l.Stops, 16)
	def(&l.StopBytes, 4<<10)
	def(&l.Messages, 4096)
	def(&l.MaxTokens, 1<<20)
	return l
}

// DefaultMaxBody is the default request body limit.
const DefaultMaxBody = 8 << 20

// DefaultWorkMemory is the default budget of the work done outside the
// slots: with workCost bytes per body byte, one 8 MiB body's tokenizing at
// a time, and many ordinary requests.
const DefaultWorkMemory = 768 << 20

// workCost is what the work on a request takes per byte of its body: the
// body, its decoding, and tokenizing it (a SentencePiece prompt: ~50 bytes
// per byte of text, its character list and merge queue; a token list with
// pieces: ~60 per token), with room for the Go heap's growth.
const workCost = 64

// Server answers the API. It answers /health with 503 until SetModel makes
// it ready, and the other routes likewise.
type Server struct {
	opts   Options
	log    *log.Logger
	model  atomic.Pointer[Model]
	routes map[string]route
	http   *http.Server
	start  time.Time
	mu     sync.Mutex

	work  *admission
	keys  *keyring
	cors  map[string]bool
	hosts map[string]bool
	// base is every request's context: cancelled when a shutdown's
	// deadline passes, which ends the generations still running.
	base   context.Context
	cancel context.CancelFunc
	// loopback: the server listens on a loopback address (Serve).
	loopback atomic.Bool
}

type route struct {
	method string
	h      func(w http.ResponseWriter, r *http.Request, m *Model, rec *record)
	// loading: the route answers before the model is ready (it says so).
	loading bool
	// open: the route answers without an API key.
	open bool
}

// New makes a server that is not ready yet.
func New(o Options) *Server {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.WriteTimeout, 30*time.Second)
	def(&o.ReadHeaderTimeout, 10*time.Second)
	def(&o.BodyTimeout, 20*time.Second)
	def(&o.IdleTimeout, 2*time.Minute)
	if o.HTTPThreads <= 0 {
		o.HTTPThreads = runtime.GOMAXPROCS(0)
	}
	if o.WorkMemory <= 0 {
		o.WorkMemory = DefaultWorkMemory
	}
	if o.Limits.TokenizeBytes <= 0 {
		o.Limits.TokenizeBytes = int(min(o.MaxBody, 1<<30))
	}
	o.Limits = o.Limits.withDefaults()
	s := &Server{opts: o, log: log.New(io.Discard, "", 0), start: time.Now(),
		work: newAdmission(o.HTTPThreads, o.WorkMemory), keys: newKeyring(o.APIKeys),
		cors: set(o.CORSOrigins), hosts: set(o.AllowedHosts)}
	s.base, s.cancel = context.WithCancel(context.Background())
	if o.Log != nil {
		s.log = log.New(o.Log, "", log.LstdFlags|log.Lmicroseconds)
	}
	chat := route{method: http.MethodPost, h: s.chat}
	cmpl := route{method: http.MethodPost, h: s.completions}
	models := route{method: http.MethodGet, h: s.models}
	health := route{method: http.MethodGet, h: s.health, loading: true, open: true}
	s.routes = map[string]route{
		"/v1/chat/completions": chat, "/chat/completions": chat,
		"/v1/completions": cmpl, "/completions": cmpl,
		"/v1/models": models, "/models": models,
		"/health": health, "/v1/health": health,
		"/tokenize":   {method: http.MethodPost, h: s.tokenize},
		"/detokenize": {method: http.MethodPost, h: s.detokenize},
		// OpenAI's, and llama-server's own shape (per-token vectors without
		// pooling).
		"/v1/embeddings": {method: http.MethodPost, h: s.embeddingsOAI},
		"/embeddings":    {method: http.MethodPost, h: s.embeddingsNative},
	}
	return s
}

func set(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[strings.ToLower(strings.TrimSpace(x))] = true
	}
	return m
}

// SetModel makes the server ready to answer with m.
func (s *Server) SetModel(m *Model) { s.model.Store(m) }

// Serve answers on ln until Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		s.loopback.Store(true)
	}
	s.mu.Lock()
	if s.http == nil {
		// No ReadTimeout: its deadline would stay on the connection after
		// the body, and net/http's read that watches for a client gone would
		// cancel a longer generation; readBody sets the body's own.
		s.http = &http.Server{Handler: s, ReadHeaderTimeout: s.opts.ReadHeaderTimeout, IdleTimeout: s.opts.IdleTimeout,
			MaxHeaderBytes: 64 << 10, BaseContext: func(net.Listener) context.Context { return s.base },
			ErrorLog: s.log}
	}
	hs := s.http
	s.mu.Unlock()
	return hs.Serve(ln)
}

// Shutdown stops accepting connections and waits for the requests under
// way to finish (streams included) until ctx ends; then it cancels the
// generations still running and closes every connection, and returns
// ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	err := hs.Shutdown(ctx)
	if err != nil {
		s.cancel()
		hs.Close()
	}
	return err
}

// record is what the request's log line says, and the request's hold on
// the work budget.
type record struct {
	status int
	bytes  int64
	extra  string
	owner  string // the API key's identity ("" without keys)
	// reserved: bytes of the work budget held; working: a turn held.
	reserved int64
	working  bool
}

// recorder notes the status and size of a response, and gives each write
// its own deadline: a client that stops reading is cut off after
// WriteTimeout, whether the reply is streamed or whole.
type recorder struct {
	http.ResponseWriter
	rec     *record
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *recorder) WriteHeader(code int) {
	if w.rec.status == 0 {
		w.rec.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.rec.status == 0 {
		w.rec.status = http.StatusOK
	}
	w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.ResponseWriter.Write(b)
	w.rec.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logField is s as the log line shows it: quoted where it holds anything
// but printable ASCII other than a space, so that a client's text (a path
// with %0a) cannot forge or split a line.
func logField(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	begin := time.Now()
	rec := &record{}
	rc := http.NewResponseController(w)
	// A deadline left by the previous request on this connection would cut
	// a write that is not ours (an interim "100 Continue").
	rc.SetWriteDeadline(time.Time{})
	rw := &recorder{ResponseWriter: w, rec: rec, rc: rc, timeout: s.opts.WriteTimeout}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			// A bug, not the client's fault: say so and keep serving.
			rec.extra += fmt.Sprintf(" panic=%q", fmt.Sprint(p))
			if rec.status == 0 {
				writeError(rw, http.StatusInternalServerError, "internal error: "+fmt.Sprint(p))
			}
		}
		s.release(rec)
		s.log.Printf("%s %s %d %dB %.1fms %s%s", logField(r.Method), logField(r.URL.Path), rec.status, rec.bytes,
			float64(time.Since(begin).Microseconds())/1000, r.RemoteAddr, rec.extra)
	}()
	// The body's deadline from the start: a route that reads none (GET)
	// still has net/http read what was sent after it, boundedly.
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	if !s.guard(rw, r, rec) {
		return
	}
	rt, ok := s.routes[r.URL.Path]
	switch {
	case !ok:
		writeError(rw, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
		return
	case r.Method != rt.method:
		rw.Header().Set("Allow", rt.method)
		writeError(rw, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, rt.method, r.Method))
		return
	case !rt.open && !s.authorized(rw, r, rec):
		return
	case r.Method == http.MethodPost && !jsonContent(r):
		writeError(rw, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q: want application/json", r.Header.Get("Content-Type")))
		return
	}
	m := s.model.Load()
	if m == nil && !rt.loading {
		writeError(rw, http.StatusServiceUnavailable, "loading model")
		return
	}
	if r.Method == http.MethodPost {
		// The work's memory, reserved before the body is read: from its
		// declared length (413 over MaxBody), else as if it were MaxBody.
		if r.ContentLength > s.opts.MaxBody {
			fail(rw, s.tooLarge())
			return
		}
		n := s.opts.MaxBody
		if r.ContentLength >= 0 {
			n = r.ContentLength
		}
		if !s.reserve(rec, (n+4096)*workCost) {
			writeError(rw, http.StatusServiceUnavailable, "the server is busy: the memory for request work is taken, try again")
			return
		}
	}
	rt.h(rw, r, m, rec)
}

// apiError is an OpenAI-style error body.
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// errorType names a status's kind, as OpenAI and llama-server do.
func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusServiceUnavailable:
		return "unavailable_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// retryAfter is the Retry-After of a 503: the queue or the work budget
// is full, and a request ends within seconds.
const retryAfter = "1"

func writeError(w http.ResponseWriter, status int, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message, e.Error.Type = status, msg, errorType(status)
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, e)
}

// marshal is json.Marshal without HTML escaping: text keeps its < and >, as
// llama-server sends it.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":500,"message":"encoding the response failed","type":"server_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// httpError is an error with the status it answers.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

// fail answers err: its own status for an *httpError, the scheduler's
// errors by kind, 500 otherwise.
func fail(w http.ResponseWriter, err error) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		writeError(w, he.status, he.msg)
	case errors.Is(err, ErrBadRequest):
		writeError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), ErrBadRequest.Error()+": "))
	case errors.Is(err, ErrBusy), errors.Is(err, ErrClosed):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func (s *Server) tooLarge() error {
	return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over the limit of %d bytes", s.opts.MaxBody)}
}

// readBody reads a JSON object body of at most MaxBody bytes, within
// BodyTimeout, and decodes it into v on a work turn (held until the
// request ends or release).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, rec *record, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return s.tooLarge()
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return &httpError{http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v", s.opts.BodyTimeout)}
		}
		return badRequest("reading the request body: %v", err)
	}
	// Read whole: net/http now watches the connection for the client
	// going away, which must not time out during a long generation.
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	s.resize(rec, (int64(len(b))+4096)*workCost)
	if err := s.turn(r.Context(), rec); err != nil {
		return err
	}
	return decodeJSON(b, v)
}
func (s *Server) health(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	if m == nil {
		writeError(w, http.StatusServiceUnavailable, "loading model")
		return
	}
	st := m.Sched.Status()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok",
		"slots_idle": st.Slots - st.Processing, "slots_processing": st.Processing, "requests_queued": st.Queued})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request, m *Model, rec *record) {
	type model struct {
		ID      string         `json:"id"`
		Object  string         `json:"object"`
		Created int64          `json:"created"`
		OwnedBy string         `json:"owned_by"`
		Meta    map[string]any `json:"meta"`
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []model{{
		ID: m.Name, Object: "model", Created: s.start.Unix(), OwnedBy: "glint",
		Meta: map[string]any{"n_ctx": m.Sched.Context(), "n_vocab": m.Tokenizer.VocabSize(),
			"slots": m.Sched.Status().Slots, "chat_template": m.Template != nil},
	}}})
}
