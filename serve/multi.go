package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aotlm/aotlm"
)

// ModelSource is one model a Multi serves, opened when a request first
// names it.
type ModelSource struct {
	// ID is the model's name in the API.
	ID string
	// Open opens the model (with its chat template set); the Multi
	// closes it when it unloads it.
	Open func() (*aotlm.Model, error)
	// Bytes is the memory the model's weights take once loaded (an
	// artifact's file size: its weights are mapped from it).
	Bytes int64
}

// MultiOptions configures a Multi besides the Options of each model's
// Server.
type MultiOptions struct {
	// MaxMemory bounds the memory of the loaded models: their weights
	// and the sessions of each (0: DefaultMaxMemory). A model is loaded
	// only once the least recently used idle ones are unloaded to make
	// room.
	MaxMemory int64
	// IdleUnload unloads a model no request used for that long (0:
	// never).
	IdleUnload time.Duration
}

// Multi serves several models from one process: the API of a Server for
// each, the request's "model" field choosing which (the first model when
// it names none). A model is loaded on its first request and unloaded,
// least recently used first, when loading another would exceed
// MultiOptions.MaxMemory, or after MultiOptions.IdleUnload. A request for
// a model being loaded, or waiting for room, waits (until its client
// goes away). GET /v1/models lists every model, loaded or not.
type Multi struct {
	opts    Options
	mo      MultiOptions
	sources []ModelSource
	byID    map[string]int

	mu     sync.Mutex
	cond   *sync.Cond
	models map[string]*loadedModel
	used   int64 // bytes of the loaded models
	closed bool

	loads, unloads, loadFailures atomic.Int64
	stop                         chan struct{}
	idleDone                     chan struct{}
}

// loadedModel is a model a Multi holds (or is loading).
type loadedModel struct {
	srv      *Server
	m        *aotlm.Model
	bytes    int64
	inflight int
	last     time.Time
	loading  bool
}

// NewMulti makes a server over sources with opts for each model (its
// ModelID is the source's ID).
func NewMulti(sources []ModelSource, opts Options, mo MultiOptions) (*Multi, error) {
	if len(sources) == 0 {
		return nil, errors.New("serve: no models to serve")
	}
	if mo.MaxMemory <= 0 {
		mo.MaxMemory = DefaultMaxMemory()
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = time.Minute
	}
	mu := &Multi{opts: opts, mo: mo, sources: sources, byID: map[string]int{}, models: map[string]*loadedModel{},
		stop: make(chan struct{}), idleDone: make(chan struct{})}
	mu.cond = sync.NewCond(&mu.mu)
	for i, src := range sources {
		if src.ID == "" || src.Open == nil {
			return nil, fmt.Errorf("serve: model %d has no id or no way to open it", i)
		}
		if _, dup := mu.byID[src.ID]; dup {
			return nil, fmt.Errorf("serve: two models named %q: give them distinct names", src.ID)
		}
		if src.Bytes > mo.MaxMemory {
			return nil, fmt.Errorf("serve: model %q takes %d bytes, more than the memory budget of %d", src.ID, src.Bytes, mo.MaxMemory)
		}
		mu.byID[src.ID] = i
	}
	go mu.unloadIdle()
	return mu, nil
}

// Handler returns the HTTP handler of every model's API.
func (mu *Multi) Handler() http.Handler {
	return guard(&mu.opts, func(string, int) {}, http.HandlerFunc(mu.serve))
}

// Close unloads every model; call it after the HTTP server has shut
// down.
func (mu *Multi) Close() {
	mu.mu.Lock()
	if mu.closed {
		mu.mu.Unlock()
		return
	}
	mu.closed = true
	close(mu.stop)
	for mu.busy() {
		mu.cond.Wait()
	}
	for id, lm := range mu.models {
		mu.unload(id, lm)
	}
	mu.mu.Unlock()
	<-mu.idleDone
}

// Serve answers HTTP on ln until ctx is done, as Server.Serve does.
func (mu *Multi) Serve(ctx context.Context, ln netListener, log io.Writer) error {
	return serveHTTP(ctx, ln, mu.Handler(), log)
}

// busy reports whether a model is loading or serving (mu.mu held).
func (mu *Multi) busy() bool {
	for _, lm := range mu.models {
		if lm.loading || lm.inflight > 0 {
			return true
		}
	}
	return false
}

func (mu *Multi) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		mu.handleModels(w, r)
		return
	case r.Method == http.MethodGet && r.URL.Path == "/metrics":
		mu.handleMetrics(w)
		return
	case r.Method == http.MethodGet && r.URL.Path == "/":
		writeChatPage(w) // without loading a model
		return
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "models": len(mu.sources), "loaded": mu.loadedIDs()})
		return
	}
	if mu.opts.APIKey != "" || len(mu.opts.APIKeys) > 0 {
		// checked before a model loads for the request
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !keyAccepted(&mu.opts, tok) {
			if r.URL.Path != "/" {
				writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key",
					Message: "a valid API key is required: send it as \"Authorization: Bearer <key>\""})
				return
			}
		}
	}
	id := mu.sources[0].ID
	if name, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok && r.Method == http.MethodGet {
		id = name
	} else if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody(mu.opts))
		if !readBodyWithin(w, r, mu.opts.ReadTimeout) {
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: "reading the request body: " + err.Error()})
			return
		}
		var named struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &named) == nil && named.Model != "" {
			id = named.Model
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if _, ok := mu.byID[id]; !ok {
		// "model:adapter" goes to the model, whose server checks the adapter
		if i := strings.LastIndexByte(id, ':'); i > 0 {
			if _, ok := mu.byID[id[:i]]; ok {
				id = id[:i]
			}
		}
	}
	if _, ok := mu.byID[id]; !ok {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: "the model " + jsonQuote(id) + " does not exist: this server serves " + strings.Join(mu.ids(), ", ")})
		return
	}
	srv, e := mu.acquire(r.Context(), id)
	if e != nil {
		writeError(w, e)
		return
	}
	defer mu.release(id)
	srv.Handler().ServeHTTP(w, r)
}

// acquire returns the Server of model id, loading it first (after
// unloading idle models to make room) if need be.
func (mu *Multi) acquire(ctx context.Context, id string) (*Server, *apiError) {
	stopWaiting := context.AfterFunc(ctx, func() {
		mu.mu.Lock()
		mu.cond.Broadcast()
		mu.mu.Unlock()
	})
	defer stopWaiting()
	src := mu.sources[mu.byID[id]]
	mu.mu.Lock()
	defer mu.mu.Unlock()
	for {
		if mu.closed {
			return nil, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "the server is shutting down"}
		}
		if ctx.Err() != nil {
			return nil, &apiError{Status: 499, Type: "invalid_request_error", Code: "client_closed", Message: "the client went away while the model loaded"}
		}
		lm := mu.models[id]
		if lm != nil && !lm.loading {
			lm.inflight++
			lm.last = time.Now()
			return lm.srv, nil
		}
		if lm == nil && mu.makeRoom(src.Bytes) {
			break
		}
		mu.cond.Wait() // for the load, or for room
	}
	lm := &loadedModel{loading: true, bytes: src.Bytes}
	mu.models[id] = lm
	mu.used += lm.bytes
	mu.mu.Unlock()
	srv, m, err := mu.open(src)
	mu.mu.Lock()
	lm.loading = false
	mu.cond.Broadcast()
	if err != nil {
		delete(mu.models, id)
		mu.used -= lm.bytes
		mu.loadFailures.Add(1)
		return nil, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("loading the model %q: %v", id, err)}
	}
	mu.loads.Add(1)
	lm.srv, lm.m = srv, m
	sessions := srv.sessionBytes()
	lm.bytes += sessions
	mu.used += sessions
	lm.inflight, lm.last = 1, time.Now()
	// the sessions are known only now: make room for them too
	mu.makeRoom(0)
	return srv, nil
}

// open opens a model and its Server.
func (mu *Multi) open(src ModelSource) (*Server, *aotlm.Model, error) {
	m, err := src.Open()
	if err != nil {
		return nil, nil, err
	}
	o := mu.opts
	o.ModelID = src.ID
	if o.Context > m.Info().Context {
		o.Context = m.Info().Context
	}
	srv, err := New(m, o)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return srv, m, nil
}

// makeRoom unloads idle models, least recently used first, until need
// more bytes fit the budget; false when they do not (the rest are busy).
// mu.mu is held.
func (mu *Multi) makeRoom(need int64) bool {
	for mu.used+need > mu.mo.MaxMemory {
		var oldest string
		var at time.Time
		for id, lm := range mu.models {
			if !lm.loading && lm.inflight == 0 && (oldest == "" || lm.last.Before(at)) {
				oldest, at = id, lm.last
			}
		}
		if oldest == "" {
			return false
		}
		mu.unload(oldest, mu.models[oldest])
	}
	return true
}

// unload closes a loaded model (mu.mu held, the model idle).
func (mu *Multi) unload(id string, lm *loadedModel) {
	delete(mu.models, id)
	mu.used -= lm.bytes
	if lm.srv != nil {
		lm.srv.Close()
	}
	if lm.m != nil {
		lm.m.Close()
	}
	mu.unloads.Add(1)
	mu.cond.Broadcast()
}

func (mu *Multi) release(id string) {
	mu.mu.Lock()
	if lm := mu.models[id]; lm != nil {
		lm.inflight--
		lm.last = time.Now()
	}
	mu.cond.Broadcast()
	mu.mu.Unlock()
}

// unloadIdle unloads the models idle for MultiOptions.IdleUnload.
func (mu *Multi) unloadIdle() {
	defer close(mu.idleDone)
	if mu.mo.IdleUnload <= 0 {
		<-mu.stop
		return
	}
	t := time.NewTicker(max(mu.mo.IdleUnload/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-mu.stop:
			return
		case now := <-t.C:
			mu.mu.Lock()
			for id, lm := range mu.models {
				if !lm.loading && lm.inflight == 0 && now.Sub(lm.last) >= mu.mo.IdleUnload {
					mu.unload(id, lm)
				}
			}
			mu.mu.Unlock()
		}
	}
}

func (mu *Multi) ids() []string {
	out := make([]string, len(mu.sources))
	for i, s := range mu.sources {
		out[i] = s.ID
	}
	return out
}

func (mu *Multi) loadedIDs() []string {
	mu.mu.Lock()
	defer mu.mu.Unlock()
	out := []string{}
	for id, lm := range mu.models {
		if !lm.loading {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// handleModels answers GET /v1/models with every model, loaded or not.
func (mu *Multi) handleModels(w http.ResponseWriter, r *http.Request) {
	if mu.opts.APIKey != "" || len(mu.opts.APIKeys) > 0 {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !keyAccepted(&mu.opts, tok) {
			writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key",
				Message: "a valid API key is required: send it as \"Authorization: Bearer <key>\""})
			return
		}
	}
	loaded := map[string]bool{}
	for _, id := range mu.loadedIDs() {
		loaded[id] = true
	}
	data := []map[string]any{}
	for _, src := range mu.sources {
		data = append(data, map[string]any{"id": src.ID, "object": "model", "created": 0, "owned_by": "aotlm",
			"meta": map[string]any{"loaded": loaded[src.ID], "bytes": src.Bytes}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// handleMetrics answers GET /metrics with the loads and the memory.
func (mu *Multi) handleMetrics(w http.ResponseWriter) {
	mu.mu.Lock()
	used, n := mu.used, len(mu.models)
	mu.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP aotlm_model_loads_total Models loaded.\n# TYPE aotlm_model_loads_total counter\naotlm_model_loads_total %d\n", mu.loads.Load())
	fmt.Fprintf(w, "# HELP aotlm_model_unloads_total Models unloaded.\n# TYPE aotlm_model_unloads_total counter\naotlm_model_unloads_total %d\n", mu.unloads.Load())
	fmt.Fprintf(w, "# HELP aotlm_model_load_failures_total Model loads that failed.\n# TYPE aotlm_model_load_failures_total counter\naotlm_model_load_failures_total %d\n", mu.loadFailures.Load())
	fmt.Fprintf(w, "# HELP aotlm_models_loaded Models loaded now.\n# TYPE aotlm_models_loaded gauge\naotlm_models_loaded %d\n", n)
	fmt.Fprintf(w, "# HELP aotlm_memory_bytes Memory of the loaded models (weights and sessions).\n# TYPE aotlm_memory_bytes gauge\naotlm_memory_bytes %d\n", used)
	fmt.Fprintf(w, "# HELP aotlm_memory_budget_bytes The memory budget of the loaded models.\n# TYPE aotlm_memory_budget_bytes gauge\naotlm_memory_budget_bytes %d\n", mu.mo.MaxMemory)
}

// sessionBytes is the memory of the server's sessions.
func (s *Server) sessionBytes() int64 {
	var n int64
	for _, sl := range s.pool.slots {
		n += sl.s.MemoryBytes()
	}
	return n
}

func maxBody(o Options) int64 {
	if o.MaxBodyBytes > 0 {
		return o.MaxBodyBytes
	}
	return 4 << 20
}
