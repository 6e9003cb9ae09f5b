package serve

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aotlm/aotlm"
)

// TestThinkSplit: the thinking and the answer come out the same however
// the reply is cut into chunks (the thinking without its surrounding
// whitespace, streamed or not).
func TestThinkSplit(t *testing.T) {
	cases := []struct {
		text               string
		open               bool
		reasoning, content string
	}{
		{"<think>\nhmm, a story\n</think>\n\nOnce upon a time", false, "hmm, a story", "Once upon a time"},
		{"\n<think>a</think>b", false, "a", "b"},
		{"hmm</think>\n\nHello", true, "hmm", "Hello"},
		{"Hello <think>x</think>", false, "", "Hello <think>x</think>"},
		{"  <thi", false, "", "  <thi"},
		{"<think>unfinished", false, "unfinished", ""},
		{"a</thin", true, "a</thin", ""},
		{"<think></think>", false, "", ""},
		{"a < b </think> c </think>", true, "a < b", "c </think>"},
		{"", false, "", ""},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		r, ct := splitThinking(c.text, c.open)
		if r != c.reasoning || ct != c.content {
			t.Errorf("%q (open %v): (%q, %q), want (%q, %q)", c.text, c.open, r, ct, c.reasoning, c.content)
		}
		for range 200 {
			sp := newThinkSplit(c.open)
			var rb, cb strings.Builder
			rest := c.text
			for rest != "" {
				n := 1 + rng.IntN(len(rest))
				a, b := sp.feed(rest[:n])
				rb.WriteString(a)
				cb.WriteString(b)
				rest = rest[n:]
			}
			a, b := sp.flush()
			rb.WriteString(a)
			cb.WriteString(b)
			if rb.String() != c.reasoning || cb.String() != c.content {
				t.Fatalf("%q cut in chunks: (%q, %q), want (%q, %q)", c.text, rb.String(), cb.String(), c.reasoning, c.content)
			}
		}
	}
}

// thinkingTemplate is a ChatML template that opens the thinking at the
// end of the prompt unless enable_thinking is false (then it writes an
// empty one), as Qwen3's does.
const thinkingTemplate = `{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>
{% if enable_thinking is defined and enable_thinking is false %}
</think>

{% endif %}{% endif %}`

// postJSON posts body to path and decodes the answer into out.
func postJSON(t *testing.T, ts *testServer, path string, body any, out any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(ts.http.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s: %v in %s", path, err, data)
		}
	}
	return resp
}

// TestReasoningSplit: with a template that opens the thinking, the
// reply goes to reasoning_content (chat completions), a thinking block
// (Messages), "thinking" (Ollama) and a reasoning item (Responses); the
// text is the model's own reply to the rendered prompt; with thinking
// switched off it is the answer.
func TestReasoningSplit(t *testing.T) {
	m := openStories(t)
	if err := m.SetChatTemplate("thinking", thinkingTemplate); err != nil {
		t.Fatal(err)
	}
	ts := newTestServerFor(t, m, Options{})
	// the oracle: greedy generation from the rendered prompt
	want := func(think bool) string {
		text, err := m.RenderChat([]aotlm.Message{{Role: "user", Content: "Once upon a time"}},
			aotlm.RenderOptions{Vars: map[string]any{"enable_thinking": think}})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := m.Encode(text, true)
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(t.Context(), aotlm.Request{IDs: ids, MaxTokens: 16, StopIDs: m.EndOfTurnIDs()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	thought, answer := strings.TrimSpace(want(true)), want(false)
	if thought == "" || answer == "" {
		t.Fatalf("the model wrote nothing: %q %q", thought, answer)
	}
	user := []map[string]any{{"role": "user", "content": "Once upon a time"}}

	var chat struct {
		Choices []struct {
			Message struct {
				Content          string  `json:"content"`
				ReasoningContent *string `json:"reasoning_content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	postJSON(t, ts, "/v1/chat/completions", map[string]any{"messages": user, "max_tokens": 16, "temperature": 0}, &chat)
	if c := chat.Choices[0]; c.Message.ReasoningContent == nil || *c.Message.ReasoningContent != thought || c.Message.Content != "" || c.FinishReason != "length" {
		t.Fatalf("chat, thinking: %+v, want reasoning %q and no content", c, thought)
	}
	for _, off := range []map[string]any{{"chat_template_kwargs": map[string]any{"enable_thinking": false}}, {"reasoning_effort": "none"}} {
		body := map[string]any{"messages": user, "max_tokens": 16, "temperature": 0}
		for k, v := range off {
			body[k] = v
		}
		chat.Choices = nil
		postJSON(t, ts, "/v1/chat/completions", body, &chat)
		if c := chat.Choices[0]; c.Message.ReasoningContent != nil || c.Message.Content != answer {
			t.Fatalf("chat, thinking off by %v: %+v, want content %q", off, c, answer)
		}
	}

	var msg anthMessageOut
	postJSON(t, ts, "/v1/messages", map[string]any{"messages": user, "max_tokens": 16, "temperature": 0,
		"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}}, &msg)
	if len(msg.Content) == 0 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking != thought {
		t.Fatalf("messages, thinking: %+v, want a thinking block %q", msg.Content, thought)
	}
	msg = anthMessageOut{}
	postJSON(t, ts, "/v1/messages", map[string]any{"messages": user, "max_tokens": 16, "temperature": 0}, &msg)
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != answer {
		t.Fatalf("messages, thinking off by default: %+v, want the text %q", msg.Content, answer)
	}
	// streamed: thinking deltas, then the signature, in one block
	events := sseEvents(t, ts, "/v1/messages", map[string]any{"messages": user, "max_tokens": 16, "temperature": 0, "stream": true,
		"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}})
	var streamed strings.Builder
	var deltas []string
	for _, e := range events {
		if e.name == "content_block_delta" {
			d := e.data["delta"].(map[string]any)
			deltas = append(deltas, d["type"].(string))
			if d["type"] == "thinking_delta" {
				streamed.WriteString(d["thinking"].(string))
			}
		}
	}
	if streamed.String() != thought || deltas[len(deltas)-1] != "signature_delta" {
		t.Fatalf("messages, streamed thinking %q with deltas %v, want %q and a signature_delta last", streamed.String(), deltas, thought)
	}

	var ol struct {
		Message struct {
			Content  string `json:"content"`
			Thinking string `json:"thinking"`
		} `json:"message"`
	}
	postJSON(t, ts, "/api/chat", map[string]any{"model": "stories", "messages": user, "stream": false, "think": true,
		"options": map[string]any{"temperature": 0, "num_predict": 16}}, &ol)
	if ol.Message.Thinking != thought || ol.Message.Content != "" {
		t.Fatalf("ollama, think: %+v, want thinking %q", ol.Message, thought)
	}
	ol.Message.Thinking, ol.Message.Content = "", ""
	postJSON(t, ts, "/api/chat", map[string]any{"model": "stories", "messages": user, "stream": false, "think": false,
		"options": map[string]any{"temperature": 0, "num_predict": 16}}, &ol)
	if ol.Message.Thinking != "" || ol.Message.Content != answer {
		t.Fatalf("ollama, think false: %+v, want content %q", ol.Message, answer)
	}

	var resp responseObj
	postJSON(t, ts, "/v1/responses", map[string]any{"input": "Once upon a time", "max_output_tokens": 16, "temperature": 0,
		"reasoning": map[string]any{"effort": "high"}}, &resp)
	if len(resp.Output) == 0 || resp.Output[0].Type != "reasoning" || (*resp.Output[0].Content)[0].Text != thought || resp.Status != "incomplete" {
		t.Fatalf("responses, reasoning: %+v, want a reasoning item %q", resp.Output, thought)
	}
	// a stored reasoning turn goes back to the template as reasoning_content
	var next responseObj
	postJSON(t, ts, "/v1/responses", map[string]any{"input": "And then?", "max_output_tokens": 4, "previous_response_id": resp.ID,
		"reasoning": map[string]any{"effort": "none"}}, &next)
	if next.Usage == nil || next.Usage.InputTokens < resp.Usage.InputTokens+resp.Usage.OutputTokens {
		t.Fatalf("the continued response's prompt (%+v) does not hold the first turn (%+v)", next.Usage, resp.Usage)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

// sseEvents posts a streaming request and reads its events.
func sseEvents(t *testing.T, ts *testServer, path string, body any) []sseEvent {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(ts.http.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d, %s", path, resp.StatusCode, data)
	}
	var out []sseEvent
	sc := bufio.NewScanner(resp.Body)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("%s: event %s: %v", path, name, err)
			}
			if d["type"] != name {
				t.Fatalf("%s: event %q carries type %v", path, name, d["type"])
			}
			out = append(out, sseEvent{name, d})
		}
	}
	return out
}

// TestMessagesEventOrder: a streamed message is Anthropic's exact
// sequence, with the ping after the first block starts, and a forced
// tool call streams as a tool_use block of input_json_delta.
func TestMessagesEventOrder(t *testing.T) {
	ts := newTestServer(t, Options{})
	user := []map[string]any{{"role": "user", "content": "Once upon a time"}}
	names := func(evs []sseEvent) string {
		var n []string
		for i, e := range evs {
			if i == 0 || e.name != evs[i-1].name {
				n = append(n, e.name)
			}
		}
		return strings.Join(n, " ")
	}
	evs := sseEvents(t, ts, "/v1/messages", map[string]any{"messages": user, "max_tokens": 8, "stream": true})
	if got := names(evs); got != "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("events %s", got)
	}
	if evs[len(evs)-2].data["delta"].(map[string]any)["stop_reason"] != "max_tokens" {
		t.Fatalf("message_delta %v, want stop_reason max_tokens", evs[len(evs)-2].data)
	}
	tools := []map[string]any{{"name": "get_weather", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 8}}, "required": []string{"city"}}}}
	evs = sseEvents(t, ts, "/v1/messages", map[string]any{"messages": user, "max_tokens": 80, "stream": true, "tools": tools,
		"tool_choice": map[string]any{"type": "any"}})
	if got := names(evs); got != "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("tool call events %s", got)
	}
	block := evs[1].data["content_block"].(map[string]any)
	delta := evs[3].data["delta"].(map[string]any)
	var input map[string]any
	if block["type"] != "tool_use" || delta["type"] != "input_json_delta" || json.Unmarshal([]byte(delta["partial_json"].(string)), &input) != nil {
		t.Fatalf("tool call block %v, delta %v", block, delta)
	}
	if _, ok := input["city"].(string); !ok {
		t.Fatalf("tool input %v has no city", input)
	}
}

// TestRequestIDAndErrorShapes: every response carries X-Request-Id (the
// client's when it sends a usable one), and each API answers errors in
// its own shape.
func TestRequestIDAndErrorShapes(t *testing.T) {
	ts := newTestServer(t, Options{})
	get := func(method, path, body string, hdr map[string]string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.http.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		data, _ := io.ReadAll(resp.Body)
		json.Unmarshal(data, &out)
		return resp, out
	}
	for _, path := range []string{"/health", "/", "/v1/models", "/nowhere", "/api/version"} {
		resp, _ := get("GET", path, "", nil)
		if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
			t.Errorf("GET %s: X-Request-Id %q", path, id)
		}
	}
	resp, _ := get("GET", "/health", "", map[string]string{"X-Request-Id": "trace-42"})
	if id := resp.Header.Get("X-Request-Id"); id != "trace-42" {
		t.Errorf("the client's request id came back as %q", id)
	}
	resp, _ = get("GET", "/health", "", map[string]string{"X-Request-Id": strings.Repeat("x", 200)})
	if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Errorf("a 200-byte request id came back as %q", id)
	}

	resp, out := get("POST", "/v1/messages", `{"messages": [{"role": "user", "content": "hi"}]}`, nil)
	e, _ := out["error"].(map[string]any)
	if resp.StatusCode != 400 || out["type"] != "error" || e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), "max_tokens") {
		t.Errorf("messages without max_tokens: %d %v", resp.StatusCode, out)
	}
	if resp.Header.Get("Request-Id") == "" {
		t.Error("a Messages answer without Request-Id")
	}
	resp, out = get("POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "document"}]}]}`, nil)
	if e, _ := out["error"].(map[string]any); resp.StatusCode != 400 || !strings.Contains(e["message"].(string), "document") {
		t.Errorf("a document block: %d %v", resp.StatusCode, out)
	}
	resp, out = get("POST", "/api/chat", `{"model": "stories", "messages": 3}`, nil)
	if msg, ok := out["error"].(string); resp.StatusCode != 400 || !ok || !strings.Contains(msg, "messages") {
		t.Errorf("ollama, bad messages: %d %v", resp.StatusCode, out)
	}
	resp, out = get("GET", "/api/nowhere", "", nil)
	if _, ok := out["error"].(string); resp.StatusCode != 404 || !ok {
		t.Errorf("ollama, no route: %d %v", resp.StatusCode, out)
	}
	resp, out = get("POST", "/v1/responses", `{"input": [{"type": "computer_call"}]}`, nil)
	if e, _ := out["error"].(map[string]any); resp.StatusCode != 400 || e["param"] != "input[0]" {
		t.Errorf("responses, bad item: %d %v", resp.StatusCode, out)
	}
	// the key is read from X-Api-Key too (Anthropic's clients)
	keyed := newTestServer(t, Options{APIKey: "k"})
	req, _ := http.NewRequest("POST", keyed.http.URL+"/v1/messages/count_tokens", strings.NewReader(`{"messages": [{"role": "user", "content": "hi"}]}`))
	req.Header.Set("X-Api-Key", "k")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 200 {
		t.Errorf("count_tokens with X-Api-Key: %d", r2.StatusCode)
	}
}

// TestImagesInEveryAPI: Anthropic's image blocks, Ollama's images and
// the Responses API's input_image parts reach the image encoder with
// their bytes, among the message's text.
func TestImagesInEveryAPI(t *testing.T) {
	var got [][]byte
	ts := newTestServer(t, Options{Images: fakeImages{&got}})
	b64 := base64.StdEncoding.EncodeToString([]byte("png bytes"))
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", `{"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "text", "text": "Alpha"},
			{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "` + b64 + `"}}]}]}`},
		{"/api/chat", `{"model": "stories", "messages": [{"role": "user", "content": "Alpha", "images": ["` + b64 + `"]}]}`},
		{"/api/generate", `{"model": "stories", "prompt": "Alpha", "images": ["` + b64 + `"]}`},
		{"/v1/responses", `{"input": [{"role": "user", "content": [{"type": "input_text", "text": "Alpha"},
			{"type": "input_image", "image_url": "data:image/png;base64,` + b64 + `"}]}]}`},
	} {
		got = nil
		resp, err := http.Post(ts.http.URL+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// the fake encoder refuses with the text it was given
		if resp.StatusCode != 400 || !strings.Contains(string(data), "encoded text: ") || !strings.Contains(string(data), "Alpha") {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, data)
		}
		if len(got) != 1 || string(got[0]) != "png bytes" {
			t.Errorf("%s: the encoder got %q", c.path, got)
		}
	}
}

// TestThinkThenConstrain: with a template that opens the thinking, a
// thinking budget closes it after that many tokens (the thinking is
// then the model's own first tokens), and a JSON schema keeps only the
// answer after it; without a budget the reply thinks until max_tokens
// and ends with "length".
func TestThinkThenConstrain(t *testing.T) {
	m := openStories(t)
	if err := m.SetChatTemplate("thinking", thinkingTemplate); err != nil {
		t.Fatal(err)
	}
	ts := newTestServerFor(t, m, Options{})
	first := func(n int) string {
		text, err := m.RenderChat([]aotlm.Message{{Role: "user", Content: "Once upon a time"}}, aotlm.RenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := m.Encode(text, true)
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(t.Context(), aotlm.Request{IDs: ids, MaxTokens: n, StopIDs: m.EndOfTurnIDs()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(res.Text)
	}
	user := []map[string]any{{"role": "user", "content": "Once upon a time"}}
	schema := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{
		"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "maxLength": 8}}, "required": []string{"name"}}}}
	type chatOut struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	var out chatOut
	postJSON(t, ts, "/v1/chat/completions", map[string]any{"messages": user, "max_tokens": 24, "temperature": 0, "thinking_budget_tokens": 4}, &out)
	if c := out.Choices[0]; c.Message.ReasoningContent != first(4) || c.Message.Content == "" {
		t.Fatalf("budget 4: %+v, want the thinking %q and an answer", c, first(4))
	}
	out = chatOut{}
	postJSON(t, ts, "/v1/chat/completions", map[string]any{"messages": user, "max_tokens": 60, "temperature": 0, "thinking_budget_tokens": 5,
		"response_format": schema}, &out)
	var v struct {
		Name *string `json:"name"`
	}
	if c := out.Choices[0]; c.Message.ReasoningContent != first(5) || json.Unmarshal([]byte(c.Message.Content), &v) != nil || v.Name == nil || c.FinishReason != "stop" {
		t.Fatalf("budget 5 and a schema: %+v, want the thinking %q and a JSON answer", c, first(5))
	}
	out = chatOut{}
	postJSON(t, ts, "/v1/chat/completions", map[string]any{"messages": user, "max_tokens": 12, "temperature": 0, "response_format": schema}, &out)
	if c := out.Choices[0]; c.Message.ReasoningContent != first(12) || c.Message.Content != "" || c.FinishReason != "length" {
		t.Fatalf("a schema without a budget: %+v, want the thinking %q cut by length", c, first(12))
	}
	var msg anthMessageOut
	postJSON(t, ts, "/v1/messages", map[string]any{"messages": user, "max_tokens": 24, "temperature": 0,
		"thinking": map[string]any{"type": "enabled", "budget_tokens": 3}}, &msg)
	if len(msg.Content) != 2 || msg.Content[0].Thinking != first(3) || msg.Content[1].Type != "text" || msg.Content[1].Text == "" {
		t.Fatalf("messages with budget_tokens 3: %+v, want the thinking %q and a text block", msg.Content, first(3))
	}
}

// FuzzThinkSplit: however a reply is cut into chunks, the split gives
// what the whole reply gives, and no mark is lost or duplicated.
func FuzzThinkSplit(f *testing.F) {
	f.Add("<think>\nplan</think>\n\nanswer", false, uint64(7))
	f.Add("a</think>b", true, uint64(1))
	f.Add("  <thin", false, uint64(3))
	f.Fuzz(func(t *testing.T, text string, open bool, seed uint64) {
		r, c := splitThinking(text, open)
		rng := rand.New(rand.NewPCG(seed, 0))
		sp := newThinkSplit(open)
		var rb, cb strings.Builder
		rest := text
		for rest != "" {
			n := 1 + rng.IntN(len(rest))
			a, b := sp.feed(rest[:n])
			rb.WriteString(a)
			cb.WriteString(b)
			rest = rest[n:]
		}
		a, b := sp.flush()
		rb.WriteString(a)
		cb.WriteString(b)
		if rb.String() != r || cb.String() != c {
			t.Fatalf("%q cut in chunks: (%q, %q), whole (%q, %q)", text, rb.String(), cb.String(), r, c)
		}
		// what is neither thinking nor answer is the marks and whitespace
		if len(r)+len(c) > len(text) {
			t.Fatalf("%q split into more than it holds: (%q, %q)", text, r, c)
		}
	})
}

// TestToolCallsDoNotLeak: a streamed reply with tools lets through
// exactly the text of the reply, however it is cut into chunks: no call
// markup reaches the streamed text, and text that is no call is all
// streamed.
func TestToolCallsDoNotLeak(t *testing.T) {
	tools := &toolParser{names: map[string]bool{"get_weather": true}}
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	cases := []struct {
		text, content string
		calls         int
	}{
		{call, "", 1},
		{"Let me check.\n" + call, "Let me check.", 1},
		{"Both: " + call + "\n" + call, "Both:", 2},
		{`{"name": "get_weather", "parameters": {"city": "Rome"}}`, "", 1},
		{"<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {}}", "", 1},
		{"It is sunny < 30 C.", "It is sunny < 30 C.", 0},
		{"Text then <tool_call>{broken", "Text then <tool_call>{broken", 0},
		{`{"not": "a call"}`, `{"not": "a call"}`, 0},
		{"<tool", "<tool", 0},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		for range 300 {
			ts := &textStream{tools: tools}
			var streamed strings.Builder
			rest := c.text
			for rest != "" {
				n := 1 + rng.IntN(min(len(rest), 6))
				streamed.WriteString(ts.add(rest[:n]))
				rest = rest[n:]
			}
			content, calls, tail := ts.end()
			streamed.WriteString(tail)
			got := strings.TrimSpace(streamed.String())
			if len(calls) != c.calls || content != c.content || got != c.content {
				t.Fatalf("%q: streamed %q, content %q, %d calls; want %q and %d calls", c.text, got, content, len(calls), c.content, c.calls)
			}
		}
	}
}

// TestResponsesGoClient: openai-go's Responses client reads a response,
// its stream (whose deltas make the same text) and a continuation by
// previous_response_id.
func TestResponsesGoClient(t *testing.T) {
	ts := newTestServer(t, Options{})
	ctx := t.Context()
	params := responses.ResponseNewParams{Model: "stories", MaxOutputTokens: openai.Int(16), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Once upon a time")}}
	r, err := ts.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() == "" || r.Usage.OutputTokens != 16 || r.Status != "incomplete" {
		t.Fatalf("response %q, %d output tokens, status %s", r.OutputText(), r.Usage.OutputTokens, r.Status)
	}
	stream := ts.client.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	var last string
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		last = ev.Type
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != r.OutputText() || last != "response.incomplete" {
		t.Fatalf("streamed %q ending with %s, want %q and response.incomplete", text.String(), last, r.OutputText())
	}
	next := params
	next.PreviousResponseID = openai.String(r.ID)
	next.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("And then?")}
	r2, err := ts.client.Responses.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if r2.PreviousResponseID != r.ID || r2.Usage.InputTokens < r.Usage.InputTokens+r.Usage.OutputTokens {
		t.Fatalf("the continuation (%d input tokens) does not hold the first turn (%d + %d)", r2.Usage.InputTokens, r.Usage.InputTokens, r.Usage.OutputTokens)
	}
}

// TestResponseStoreBounded: the store keeps the last maxStoredResponses
// responses and forgets the older ones; delete forgets one.
func TestResponseStoreBounded(t *testing.T) {
	var st responseStore
	ids := make([]string, maxStoredResponses+10)
	for i := range ids {
		ids[i] = newID("resp_")
		st.put(&storedResponse{resp: responseObj{ID: ids[i]}})
	}
	for i, id := range ids {
		if got := st.get(id) != nil; got != (i >= 10) {
			t.Fatalf("response %d of %d: stored %v", i, len(ids), got)
		}
	}
	if !st.delete(ids[20]) || st.get(ids[20]) != nil || st.delete(ids[20]) {
		t.Fatal("delete did not forget the response once")
	}
	if len(st.byID) != maxStoredResponses-1 || len(st.order) != maxStoredResponses-1 {
		t.Fatalf("%d responses and %d in order after a delete, want %d", len(st.byID), len(st.order), maxStoredResponses-1)
	}
}
