package serve

import (
	"net/http"
	"slices"
	"strings"

	"github.com/aotlm/aotlm"
)

// adapterOf returns the adapter a generation request chooses: its
// "adapter" field, or the part of its model id after the served id and
// a colon ("model:adapter"); "" for none. The adapter must be loaded.
func (s *Server) adapterOf(model, field string) (string, *apiError) {
	name := field
	if a, ok := strings.CutPrefix(model, s.id+":"); ok && model != s.id {
		if field != "" && field != a {
			return "", badRequest("adapter", "adapter %q and the model id's adapter %q differ", field, a)
		}
		name = a
	} else if e := s.checkModel(model); e != nil {
		return "", e
	}
	if name != "" && !slices.Contains(s.m.Adapters(), name) {
		return "", &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "adapter", Code: "adapter_not_found",
			Message: "no adapter " + jsonQuote(name) + " is loaded (GET /v1/adapters lists them)"}
	}
	return name, nil
}

// adapterScope is the cache scope of a request with adapter a: a
// session's cache holds keys and values computed with its adapter, so
// requests reuse only the caches of their own.
func adapterScope(scope, a string) string {
	if a == "" {
		return scope
	}
	return scope + "\x00adapter=" + a
}

// useAdapter makes sl's session apply adapter a (at the scale it was
// loaded with).
func useAdapter(sl *slot, a string) *apiError {
	if err := sl.s.SetAdapter(a, 1); err != nil {
		return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
	}
	return nil
}

// adapterEntry is one adapter of GET /v1/adapters.
type adapterEntry struct {
	Name    string `json:"name"`
	Object  string `json:"object"`
	ModelID string `json:"model"` // the id that chooses it
}

// handleAdapters answers GET /v1/adapters.
func (s *Server) handleAdapters(w http.ResponseWriter, r *http.Request) *apiError {
	data := []adapterEntry{}
	for _, a := range s.m.Adapters() {
		data = append(data, adapterEntry{Name: a, Object: "adapter", ModelID: s.id + ":" + a})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	return nil
}

// adapterLoad is the body of POST /v1/adapters.
type adapterLoad struct {
	Name  string   `json:"name"`
	Path  string   `json:"path"`
	Scale *float64 `json:"scale"`
}

// AdapterLoader loads the adapter at path (a PEFT folder or a GGUF
// adapter of the served model) into m under name, applied at scale when
// a request chooses it.
type AdapterLoader func(m *aotlm.Model, name, path string, scale float64) error

// handleAddAdapter answers POST /v1/adapters: it loads an adapter while
// serving, when Options.LoadAdapter allows it.
func (s *Server) handleAddAdapter(w http.ResponseWriter, r *http.Request) *apiError {
	if s.opts.LoadAdapter == nil {
		return &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "adapter_loading_disabled",
			Message: "this server does not load adapters while serving (start it with --allow-adapter-loading)"}
	}
	var req adapterLoad
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	switch {
	case req.Name == "" || strings.ContainsAny(req.Name, ":/\\\x00"):
		return badRequest("name", "name %q: want a name without ':', '/' or '\\'", req.Name)
	case req.Path == "":
		return badRequest("path", "path is missing")
	}
	scale := 1.0
	if req.Scale != nil {
		scale = *req.Scale
	}
	if err := s.opts.LoadAdapter(s.m, req.Name, req.Path, scale); err != nil {
		return badRequest("path", "%v", err)
	}
	writeJSON(w, http.StatusOK, adapterEntry{Name: req.Name, Object: "adapter", ModelID: s.id + ":" + req.Name})
	return nil
}

// handleRemoveAdapter answers DELETE /v1/adapters/{name}: requests
// running with it finish with it.
func (s *Server) handleRemoveAdapter(w http.ResponseWriter, r *http.Request) *apiError {
	if s.opts.LoadAdapter == nil {
		return &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "adapter_loading_disabled",
			Message: "this server does not change its adapters while serving (start it with --allow-adapter-loading)"}
	}
	name := r.PathValue("name")
	if !s.m.RemoveAdapter(name) {
		return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "name", Code: "adapter_not_found",
			Message: "no adapter " + jsonQuote(name) + " is loaded"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "object": "adapter", "deleted": true})
	return nil
}
