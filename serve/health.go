package serve

import "net/http"

// handleHealth answers GET /health: 200 {"status": "ok"} while the server
// runs (it needs no API key).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.metrics.request("/health", http.StatusOK)
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "slots_busy": s.pool.busy(), "slots": len(s.pool.slots),
		"queued": s.pool.wait.Load()})
}
