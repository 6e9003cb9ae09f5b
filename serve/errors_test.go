package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// post sends body to path and decodes an OpenAI-shaped error answer.
func post(t *testing.T, ts *testServer, path, body string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if resp.StatusCode >= 400 {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("%s %s: status %d with a body that is not an OpenAI error: %v", path, body, resp.StatusCode, err)
		}
		if e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("%s %s: status %d, error without message or type: %+v", path, body, resp.StatusCode, e)
		}
	}
	return resp.StatusCode, e.Error.Message, resp.Header
}

// TestBadRequests: each malformed request gets its 4xx with a message
// naming the problem, and the server keeps serving.
func TestBadRequests(t *testing.T) {
	ts := newTestServer(t, Options{MaxBodyBytes: 64 << 10})
	long := strings.Repeat("Once upon a time there was a dog. ", 100)
	cases := []struct {
		name, path, body string
		status           int
		says             string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, "not valid JSON"},
		{"empty body", "/v1/chat/completions", ``, 400, "empty"},
		{"not an object", "/v1/chat/completions", `[1, 2]`, 400, "JSON object"},
		{"messages of the wrong type", "/v1/chat/completions", `{"messages": "hi"}`, 400, `"messages"`},
		{"temperature as a string", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}`, 400, `"temperature"`},
		{"no messages", "/v1/chat/completions", `{"messages": []}`, 400, "messages is empty"},
		{"a bad role", "/v1/chat/completions", `{"messages": [{"role": "robot", "content": "hi"}]}`, 400, "robot"},
		{"an image part", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "image_url"},
		{"unknown model", "/v1/chat/completions", `{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`, 404, "gpt-9"},
		{"prompt over the context", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, 400, "context"},
		{"huge max_tokens", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000000}`, 400, "max_tokens"},
		{"zero max_completion_tokens", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0}`, 400, "max_completion_tokens"},
		{"temperature out of range", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "temperature": 7}`, 400, "temperature"},
		{"top_p out of range", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "top_p": -1}`, 400, "top_p"},
		{"too many choices", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "n": 9}`, 400, "n is 9"},
		{"stop of the wrong type", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "stop": 5}`, 400, "stop"},
		{"too many top_logprobs", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 50}`, 400, "top_logprobs"},
		{"invalid schema", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 5}}}`, 400, "schema"},
		{"unknown response format", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "yaml"}}`, 400, "yaml"},
		{"a tool without a name", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {}}]}`, 400, "no function name"},
		{"oversized body", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + strings.Repeat("x", 70<<10) + `"}]}`, 413, "larger than"},
		{"no prompt", "/v1/completions", `{"max_tokens": 3}`, 400, "prompt is missing"},
		{"a token outside the vocabulary", "/v1/completions", `{"prompt": [1, 99999]}`, 400, "99999"},
		{"several prompts", "/v1/completions", `{"prompt": ["a", "b"]}`, 400, "one prompt"},
		{"detokenize a bad id", "/detokenize", `{"tokens": [-1]}`, 400, "-1"},
		{"unknown endpoint", "/v1/audio/speech", `{}`, 404, "no endpoint"},
	}
	for _, c := range cases {
		status, msg, _ := post(t, ts, c.path, c.body, nil)
		if status != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("%s: status %d %q, want %d saying %q", c.name, status, msg, c.status, c.says)
		}
	}
	if status, msg, _ := post(t, ts, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`, nil); status != 200 {
		t.Fatalf("a good request after the bad ones: %d %s", status, msg)
	}
}

// TestAPIKey: with a key, requests without it get 401; /health needs none.
func TestAPIKey(t *testing.T) {
	ts := newTestServer(t, Options{APIKey: "sesame"})
	body := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`
	if status, _, _ := post(t, ts, "/v1/chat/completions", body, nil); status != 401 {
		t.Fatalf("no key: status %d, want 401", status)
	}
	if status, _, _ := post(t, ts, "/v1/chat/completions", body, map[string]string{"Authorization": "Bearer wrong"}); status != 401 {
		t.Fatalf("wrong key: status %d, want 401", status)
	}
	if status, msg, _ := post(t, ts, "/v1/chat/completions", body, map[string]string{"Authorization": "Bearer sesame"}); status != 200 {
		t.Fatalf("right key: status %d %s", status, msg)
	}
	resp, err := http.Get(ts.http.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/health with a key set: %d", resp.StatusCode)
	}
}

// TestQueueFull: with one session and no queue, a second request while
// the first streams gets 503 with Retry-After.
func TestQueueFull(t *testing.T) {
	ts := newTestServer(t, Options{Parallel: 1, Queue: -1})
	req, _ := http.NewRequest(http.MethodPost, ts.http.URL+"/v1/chat/completions",
		strings.NewReader(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 200, "stream": true, "temperature": 1, "seed": 3}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil { // the stream has started: the session is taken
		t.Fatal(err)
	}
	status, msg, h := post(t, ts, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`, nil)
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(msg, "busy") {
		t.Fatalf("second request: status %d (Retry-After %q) %q, want 503 with Retry-After", status, h.Get("Retry-After"), msg)
	}
}
