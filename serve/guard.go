package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// guard answers what a request may not do before any route sees it:
// a Host header that is not one of the server's names is refused (a
// DNS-rebinding page names its own domain), and so is a browser request
// from another origin unless Options.CORSOrigins lists it; for a listed
// origin it adds the CORS headers and answers the preflight. It also
// records the cache scope of the request (see scopeOf).
func (s *Server) guard(next http.Handler) http.Handler {
	return guard(&s.opts, s.metrics.request, next)
}

// guard is Server.guard for opts, counting its answers with count.
func guard(opts *Options, count func(route string, status int), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(opts, r.Host) {
			count("guard", http.StatusForbidden)
			writeError(w, &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "host_not_allowed",
				Message: "the Host " + jsonQuote(r.Host) + " is not a name of this server: start it with --host-allow " + hostName(r.Host) + " to accept it"})
			return
		}
		origin := r.Header.Get("Origin")
		cross := origin != "" && !sameOrigin(origin, r.Host)
		if origin == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			cross, origin = true, "null"
		}
		if cross {
			if !originAllowed(opts, origin) {
				count("guard", http.StatusForbidden)
				writeError(w, &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "origin_not_allowed",
					Message: "requests from the origin " + jsonQuote(origin) + " are refused: start the server with --cors-origin " + origin + " to allow them"})
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "Retry-After")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
					h.Set("Access-Control-Allow-Headers", req)
				}
				h.Set("Access-Control-Max-Age", "600")
				count("preflight", http.StatusNoContent)
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		ctx := context.WithValue(r.Context(), scopeKey{}, scope(opts, r))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// hostName is the host of a Host header, without the port or brackets.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
}

// hostAllowed accepts an IP address (a rebinding page cannot make a
// browser send one for its own domain), localhost and its subdomains,
// the machine's name and the names of Options.HostAllow ("*": any).
func hostAllowed(opts *Options, hostport string) bool {
	h := hostName(hostport)
	if h == "" || net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	if name, err := os.Hostname(); err == nil && strings.EqualFold(name, h) {
		return true
	}
	for _, a := range opts.HostAllow {
		a = strings.ToLower(strings.TrimSuffix(a, "."))
		if a == "*" || a == h || (strings.HasPrefix(a, ".") && strings.HasSuffix(h, a)) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether origin names the server as the request
// reached it (scheme aside: the server speaks plain HTTP, a TLS proxy in
// front of it keeps the host).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	// a default port may be written or not
	uh, up := splitPort(u.Host, u.Scheme)
	hh, hp := splitPort(host, u.Scheme)
	return uh == hh && up == hp
}

func splitPort(hostport, scheme string) (string, string) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		h, p = hostport, ""
	}
	if p == "" {
		p = "80"
		if scheme == "https" {
			p = "443"
		}
	}
	return strings.ToLower(strings.Trim(h, "[]")), p
}

// originAllowed reports whether Options.CORSOrigins lists origin ("*":
// any).
func originAllowed(opts *Options, origin string) bool {
	for _, o := range opts.CORSOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// scopeKey is the context key of a request's cache scope.
type scopeKey struct{}

// scope names whose cache a request may reuse: its API key's, or with
// none its client address's; "" when Options.SharedCache shares the
// cache between all.
func scope(opts *Options, r *http.Request) string {
	if opts.SharedCache {
		return ""
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
		sum := sha256.Sum256([]byte(tok))
		return "key:" + hex.EncodeToString(sum[:8])
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "client:" + host
}

// scopeOf returns the cache scope guard recorded in ctx.
func scopeOf(ctx context.Context) string {
	v, _ := ctx.Value(scopeKey{}).(string)
	return v
}

// readBody reads a request's body within Options.ReadTimeout (a client
// that sends it slowly holds a connection for no longer) and replaces it
// with the bytes read; it answers false, having written the error, when
// the time ran out.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) bool {
	return readBodyWithin(w, r, s.opts.ReadTimeout)
}

// readBodyWithin is Server.readBody with the time limit given.
func readBodyWithin(w http.ResponseWriter, r *http.Request, timeout time.Duration) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	data, err := io.ReadAll(r.Body)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		// the rest of the body is not waited for: the connection closes
		w.Header().Set("Connection", "close")
		writeError(w, &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: "the request body did not arrive within " + timeout.String()})
		return false
	}
	if deadline {
		rc.SetReadDeadline(time.Time{})
	}
	r.Body = &readBody{r: bytes.NewReader(data), err: err}
	return true
}

// readBody replays a body read ahead, then the error that ended it.
type readBody struct {
	r   *bytes.Reader
	err error
}

func (b *readBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *readBody) Close() error { return nil }
