package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// keyring holds the API keys as SHA-256 digests: every comparison is of 32
// bytes in constant time, so that neither a key's bytes nor its length
// show in how long a wrong one takes.
type keyring struct {
	sums [][sha256.Size]byte
}

func newKeyring(keys []string) *keyring {
	k := &keyring{}
	for _, key := range keys {
		if key != "" {
			k.sums = append(k.sums, sha256.Sum256([]byte(key)))
		}
	}
	return k
}

// match returns the identity of the key given ("" and false: none
// matches); every key is compared, whichever matches.
func (k *keyring) match(key string) (string, bool) {
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i, s := range k.sums {
		if subtle.ConstantTimeCompare(sum[:], s[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return hex.EncodeToString(k.sums[found][:8]), true
}

// authorized checks the request's API key when keys are set, answering
// 401 when it has none or a wrong one; it notes the key's identity.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, rec *record) bool {
	if len(s.keys.sums) == 0 {
		return true
	}
	auth := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(auth, " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		if rec.owner, ok = s.keys.match(strings.TrimSpace(key)); ok {
			return true
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="glint"`)
	msg := "an API key is required: send Authorization: Bearer KEY"
	if auth != "" {
		msg = "the API key is not valid"
	}
	writeError(w, http.StatusUnauthorized, msg)
	return false
}

// jsonContent: the body is declared JSON. A browser sends a cross-site
// POST of another type (text/plain) without asking first; of this type it
// asks (a preflight), which the server refuses unless CORS allows it.
func jsonContent(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// guard checks the Host and Origin headers and answers CORS preflights;
// false when it has answered.
func (s *Server) guard(w http.ResponseWriter, r *http.Request, rec *record) bool {
	if !s.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("Host %q is not allowed (see --allowed-host)", r.Host))
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	allowed := s.cors["*"] || s.cors[strings.ToLower(origin)]
	if allowed {
		h := w.Header()
		if s.cors["*"] {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return false
		}
		return true
	}
	// A page of the server's own origin is no other site.
	if u, err := url.Parse(origin); err == nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("origin %q is not allowed (see --cors-origin)", origin))
	return false
}

// hostAllowed is the Host check against DNS rebinding (see
// Options.AllowedHosts).
func (s *Server) hostAllowed(host string) bool {
	if s.hosts["*"] || (len(s.hosts) == 0 && (len(s.keys.sums) > 0 || !s.loopback.Load())) {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	return s.hosts[name] || s.hosts[strings.ToLower(host)]
}

// admission bounds the work requests do outside the slots: turns (a
// semaphore of HTTPThreads) for the CPU, and a byte budget for memory.
type admission struct {
	turns chan struct{}
	mu    sync.Mutex
	used  int64
	limit int64
}

func newAdmission(threads int, limit int64) *admission {
	return &admission{turns: make(chan struct{}, threads), limit: limit}
}

// reserve takes n bytes of the budget for rec's request, at once or not
// at all. A request larger than the whole budget may run alone.
func (s *Server) reserve(rec *record, n int64) bool {
	a := s.work
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used > 0 && a.used+n > a.limit {
		return false
	}
	a.used += n
	rec.reserved += n
	return true
}

// resize shrinks rec's reservation to n (the body's true size is known).
func (s *Server) resize(rec *record, n int64) {
	if n >= rec.reserved {
		return
	}
	a := s.work
	a.mu.Lock()
	a.used -= rec.reserved - n
	rec.reserved = n
	a.mu.Unlock()
}

// turn waits for a work turn for rec's request (or for ctx to end).
func (s *Server) turn(ctx context.Context, rec *record) error {
	if rec.working {
		return nil
	}
	select {
	case s.work.turns <- struct{}{}:
		rec.working = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives back rec's turn and memory: when the request's work is
// done (a generation holds a slot instead), or when it ends.
func (s *Server) release(rec *record) {
	if rec.working {
		<-s.work.turns
		rec.working = false
	}
	if rec.reserved > 0 {
		s.work.mu.Lock()
		s.work.used -= rec.reserved
		s.work.mu.Unlock()
		rec.reserved = 0
	}
}
