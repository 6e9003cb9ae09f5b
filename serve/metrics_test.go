package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetrics: /metrics counts the requests by route and status and the
// tokens the answers reported, in the Prometheus text format.
func TestMetrics(t *testing.T) {
	ts := newTestServer(t, Options{})
	got, err := ts.client.Chat.Completions.New(context.Background(), userChat(6, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"stories", "other-1", "other-2"} {
		resp, err := http.Get(ts.http.URL + "/v1/models/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(ts.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
	for _, want := range []string{
		`aotlm_requests_total{path="/v1/chat/completions",code="200"} 1`,
		`aotlm_requests_total{path="/v1/models/{id}",code="200"} 1`,
		`aotlm_requests_total{path="/v1/models/{id}",code="404"} 2`,
		fmt.Sprintf("aotlm_generated_tokens_total %d", got.Usage.CompletionTokens),
		fmt.Sprintf("aotlm_prompt_tokens_total %d", got.Usage.PromptTokens),
		"aotlm_requests_queued 0", "aotlm_slots 1", "# TYPE aotlm_tokens_per_second gauge",
		// one request alone: a pass per token after the first
		fmt.Sprintf("aotlm_decode_passes_total %d", got.Usage.CompletionTokens-1),
		fmt.Sprintf("aotlm_decode_rows_total %d", got.Usage.CompletionTokens-1),
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "# HELP ") && !strings.HasPrefix(line, "# TYPE ") && !strings.HasPrefix(line, "aotlm_") {
			t.Errorf("line %q is not Prometheus text", line)
		}
	}
}
