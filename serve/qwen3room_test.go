package serve

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestQwen3ConstraintRoom: on the Qwen3 vocabulary (151,669 tokens) the
// minimum max_tokens of a forced tool call and of a schema is counted
// in whole tokens: one below it is a 400 naming it, and at it the reply
// is complete. The time of the refusal, which searches the tokens from
// the start, is logged.
func TestQwen3ConstraintRoom(t *testing.T) {
	m := openQwen3(t)
	ts := newTestServerFor(t, m, Options{ModelID: "qwen3-chat"})
	var tools any
	if err := json.Unmarshal([]byte(toolDefs), &tools); err != nil {
		t.Fatal(err)
	}
	weather := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "weather", "schema": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "celsius": map[string]any{"type": "integer"}},
		"required": []string{"city", "celsius"}}}}
	cases := []struct {
		name  string
		extra map[string]any
		maxIn int // the minimum is at most this
	}{
		{"forced tool call", map[string]any{"tools": tools, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}, 30},
		{"weather schema", map[string]any{"response_format": weather}, len(`{"city":"","celsius":0}`)},
	}
	for _, c := range cases {
		body := func(n int) map[string]any {
			b := map[string]any{"max_tokens": n, "temperature": 0, "messages": []map[string]any{{"role": "user", "content": "Weather in Lima?"}}}
			for k, v := range c.extra {
				b[k] = v
			}
			return b
		}
		start := time.Now()
		status, out := rawPost(t, ts, "/v1/chat/completions", body(1))
		took := time.Since(start)
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		mm := needRE.FindStringSubmatch(msg)
		if status != http.StatusBadRequest || mm == nil {
			t.Fatalf("%s with max_tokens 1: %d %v, want a 400 naming the minimum", c.name, status, out)
		}
		need, _ := strconv.Atoi(mm[2])
		t.Logf("%s: at least %d tokens (refused in %v)", c.name, need, took)
		if need <= 1 || need > c.maxIn {
			t.Errorf("%s: minimum %d, want 2 to %d whole tokens", c.name, need, c.maxIn)
		}
		if status, _ := rawPost(t, ts, "/v1/chat/completions", body(need-1)); status != http.StatusBadRequest {
			t.Errorf("%s: max_tokens %d, one below the minimum, got %d", c.name, need-1, status)
		}
		status, out = rawPost(t, ts, "/v1/chat/completions", body(need))
		if status != http.StatusOK {
			t.Fatalf("%s at the minimum %d: %d %v", c.name, need, status, out)
		}
		if text, finish := chatChoice0(t, out); finish != "stop" && finish != "tool_calls" {
			t.Errorf("%s at the minimum %d: %q finished with %q, want a complete reply", c.name, need, text, finish)
		}
	}
}
