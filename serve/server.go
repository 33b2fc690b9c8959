// Package serve is glint's OpenAI-compatible HTTP server (`generate serve`):
// /v1/chat/completions (rendered with the model's chat template),
// /v1/completions, /v1/models, /health, and llama-server's /tokenize and
// /detokenize, streaming as server-sent events. Requests run on slots, the
// sessions of one engine over one loaded model: a Scheduler queues them,
// boundedly, and the engine decodes every running slot in one batch per
// step. Bad input gets an OpenAI-style error body, never a crash.
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
	// WriteTimeout bounds each write to a client (0: 30 s): a client that
	// stops reading is dropped and its generation cancelled.
	WriteTimeout time.Duration
}

// DefaultMaxBody is the default request body limit.
const DefaultMaxBody = 8 << 20

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
}

type route struct {
	method string
	h      func(w http.ResponseWriter, r *http.Request, m *Model, rec *record)
	// loading: the route answers before the model is ready (it says so).
	loading bool
}

// New makes a server that is not ready yet.
func New(o Options) *Server {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	s := &Server{opts: o, log: log.New(io.Discard, "", 0), start: time.Now()}
	if o.Log != nil {
		s.log = log.New(o.Log, "", log.LstdFlags|log.Lmicroseconds)
	}
	chat := route{method: http.MethodPost, h: s.chat}
	cmpl := route{method: http.MethodPost, h: s.completions}
	models := route{method: http.MethodGet, h: s.models}
	health := route{method: http.MethodGet, h: s.health, loading: true}
	s.routes = map[string]route{
		"/v1/chat/completions": chat, "/chat/completions": chat,
		"/v1/completions": cmpl, "/completions": cmpl,
		"/v1/models": models, "/models": models,
		"/health": health, "/v1/health": health,
		"/tokenize":   {method: http.MethodPost, h: s.tokenize},
		"/detokenize": {method: http.MethodPost, h: s.detokenize},
	}
	return s
}

// SetModel makes the server ready to answer with m.
func (s *Server) SetModel(m *Model) { s.model.Store(m) }

// Serve answers on ln until Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.http == nil {
		s.http = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	}
	hs := s.http
	s.mu.Unlock()
	return hs.Serve(ln)
}

// Shutdown stops accepting connections and waits for the requests under
// way to finish (streams included), or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Shutdown(ctx)
}

// record is what the request's log line says.
type record struct {
	status int
	bytes  int64
	extra  string
}

// recorder notes the status and size of a response.
type recorder struct {
	http.ResponseWriter
	rec *record
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
	n, err := w.ResponseWriter.Write(b)
	w.rec.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	begin := time.Now()
	rec := &record{}
	rw := &recorder{ResponseWriter: w, rec: rec}
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
		s.log.Printf("%s %s %d %dB %.1fms %s%s", r.Method, r.URL.Path, rec.status, rec.bytes,
			float64(time.Since(begin).Microseconds())/1000, r.RemoteAddr, rec.extra)
	}()
	rt, ok := s.routes[r.URL.Path]
	switch {
	case !ok:
		writeError(rw, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
		return
	case r.Method != rt.method:
		rw.Header().Set("Allow", rt.method)
		writeError(rw, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, rt.method, r.Method))
		return
	}
	m := s.model.Load()
	if m == nil && !rt.loading {
		writeError(rw, http.StatusServiceUnavailable, "loading model")
		return
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
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusServiceUnavailable:
		return "unavailable_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func writeError(w http.ResponseWriter, status int, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message, e.Error.Type = status, msg, errorType(status)
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

// readBody reads a JSON object body of at most MaxBody bytes into v.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	tooLarge := &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over the limit of %d bytes", s.opts.MaxBody)}
	if r.ContentLength > s.opts.MaxBody {
		return tooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge
		}
		return badRequest("reading the request body: %v", err)
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
