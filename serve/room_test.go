package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/constrain"
)

// needRE reads the minimum out of a too-small-limit error.
var needRE = regexp.MustCompile(`cannot fit a reply matching (.+): it needs at least (\d+) tokens`)

// rawPost posts body to path and returns the status and the decoded
// answer.
func rawPost(t *testing.T, ts *testServer, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(ts.http.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v in %s", path, err, data)
	}
	return resp.StatusCode, out
}

// chatChoice0 returns the first choice's text and finish_reason.
func chatChoice0(t *testing.T, out map[string]any) (string, string) {
	t.Helper()
	cs, _ := out["choices"].([]any)
	if len(cs) != 1 {
		t.Fatalf("answer without one choice: %v", out)
	}
	c := cs[0].(map[string]any)
	finish, _ := c["finish_reason"].(string)
	if m, ok := c["message"].(map[string]any); ok {
		text, _ := m["content"].(string)
		if calls, _ := m["tool_calls"].([]any); len(calls) > 0 {
			b, _ := json.Marshal(calls)
			text = string(b)
		}
		return text, finish
	}
	text, _ := c["text"].(string)
	return text, finish
}

// TestConstraintRoom: a constrained chat or text completion whose
// max_tokens cannot fit any reply of its constraint is a 400 naming the
// minimum; one token below the minimum is refused, the minimum itself is
// served with a complete reply of the format, and so is a larger limit.
func TestConstraintRoom(t *testing.T) {
	ts := newTestServer(t, Options{})
	user := []map[string]any{{"role": "user", "content": "Once upon a time"}}
	long := "a rather long constant value that no short reply can hold"
	schema := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{
		"type": "object", "properties": map[string]any{"tale": map[string]any{"const": long}, "name": map[string]any{"type": "string"}},
		"required": []string{"tale", "name"}}}}
	params := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": params}},
		{"type": "function", "function": map[string]any{"name": "get_the_time_in_a_far_away_place", "parameters": params}}}
	named := map[string]any{"type": "function", "function": map[string]any{"name": "get_the_time_in_a_far_away_place"}}
	grammar := `root ::= "The " ("cat" | "dog") " sat on the mat and looked at the " [a-z]+ "."` + "\n"
	regex := `Once upon a time there (was|were) [a-z]{3,5} (cat|dog)s?\.`
	cases := []struct {
		name, path, what string
		extra            map[string]any
		check            func(text string) bool // a complete reply is valid
	}{
		{"json_schema", "/v1/chat/completions", "the schema", map[string]any{"response_format": schema}, func(s string) bool {
			var v map[string]any
			return json.Unmarshal([]byte(s), &v) == nil && v["tale"] == long
		}},
		{"json_object", "/v1/chat/completions", "a JSON object", map[string]any{"response_format": map[string]any{"type": "json_object"}, "max_tokens_small": 1}, func(s string) bool {
			var v map[string]any
			return json.Unmarshal([]byte(s), &v) == nil
		}},
		{"required tool", "/v1/chat/completions", "a tool call", map[string]any{"tools": tools, "tool_choice": "required"}, func(s string) bool {
			return strings.Contains(s, `"get_`)
		}},
		{"named tool", "/v1/chat/completions", "a tool call", map[string]any{"tools": tools, "tool_choice": named}, func(s string) bool {
			return strings.Contains(s, `"get_the_time_in_a_far_away_place"`)
		}},
		{"grammar", "/v1/chat/completions", "the grammar", map[string]any{"grammar": grammar}, func(s string) bool {
			return regexp.MustCompile(`^The (cat|dog) sat on the mat and looked at the [a-z]+\.$`).MatchString(s)
		}},
		{"regex", "/v1/completions", "the regex", map[string]any{"regex": regex, "prompt": "Once"}, func(s string) bool {
			return regexp.MustCompile(`^(?:` + regex + `)$`).MatchString(s)
		}},
	}
	for _, c := range cases {
		body := func(n int) map[string]any {
			b := map[string]any{"max_tokens": n, "temperature": 0}
			if c.path == "/v1/chat/completions" {
				b["messages"] = user
			}
			for k, v := range c.extra {
				if k != "max_tokens_small" {
					b[k] = v
				}
			}
			return b
		}
		small := 2
		if n, ok := c.extra["max_tokens_small"].(int); ok {
			small = n // the shortest reply is short
		}
		status, out := rawPost(t, ts, c.path, body(small))
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		m := needRE.FindStringSubmatch(msg)
		if status != http.StatusBadRequest || m == nil || e["param"] != "max_tokens" || !strings.HasPrefix(msg, "max_tokens "+strconv.Itoa(small)+" ") {
			t.Errorf("%s with max_tokens %d: %d %v, want a 400 naming the minimum", c.name, small, status, out)
			continue
		}
		if m[1] != c.what {
			t.Errorf("%s: the error names %q, want %q", c.name, m[1], c.what)
		}
		need, _ := strconv.Atoi(m[2])
		t.Logf("%s: at least %d tokens", c.name, need)
		if need <= small {
			t.Errorf("%s: minimum %d, yet max_tokens %d was refused", c.name, need, small)
		}
		if status, _ := rawPost(t, ts, c.path, body(need-1)); status != http.StatusBadRequest {
			t.Errorf("%s: max_tokens %d, one below the minimum, got %d", c.name, need-1, status)
		}
		status, out = rawPost(t, ts, c.path, body(need))
		if status != http.StatusOK {
			t.Errorf("%s: max_tokens at the minimum %d: %d %v", c.name, need, status, out)
			continue
		}
		if text, finish := chatChoice0(t, out); finish != "stop" && finish != "tool_calls" || !c.check(text) {
			t.Errorf("%s at the minimum: %q finished with %q, want a complete reply", c.name, text, finish)
		}
		status, out = rawPost(t, ts, c.path, body(150))
		if status != http.StatusOK {
			t.Fatalf("%s with room: %d %v", c.name, status, out)
		}
		if text, finish := chatChoice0(t, out); finish == "length" || !c.check(text) {
			t.Errorf("%s with room: %q finished with %q, want a complete reply", c.name, text, finish)
		}
	}
}

// TestConstraintRoomShapes: the too-small-limit error comes in each
// API's shape, naming that API's limit field; a bad grammar or regex
// is refused in each API's shape; a grammar or regex keeps the reply of
// the Responses, Messages and Ollama routes to its language.
func TestConstraintRoomShapes(t *testing.T) {
	ts := newTestServer(t, Options{})
	grammar := `root ::= "The " ("cat" | "dog") " sat on the mat and looked at the " [a-z]+ "."` + "\n"
	g, err := constrain.ParseGBNF(grammar)
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^The (cat|dog) sat on the mat and looked at the [a-z]+\.$`)
	msgs := []map[string]any{{"role": "user", "content": "Tell me a story."}}
	type route struct {
		name, path string
		body       func(n int, extra map[string]any) map[string]any
		field      string
		errMsg     func(out map[string]any) string // the error's message in the API's shape ("" if not that shape)
		text       func(out map[string]any) (string, bool)
	}
	openaiErr := func(out map[string]any) string {
		e, _ := out["error"].(map[string]any)
		m, _ := e["message"].(string)
		return m
	}
	merge := func(b, extra map[string]any) map[string]any {
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	ollama := func(path string, chat, raw bool) func(n int, extra map[string]any) map[string]any {
		return func(n int, extra map[string]any) map[string]any {
			opts := merge(map[string]any{"num_predict": n, "temperature": 0}, extra)
			b := map[string]any{"model": "stories", "stream": false, "options": opts}
			if chat {
				b["messages"] = msgs
			} else {
				b["prompt"] = "Tell me a story."
				b["raw"] = raw
			}
			return b
		}
	}
	ollamaText := func(out map[string]any) (string, bool) {
		if m, ok := out["message"].(map[string]any); ok {
			s, _ := m["content"].(string)
			return s, out["done_reason"] == "stop"
		}
		s, _ := out["response"].(string)
		return s, out["done_reason"] == "stop"
	}
	routes := []route{
		{"responses", "/v1/responses", func(n int, extra map[string]any) map[string]any {
			return merge(map[string]any{"input": "Tell me a story.", "max_output_tokens": n, "temperature": 0}, extra)
		}, "max_output_tokens", openaiErr, func(out map[string]any) (string, bool) {
			text := ""
			items, _ := out["output"].([]any)
			for _, it := range items {
				m := it.(map[string]any)
				if m["type"] != "message" {
					continue
				}
				for _, p := range m["content"].([]any) {
					text += p.(map[string]any)["text"].(string)
				}
			}
			return text, out["status"] == "completed"
		}},
		{"messages", "/v1/messages", func(n int, extra map[string]any) map[string]any {
			return merge(map[string]any{"model": "stories", "messages": msgs, "max_tokens": n, "temperature": 0}, extra)
		}, "max_tokens", func(out map[string]any) string {
			if out["type"] != "error" {
				return ""
			}
			return openaiErr(out)
		}, func(out map[string]any) (string, bool) {
			text := ""
			blocks, _ := out["content"].([]any)
			for _, b := range blocks {
				if m := b.(map[string]any); m["type"] == "text" {
					text += m["text"].(string)
				}
			}
			return text, out["stop_reason"] == "end_turn"
		}},
		{"ollama chat", "/api/chat", ollama("/api/chat", true, false), "num_predict", func(out map[string]any) string {
			m, _ := out["error"].(string)
			return m
		}, ollamaText},
		{"ollama generate", "/api/generate", ollama("/api/generate", false, false), "num_predict", func(out map[string]any) string {
			m, _ := out["error"].(string)
			return m
		}, ollamaText},
		{"ollama raw", "/api/generate", ollama("/api/generate", false, true), "num_predict", func(out map[string]any) string {
			m, _ := out["error"].(string)
			return m
		}, ollamaText},
	}
	for _, r := range routes {
		for _, kind := range []string{"grammar", "regex"} {
			src := grammar
			if kind == "regex" {
				src = `The (cat|dog) sat on the mat and looked at the [a-z]+\.`
			}
			status, out := rawPost(t, ts, r.path, r.body(2, map[string]any{kind: src}))
			msg := r.errMsg(out)
			if status != http.StatusBadRequest || !strings.HasPrefix(msg, r.field+" 2 cannot fit a reply matching the "+kind) || !needRE.MatchString(msg) {
				t.Errorf("%s, %s with a limit of 2: %d %v", r.name, kind, status, out)
			}
			bad := `root ::= x`
			if kind == "regex" {
				bad = `a\bb`
			}
			status, out = rawPost(t, ts, r.path, r.body(40, map[string]any{kind: bad}))
			if msg := r.errMsg(out); status != http.StatusBadRequest || msg == "" {
				t.Errorf("%s, a bad %s: %d %v", r.name, kind, status, out)
			}
			status, out = rawPost(t, ts, r.path, r.body(100, map[string]any{kind: src}))
			if status != http.StatusOK {
				t.Fatalf("%s with a %s: %d %v", r.name, kind, status, out)
			}
			text, stopped := r.text(out)
			t.Logf("%s, %s: %q", r.name, kind, text)
			if stopped && !valid.MatchString(text) || !stopped && !constrain.NewGrammarRecognizer(g).Feed([]byte(text)) {
				t.Errorf("%s, %s: reply %q (stopped %v) is not in the language", r.name, kind, text, stopped)
			}
			if !stopped {
				t.Errorf("%s, %s: 100 tokens left the reply %q unfinished", r.name, kind, text)
			}
		}
	}
}
