// Package server serves a model over HTTP with the OpenAI API
// (/v1/chat/completions, /v1/completions, /v1/responses, /v1/models),
// Anthropic's Messages API (/v1/messages), Ollama's API (/api/chat,
// /api/generate and the model routes), plus /health, /metrics
// (Prometheus text), /tokenize, /detokenize and a web chat page at /.
// Each API is a translation over the same chat generation, which splits
// a reasoning model's thinking from its answer. Requests run on a fixed set of sessions of one model; a request
// takes the free session whose cache shares the longest prefix with its
// prompt, so a conversation that grows turn by turn prefills only what
// each turn adds. The requests that are generating advance together, one
// row each in a shared decode pass per step (the model's sessions batch
// their decode passes; see aotlm.Model.DecodeStats), so the weights are
// read once per step for all of them. Requests beyond the sessions wait
// in a bounded queue; a full queue answers 503 with Retry-After. A client
// that goes away cancels its request (through the request's context)
// between passes. With Options.Images, chat messages may hold images
// (image_url parts), placed in the prompt as embedding rows whose ids
// derive from the image's bytes, so the session choice and the cache
// reuse compare images too.
//
// Before any route, a request whose Host header is not one of the
// server's names, or a browser request from another origin, is refused
// (Options.HostAllow and Options.CORSOrigins open them), and a request
// reuses only the cache of its own API key or client address
// (Options.SharedCache shares it). POST /slots/{id} saves a session's
// cache to a file and restores it (Options.SlotSaveDir). Multi serves
// several models in a memory budget, each through a Server of its own.
package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/limits"
)

// Options configures a Server.
type Options struct {
	// Parallel is how many requests generate at once, each on its own
	// session (0: 1).
	Parallel int
	// Queue is how many more requests may wait for a session (0: 4 per
	// session; < 0: none).
	Queue int
	// Context is each session's cache size (0: the model's).
	Context int
	// ContextShift makes requests that fill the context go on, dropping
	// the older half of the tokens after their prompt (aotlm.ContextShift),
	// unless they set context_shift false; off, they stop there (finish
	// reason "length"). A request may turn it on with context_shift true.
	ContextShift bool
	// APIKey, when set, is the Bearer token every API request must carry.
	APIKey string
	// APIKeys are more accepted Bearer tokens (each key's requests reuse
	// only their own cache unless SharedCache is set).
	APIKeys []string
	// HostAllow lists more names the Host header may carry besides IP
	// addresses, localhost and the machine's name ("*": any; ".example.com":
	// its subdomains). Other names are refused with 403, which stops
	// DNS-rebinding pages.
	HostAllow []string
	// CORSOrigins lists the browser origins ("http://app.example") that
	// may call the API from their pages ("*": any); requests from other
	// origins are refused with 403 before they do any work.
	CORSOrigins []string
	// SharedCache lets every client reuse every session's cache (and see
	// it in cached_tokens); otherwise a request reuses only the cache of
	// its own API key, or with no key of its own client address.
	SharedCache bool
	// ReadTimeout bounds the reading of a request body (0: one minute).
	ReadTimeout time.Duration
	// WorkTimeout bounds the CPU work a request asks for before it
	// generates, such as compiling a JSON schema (0: 5 seconds). That
	// work also takes a place of Parallel while it runs.
	WorkTimeout time.Duration
	// SlotSaveDir is the folder POST /slots/{id}?action=save and restore
	// write and read sessions in ("": those actions are refused).
	SlotSaveDir string
	// PromptCacheBytes, when above zero, keeps sessions in memory up to
	// that many bytes: a session about to be taken by another
	// conversation is saved first, and a request that continues a saved
	// one has it loaded back instead of prefilling it again.
	PromptCacheBytes int64
	// MaxBodyBytes bounds a request body (0: 4 MiB).
	MaxBodyBytes int64
	// ModelID is the model's name in the API (0: the model's file name).
	ModelID string
	// Now fixes the date chat templates print (zero: the current time).
	Now time.Time
	// Images places image parts of chat messages (a vision-language
	// model's encoder); nil refuses them.
	Images ImagePrompts
	// AllowLocalImages lets image parts name files of the server's
	// machine (paths and file:// URLs); otherwise only data: URLs are
	// read.
	AllowLocalImages bool
	// Speculative is the speculative decoding of requests that do not
	// choose their own (the speculative field): "" or SpecNone (one token
	// per pass), SpecLookup (prompt lookup), SpecDraft (with Draft) or
	// SpecMTP (the model's multi-token-prediction head). Requests that
	// generate at the same time verify their guesses in shared passes;
	// one whose guesses do not pay falls back to plain decoding.
	Speculative string
	// Draft is the draft model of SpecDraft (its tokenizer the model's);
	// nil refuses that type. The caller closes it after the server.
	Draft *aotlm.Model
	// DraftMax is the most tokens drafted per pass by default (0: the
	// strategy's own default).
	DraftMax int
	// NoAdapt keeps speculating even when the guesses do not pay (by
	// default a request that gains nothing falls back to plain decoding
	// for a while); for measurements and tests, as run --no-adapt.
	NoAdapt bool
	// LoadAdapter, when set, lets POST /v1/adapters load low-rank
	// adapters and DELETE /v1/adapters/{name} remove them while serving;
	// nil refuses both (GET /v1/adapters lists the loaded ones either way).
	LoadAdapter AdapterLoader
}

// Server answers the API over one model. It is safe for concurrent use.
type Server struct {
	m       *aotlm.Model
	opts    Options
	id      string
	ctx     int
	pool    *pool
	metrics metrics
	mux     *http.ServeMux
	eot     []int

	cache *promptCache // nil without Options.PromptCacheBytes

	tokOnce  sync.Once
	tokBytes [][]byte // each id's bytes, for constrained decoding

	responses responseStore // for /v1/responses' previous_response_id

	spec speculation
}

// New makes a server over m with opts.Parallel sessions.
func New(m *aotlm.Model, opts Options) (*Server, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 1
	}
	if err := limits.CheckParallel("serve: Parallel", opts.Parallel); err != nil {
		return nil, err
	}
	if opts.Queue == 0 {
		opts.Queue = 4 * opts.Parallel
	} else if opts.Queue < 0 {
		opts.Queue = 0
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.ModelID == "" {
		opts.ModelID = m.Info().Name
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = time.Minute
	}
	if opts.WorkTimeout <= 0 {
		opts.WorkTimeout = 5 * time.Second
	}
	if err := checkSpeculative(m, opts); err != nil {
		return nil, err
	}
	s := &Server{m: m, opts: opts, id: opts.ModelID, eot: m.EndOfTurnIDs()}
	p, err := newPool(m, opts.Parallel, opts.Queue, opts.Context)
	if err != nil {
		return nil, err
	}
	s.pool = p
	if opts.PromptCacheBytes > 0 {
		s.cache = &promptCache{budget: opts.PromptCacheBytes}
		p.cache = s.cache
	}
	s.ctx = p.slots[0].s.Context()
	s.metrics.start = time.Now()
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.api(s.handleChat))
	s.mux.HandleFunc("POST /v1/completions", s.api(s.handleCompletions))
	s.mux.HandleFunc("GET /v1/models", s.api(s.handleModels))
	s.mux.HandleFunc("GET /v1/models/{id}", s.api(s.handleModel))
	s.mux.HandleFunc("POST /v1/embeddings", s.api(s.handleEmbeddings))
	s.mux.HandleFunc("POST /api/embed", s.api(s.handleOllamaEmbed))
	s.mux.HandleFunc("POST /v1/rerank", s.api(s.handleRerank))
	s.mux.HandleFunc("POST /v1/reranking", s.api(s.handleRerank))
	s.mux.HandleFunc("POST /rerank", s.api(s.handleRerank))
	s.mux.HandleFunc("POST /api/embeddings", s.api(s.handleOllamaEmbeddings))
	s.mux.HandleFunc("POST /tokenize", s.api(s.handleTokenize))
	s.mux.HandleFunc("POST /detokenize", s.api(s.handleDetokenize))
	s.mux.HandleFunc("POST /slots/{id}", s.api(s.handleSlot))
	s.mux.HandleFunc("GET /v1/adapters", s.api(s.handleAdapters))
	s.mux.HandleFunc("POST /v1/adapters", s.api(s.handleAddAdapter))
	s.mux.HandleFunc("DELETE /v1/adapters/{name}", s.api(s.handleRemoveAdapter))
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /metrics", s.api(s.handleMetrics))
	s.mux.HandleFunc("POST /v1/messages", s.api(s.handleMessages))
	s.mux.HandleFunc("POST /v1/messages/count_tokens", s.api(s.handleCountTokens))
	s.mux.HandleFunc("POST /v1/responses", s.api(s.handleResponses))
	s.mux.HandleFunc("GET /v1/responses/{id}", s.api(s.handleGetResponse))
	s.mux.HandleFunc("DELETE /v1/responses/{id}", s.api(s.handleDeleteResponse))
	s.mux.HandleFunc("POST /api/chat", s.api(s.handleOllamaChat))
	s.mux.HandleFunc("POST /api/generate", s.api(s.handleOllamaGenerate))
	s.mux.HandleFunc("GET /api/tags", s.api(s.handleOllamaTags))
	s.mux.HandleFunc("POST /api/show", s.api(s.handleOllamaShow))
	s.mux.HandleFunc("GET /api/ps", s.api(s.handleOllamaPS))
	s.mux.HandleFunc("GET /api/version", s.api(s.handleOllamaVersion))
	s.mux.HandleFunc("GET /{$}", s.handleWeb)
	s.mux.HandleFunc("/", s.handleNotFound)
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return withRequestID(s.guard(s.mux)) }

// Close releases the sessions; call it after the HTTP server has shut
// down.
func (s *Server) Close() { s.pool.close() }

// ContextSize is the cache size of each session.
func (s *Server) ContextSize() int { return s.ctx }

// api wraps an API handler with the key check, the body limit and the
// request counters.
func (s *Server) api(h func(w http.ResponseWriter, r *http.Request) *apiError) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		// count by route, not by path, so ids in paths make no new series
		route := r.Pattern
		if i := strings.LastIndexByte(route, ' '); i >= 0 {
			route = route[i+1:]
		}
		defer func() { s.metrics.request(route, sw.status) }()
		if s.opts.APIKey != "" || len(s.opts.APIKeys) > 0 {
			auth := r.Header.Get("Authorization")
			tok, ok := strings.CutPrefix(auth, "Bearer ")
			if !ok {
				// Anthropic's clients send the key in X-Api-Key
				tok = r.Header.Get("X-Api-Key")
			}
			if !keyAccepted(&s.opts, tok) {
				writeErrorFor(sw, r, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key",
					Message: "a valid API key is required: send it as \"Authorization: Bearer <key>\""})
				return
			}
		}
		r.Body = http.MaxBytesReader(sw, r.Body, s.opts.MaxBodyBytes)
		if !s.readBody(sw, r) {
			return
		}
		if e := h(sw, r); e != nil {
			writeErrorFor(sw, r, e)
		}
	}
}

// keyAccepted reports whether tok is one of the API keys.
func keyAccepted(opts *Options, tok string) bool {
	if opts.APIKey != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(opts.APIKey)) == 1 {
		return true
	}
	for _, k := range opts.APIKeys {
		if k != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(k)) == 1 {
			return true
		}
	}
	return false
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	s.metrics.request("other", http.StatusNotFound)
	writeErrorFor(w, r, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
		Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
}

// statusWriter records the status code and passes Flush through.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// newID returns a random id with a prefix, as OpenAI's "chatcmpl-...".
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// errBusy is returned when every session is taken and the queue is full.
var errBusy = errors.New("the server is busy: every session is generating and the queue is full")

// slot is one session of the pool.
type slot struct {
	s     *aotlm.Session
	scope string // whose cache the session holds (see scope)
}

// pool hands out sessions: at most len(slots) at once, with up to queue
// more callers waiting.
type pool struct {
	slots  []*slot
	sem    chan struct{}
	mu     sync.Mutex
	free   []*slot
	limit  int64
	queued atomic.Int64 // callers waiting or holding a slot
	cache  *promptCache // where sessions are stashed before they are taken (nil: nowhere)
	wait   atomic.Int64 // callers waiting
}

func newPool(m *aotlm.Model, n, queue, ctx int) (*pool, error) {
	p := &pool{sem: make(chan struct{}, n), limit: int64(n + queue)}
	for range n {
		s, err := m.NewSession(ctx)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("session: %w", err)
		}
		sl := &slot{s: s}
		p.slots = append(p.slots, sl)
		p.free = append(p.free, sl)
	}
	return p, nil
}

// acquire waits for a free session, preferring the one of scope whose
// history shares the longest prefix with ids; a session of another scope
// is emptied before it is handed out, so that no request reuses (or
// learns through cached_tokens) another scope's prompt. It fails with
// errBusy when the queue is full and with ctx's error when ctx ends
// first.
func (p *pool) acquire(ctx context.Context, ids []int, scope string) (*slot, error) {
	if p.queued.Add(1) > p.limit {
		p.queued.Add(-1)
		return nil, errBusy
	}
	p.wait.Add(1)
	select {
	case p.sem <- struct{}{}:
		p.wait.Add(-1)
	case <-ctx.Done():
		p.wait.Add(-1)
		p.queued.Add(-1)
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	best, bestLen := 0, -2
	for i, sl := range p.free {
		n := -1 // another scope's session: usable, emptied
		switch {
		case sl.scope == scope:
			n = commonPrefix(sl.s.History(), ids)
		case len(sl.s.History()) == 0:
			n = 0
		}
		if n > bestLen {
			best, bestLen = i, n
		}
	}
	sl := p.free[best]
	p.free = append(p.free[:best], p.free[best+1:]...)
	if p.cache != nil {
		keep := 0
		if sl.scope == scope {
			keep = commonPrefix(sl.s.History(), ids)
		}
		p.cache.stash(sl, keep)
	}
	if sl.scope != scope {
		if err := sl.s.Reset(); err != nil {
			p.free = append(p.free, sl)
			<-p.sem
			p.queued.Add(-1)
			return nil, fmt.Errorf("emptying a session: %w", err)
		}
		sl.scope = scope
	}
	return sl, nil
}

// release gives a session back.
func (p *pool) release(sl *slot) {
	p.mu.Lock()
	p.free = append(p.free, sl)
	p.mu.Unlock()
	<-p.sem
	p.queued.Add(-1)
}

// busy is the number of sessions generating.
func (p *pool) busy() int { return len(p.sem) }

func (p *pool) close() {
	for _, sl := range p.slots {
		sl.s.Close()
	}
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
