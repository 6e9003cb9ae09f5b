package serve

import (
	"encoding/json"
	"net/http"
)

type modelEntry struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"`
	Created int64     `json:"created"`
	OwnedBy string    `json:"owned_by"`
	Meta    modelMeta `json:"meta"`
}

// modelMeta tells clients (and the web page) about the model.
type modelMeta struct {
	Architecture string `json:"architecture"`
	Vocab        int    `json:"n_vocab"`
	Context      int    `json:"n_ctx"`
	KVCache      string `json:"kv_cache"`
	Parallel     int    `json:"parallel"`
	// Pooling is an embedding model's pooling, or "rank" for a reranker.
	Pooling string `json:"pooling,omitempty"`
	// Passport is the model's quality record (perplexity, KL divergence
	// and top-1 agreement of each phase measured, with the recipe and
	// the text), when its artifact carries one.
	Passport json.RawMessage `json:"passport,omitempty"`
}

func (s *Server) model() modelEntry {
	info := s.m.Info()
	return modelEntry{ID: s.id, Object: "model", Created: s.metrics.start.Unix(), OwnedBy: "aotlm",
		Meta: modelMeta{Architecture: info.Architecture, Vocab: info.Vocab, Context: s.ctx, KVCache: info.KVCache, Parallel: len(s.pool.slots),
			Pooling: s.m.Pooling(), Passport: info.Passport}}
}

// handleModels answers GET /v1/models.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) *apiError {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelEntry{s.model()}})
	return nil
}

// handleModel answers GET /v1/models/{id}.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) *apiError {
	if e := s.checkModel(r.PathValue("id")); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, s.model())
	return nil
}
