package serve

import (
	"net/http"
	"strings"
)

// withRequestID gives every response an X-Request-Id header: the
// client's own (when it sent a short printable one) or a new id.
func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newID("req_")
		}
		w.Header().Set("X-Request-Id", id)
		if isMessagesPath(r.URL.Path) {
			w.Header().Set("Request-Id", id) // where Anthropic's clients read it
		}
		h.ServeHTTP(w, r)
	})
}

// validRequestID accepts ids of 1 to 128 printable ASCII characters.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// writeErrorFor writes e in the shape of the API r called: Anthropic's
// for /v1/messages, Ollama's for /api/, OpenAI's otherwise.
func writeErrorFor(w http.ResponseWriter, r *http.Request, e *apiError) {
	switch p := r.URL.Path; {
	case isMessagesPath(p):
		writeAnthropicError(w, e)
	case strings.HasPrefix(p, "/api/"):
		writeOllamaError(w, e)
	default:
		writeError(w, e)
	}
}

// isMessagesPath reports whether p is a route of Anthropic's Messages API.
func isMessagesPath(p string) bool {
	return p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/")
}
