package serve

import (
	_ "embed"
	"net/http"
)

// chatPage is the web chat served at /: one self-contained HTML file.
//
//go:embed web/index.html
var chatPage []byte

// handleWeb serves the chat page.
func (s *Server) handleWeb(w http.ResponseWriter, r *http.Request) {
	s.metrics.request("/", http.StatusOK)
	writeChatPage(w)
}

// writeChatPage writes the chat page with its content policy.
func writeChatPage(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'unsafe-inline'; script-src 'unsafe-inline'")
	w.Write(chatPage)
}
