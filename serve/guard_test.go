package serve

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// send makes one request with the given headers ("Host" sets the Host
// header) and returns the answer and its body.
func send(t *testing.T, ts *testServer, method, path, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

const shortChat = `{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 4}`

// TestHostCheck: a Host that is not a name of the server is refused
// before any route, so a DNS-rebinding page cannot read answers; IP
// addresses, localhost and the --host-allow names are served.
func TestHostCheck(t *testing.T) {
	ts := newTestServer(t, Options{HostAllow: []string{"phone.lan", ".home.arpa"}})
	for host, want := range map[string]int{
		"evil.example":         http.StatusForbidden,
		"evil.example:8080":    http.StatusForbidden,
		"localhost.evil.test":  http.StatusForbidden,
		"localhost:8080":       http.StatusOK,
		"app.localhost":        http.StatusOK,
		"127.0.0.1:9":          http.StatusOK,
		"[::1]:8080":           http.StatusOK,
		"192.168.1.20:8080":    http.StatusOK,
		"phone.lan:8080":       http.StatusOK,
		"box.home.arpa":        http.StatusOK,
		"home.arpa.evil.test":  http.StatusForbidden,
		"PHONE.LAN":            http.StatusOK,
		"phone.lan.evil.test.": http.StatusForbidden,
	} {
		for _, path := range []string{"/v1/models", "/"} {
			resp, body := send(t, ts, http.MethodGet, path, "", map[string]string{"Host": host})
			if resp.StatusCode != want {
				t.Errorf("GET %s with Host %q: status %d, want %d (%s)", path, host, resp.StatusCode, want, body)
			}
			if want == http.StatusForbidden && !strings.Contains(body, "host_not_allowed") {
				t.Errorf("Host %q: the refusal does not say why: %s", host, body)
			}
		}
	}
	// "*" turns the check off
	ts = newTestServer(t, Options{HostAllow: []string{"*"}})
	if resp, body := send(t, ts, http.MethodGet, "/v1/models", "", map[string]string{"Host": "evil.example"}); resp.StatusCode != http.StatusOK {
		t.Errorf("--host-allow '*': status %d: %s", resp.StatusCode, body)
	}
}

// TestOriginCheck: a browser's cross-site text/plain POST (which needs no
// preflight) is refused with 403 and generates nothing; the page's own
// origin is served; with CORSOrigins the listed origin's preflight and
// request get the CORS headers and other origins are still refused.
func TestOriginCheck(t *testing.T) {
	ts := newTestServer(t, Options{})
	self := ts.http.URL
	resp, body := send(t, ts, http.MethodPost, "/v1/chat/completions", shortChat,
		map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "origin_not_allowed") {
		t.Fatalf("cross-site POST: status %d %s, want 403 origin_not_allowed", resp.StatusCode, body)
	}
	if n := ts.srv.metrics.generated.Load() + ts.srv.metrics.prompt.Load(); n != 0 {
		t.Fatalf("a refused request processed %d tokens", n)
	}
	// a no-cors request without Origin, marked cross-site by the browser
	resp, _ = send(t, ts, http.MethodPost, "/v1/completions", `{"prompt": "a", "max_tokens": 2}`,
		map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST without Origin: status %d, want 403", resp.StatusCode)
	}
	// the server's own page
	resp, body = send(t, ts, http.MethodPost, "/v1/chat/completions", shortChat,
		map[string]string{"Content-Type": "application/json", "Origin": self, "Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("same-origin POST: status %d, ACAO %q: %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
	}
	// a preflight without --cors-origin is refused
	preflight := map[string]string{"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type"}
	if resp, _ := send(t, ts, http.MethodOptions, "/v1/chat/completions", "", preflight); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("preflight without --cors-origin: status %d, want 403", resp.StatusCode)
	}

	ts = newTestServer(t, Options{CORSOrigins: []string{"http://app.example"}})
	resp, _ = send(t, ts, http.MethodOptions, "/v1/chat/completions", "", preflight)
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "http://app.example" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") {
		t.Fatalf("preflight from an allowed origin: status %d, headers %v", resp.StatusCode, h)
	}
	resp, body = send(t, ts, http.MethodPost, "/v1/chat/completions", shortChat,
		map[string]string{"Content-Type": "application/json", "Origin": "http://app.example"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "http://app.example" {
		t.Fatalf("POST from an allowed origin: status %d, ACAO %q: %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
	}
	preflight["Origin"] = "http://evil.example"
	if resp, _ := send(t, ts, http.MethodOptions, "/v1/chat/completions", "", preflight); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("preflight from another origin: status %d, want 403", resp.StatusCode)
	}
	if resp, _ := send(t, ts, http.MethodPost, "/v1/chat/completions", shortChat,
		map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("POST from another origin: status %d, want 403", resp.StatusCode)
	}
}

// cachedTokens sends a chat with key and returns usage.prompt_tokens_details.cached_tokens.
func cachedTokens(t *testing.T, ts *testServer, key, body string) int {
	t.Helper()
	resp, b := send(t, ts, http.MethodPost, "/v1/chat/completions", body,
		map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + key})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat with key %s: status %d: %s", key, resp.StatusCode, b)
	}
	var r chatResponse
	if err := json.Unmarshal([]byte(b), &r); err != nil || r.Usage == nil {
		t.Fatalf("chat answer %s: %v", b, err)
	}
	return r.Usage.PromptDetails.CachedTokens
}

// TestCacheScope: two API keys do not see each other's cached_tokens (nor
// reuse each other's cache), each sees its own; SharedCache shares.
func TestCacheScope(t *testing.T) {
	const prompt = `{"messages": [{"role": "user", "content": "Lily and Tom went to the park to play with a ball"}], "max_tokens": 3, "temperature": 0}`
	for _, shared := range []bool{false, true} {
		ts := newTestServer(t, Options{Parallel: 2, APIKeys: []string{"key-a", "key-b"}, SharedCache: shared})
		if n := cachedTokens(t, ts, "key-a", prompt); n != 0 {
			t.Fatalf("first request: %d cached tokens", n)
		}
		b := cachedTokens(t, ts, "key-b", prompt)
		a := cachedTokens(t, ts, "key-a", prompt)
		if a < 10 {
			t.Errorf("shared %v: the same key's second request reuses %d tokens, want the prompt", shared, a)
		}
		if !shared && b != 0 {
			t.Errorf("another key's request of the same prompt reports %d cached tokens, want 0", b)
		}
		if shared && b < 10 {
			t.Errorf("with SharedCache another key's request reuses %d tokens, want the prompt", b)
		}
		// a wrong key is still refused
		resp, _ := send(t, ts, http.MethodPost, "/v1/chat/completions", prompt, map[string]string{"Authorization": "Bearer key-c"})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("an unknown key: status %d, want 401", resp.StatusCode)
		}
	}
}

// TestBodyReadTimeout: a body sent too slowly ends with 408 after
// ReadTimeout, and the connection is not held longer.
func TestBodyReadTimeout(t *testing.T) {
	ts := newTestServer(t, Options{ReadTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"mess"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || took > 5*time.Second {
		t.Fatalf("stalled body: status %d after %v, want 408 after about 300ms", resp.StatusCode, took)
	}
	// a whole body in time is served
	if resp, body := send(t, ts, http.MethodPost, "/v1/chat/completions", shortChat, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a prompt body: status %d: %s", resp.StatusCode, body)
	}
}

// TestWorkCounts: compiling a schema takes a place of Parallel (with no
// queue, a request that arrives meanwhile is told the server is busy),
// and work past WorkTimeout is answered with an error while its place is
// held until it ends.
func TestWorkCounts(t *testing.T) {
	ts := newTestServer(t, Options{Parallel: 1, Queue: -1, WorkTimeout: 100 * time.Millisecond})
	release := make(chan struct{})
	done := make(chan *apiError)
	go func() {
		done <- ts.srv.work("a test's work", func() *apiError { <-release; return nil })
	}()
	for ts.srv.pool.busy() == 0 {
		time.Sleep(time.Millisecond)
	}
	if resp, body := send(t, ts, http.MethodPost, "/v1/chat/completions", shortChat, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a request while the work runs: status %d, want 503: %s", resp.StatusCode, body)
	}
	e := <-done
	if e == nil || e.Code != "work_timeout" || !strings.Contains(e.Message, "a test's work") {
		t.Fatalf("work past its time: %+v, want work_timeout", e)
	}
	if ts.srv.pool.busy() != 1 {
		t.Fatal("the work's place was given back before the work ended")
	}
	close(release)
	for ts.srv.pool.busy() != 0 || ts.srv.pool.queued.Load() != 0 {
		time.Sleep(time.Millisecond)
	}
	// a schema compiles within the budget and the request is served
	schema := `{"messages": [{"role": "user", "content": "a"}], "max_tokens": 8,
		"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}}`
	if resp, body := send(t, ts, http.MethodPost, "/v1/chat/completions", schema, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("json_schema request: status %d: %s", resp.StatusCode, body)
	}
}
