package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/chatmodel"
)

var (
	qwen3Once sync.Once
	qwen3Dir  string
	qwen3Path string
	qwen3Err  error
)

// openQwen3 builds the Qwen3 chat model of chatmodel (random weights, the
// real Qwen3 tokenizer and <think> template, a 4,096-token context) once
// per test binary and opens it.
func openQwen3(t *testing.T) *aotlm.Model {
	t.Helper()
	vocab := testutil.Path(t, "tokenizers/qwen2.5/vocab.json")
	cfg := testutil.Path(t, "tokenizers/qwen3/tokenizer_config.json")
	qwen3Once.Do(func() {
		if qwen3Dir, qwen3Err = os.MkdirTemp("", "aotlm-qwen3-chat"); qwen3Err != nil {
			return
		}
		qwen3Path, qwen3Err = chatmodel.BuildQwen3(qwen3Dir, filepath.Dir(vocab), filepath.Dir(cfg))
	})
	if qwen3Err != nil {
		t.Fatalf("building the Qwen3 chat model: %v", qwen3Err)
	}
	m, err := aotlm.Open(qwen3Path, aotlm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// chatJSON posts a chat request and decodes the answer, failing on a
// status other than 200.
func chatJSON(t *testing.T, ts *testServer, body map[string]any) chatResponse {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, text := send(t, ts, http.MethodPost, "/v1/chat/completions", string(b), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: status %d: %s", resp.StatusCode, text)
	}
	var r chatResponse
	if err := json.Unmarshal([]byte(text), &r); err != nil || r.Usage == nil || len(r.Choices) != 1 || r.Choices[0].Message == nil {
		t.Fatalf("chat answer %s: %v", text, err)
	}
	return r
}

// oracleTokens renders msgs with the model's template and vars and
// returns the text and its token count.
func oracleTokens(t *testing.T, m *aotlm.Model, msgs []aotlm.Message, vars map[string]any) (string, int) {
	t.Helper()
	text, err := m.RenderChat(msgs, aotlm.RenderOptions{Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	return text, len(ids)
}

// toolDefs is three tools with documented parameters, as a client sends
// them: the Qwen3 template renders them as JSON in a <tools> block of
// over 1,000 tokens.
const toolDefs = `[
 {"type": "function", "function": {"name": "get_weather",
  "description": "Get the current weather conditions and the forecast for the next hours in a city. Use it whenever the user asks about the temperature, rain, wind, snow, humidity or what to wear outside; do not guess the weather from the season. The answer holds the temperature, the apparent temperature, the wind speed and direction, the chance of rain for each of the next six hours, and the time of sunrise and sunset in the local time of the city.",
  "parameters": {"type": "object", "properties": {
   "city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima", "Oslo"], "description": "The city, by its English name, among the cities the weather service covers."},
   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "The unit of the temperatures in the answer: celsius unless the user writes in fahrenheit."},
   "hours": {"type": "integer", "minimum": 1, "maximum": 6, "description": "How many hours of forecast to return, from one to six; the forecast beyond six hours is not reliable enough to be shown."}},
   "required": ["city", "unit"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "search_flights",
  "description": "Search the direct and one-stop flights between two airports on a given day, sorted by price. Use it when the user wants to travel by plane, compares travel options, or asks how long a trip takes. The answer lists, for each flight, the airline, the flight number, the departure and arrival times in local time, the number of stops, the duration, the price in the requested currency and the number of seats left at that price.",
  "parameters": {"type": "object", "properties": {
   "origin": {"type": "string", "description": "The IATA code of the departure airport, three capital letters such as CDG for Paris Charles de Gaulle or HND for Tokyo Haneda."},
   "destination": {"type": "string", "description": "The IATA code of the arrival airport, three capital letters; it must differ from the origin."},
   "date": {"type": "string", "description": "The day of departure as YYYY-MM-DD, today or a later day within the next eleven months."},
   "passengers": {"type": "integer", "minimum": 1, "maximum": 9, "description": "The number of adult passengers travelling together, from one to nine; children are counted as adults for the search."},
   "cabin": {"type": "string", "enum": ["economy", "premium_economy", "business", "first"], "description": "The cabin class; economy unless the user asks for another."},
   "currency": {"type": "string", "enum": ["EUR", "USD", "JPY", "PEN", "NOK"], "description": "The currency of the prices, by default the currency of the country of the origin airport."}},
   "required": ["origin", "destination", "date"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "convert_currency",
  "description": "Convert an amount of money from one currency to another at today's mid-market rate, as published by the central banks at the end of the previous working day. Use it for any question about prices in another currency, exchange rates, or the cost of a trip abroad; the answer holds the converted amount rounded to the smallest unit of the target currency, the rate used and the date of that rate.",
  "parameters": {"type": "object", "properties": {
   "amount": {"type": "number", "minimum": 0, "description": "The amount to convert, in units of the source currency (not cents); it may have decimals."},
   "from": {"type": "string", "enum": ["EUR", "USD", "JPY", "PEN", "NOK"], "description": "The ISO 4217 code of the currency the amount is in."},
   "to": {"type": "string", "enum": ["EUR", "USD", "JPY", "PEN", "NOK"], "description": "The ISO 4217 code of the currency to convert to; it must differ from the source currency."}},
   "required": ["amount", "from", "to"], "additionalProperties": false}}}
]`

// templateTools decodes toolDefs as the template sees them.
func templateTools(t *testing.T) []any {
	t.Helper()
	var tools []tool
	if err := json.Unmarshal([]byte(toolDefs), &tools); err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, tl := range tools {
		b, _ := json.Marshal(tl)
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestQwen3ToolRoundTrip: on the Qwen3 chat model, three tools render
// through the real template into a prompt of over 1,000 tokens (the
// usage counts exactly the tokens of the template's rendering, which
// holds the <tools> block and each tool); tool_choice naming a function
// gets a call of it with arguments under its schema; the call and the
// tool's result sent back reach the template as message.tool_calls and
// a "tool" message, which it renders in its own <tool_call> and
// <tool_response> layouts, and are answered.
func TestQwen3ToolRoundTrip(t *testing.T) {
	m := openQwen3(t)
	ts := newTestServerFor(t, m, Options{ModelID: "qwen3-chat"})
	var tools any
	if err := json.Unmarshal([]byte(toolDefs), &tools); err != nil {
		t.Fatal(err)
	}
	user := "What is the weather in Lima now, in celsius?"
	first := chatJSON(t, ts, map[string]any{
		"messages":    []map[string]any{{"role": "user", "content": user}},
		"tools":       tools,
		"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}},
		"max_tokens":  160, "temperature": 0,
	})
	vars := map[string]any{"tools": templateTools(t)}
	text, n := oracleTokens(t, m, []aotlm.Message{{Role: "user", Content: user}}, vars)
	for _, want := range []string{"# Tools", "<tools>", `"name": "get_weather"`, `"name": "search_flights"`, `"name": "convert_currency"`, "</tools>", "<tool_call>"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered prompt lacks %q", want)
		}
	}
	if first.Usage.PromptTokens != n || n <= 1000 {
		t.Fatalf("prompt tokens %d, the template's rendering has %d (want over 1,000)", first.Usage.PromptTokens, n)
	}
	msg := first.Choices[0].Message
	if len(msg.ToolCalls) != 1 || *first.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("first turn: finish %q, %d tool calls (want one, finish tool_calls)", *first.Choices[0].FinishReason, len(msg.ToolCalls))
	}
	call := msg.ToolCalls[0]
	var args struct {
		City  string `json:"city"`
		Unit  string `json:"unit"`
		Hours *int   `json:"hours"`
	}
	if call.Function.Name != "get_weather" || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil ||
		!strings.Contains("Paris Tokyo Lima Oslo", args.City) || args.City == "" ||
		(args.Unit != "celsius" && args.Unit != "fahrenheit") || (args.Hours != nil && (*args.Hours < 1 || *args.Hours > 6)) {
		t.Fatalf("call %s(%s): want get_weather with arguments under its schema", call.Function.Name, call.Function.Arguments)
	}
	t.Logf("prompt %d tokens; call get_weather(%s)", n, call.Function.Arguments)

	result := `{"temperature": 19, "apparent": 18, "wind_kmh": 12, "rain": [0, 0, 10, 20, 20, 10]}`
	second := chatJSON(t, ts, map[string]any{
		"messages": []map[string]any{
			{"role": "user", "content": user},
			{"role": "assistant", "content": nil, "tool_calls": []any{call}},
			{"role": "tool", "tool_call_id": call.ID, "content": result},
		},
		"tools": tools, "max_tokens": 8, "temperature": 0,
	})
	text2, n2 := oracleTokens(t, m, []aotlm.Message{{Role: "user", Content: user},
		{Role: "assistant", ToolCalls: []aotlm.ToolCall{{ID: call.ID, Name: call.Function.Name, Arguments: call.Function.Arguments}}},
		{Role: "tool", Content: result}}, vars)
	// the template's own layout: its '{"name": "' text, then the
	// arguments as Python's json.dumps prints them
	for _, want := range []string{"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " +
		pyDumps(t, call.Function.Arguments) + "}\n</tool_call><|im_end|>",
		"<|im_start|>user\n<tool_response>\n" + result + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"} {
		if !strings.Contains(text2, want) {
			t.Errorf("the second turn's rendering lacks %q:\n%s", want, text2[len(text2)-min(len(text2), 400):])
		}
	}
	if strings.Contains(text2, `{"name":"get_weather"`) {
		t.Errorf("the second turn's rendering holds the call in the compact form of a content")
	}
	if second.Usage.PromptTokens != n2 || n2 <= n {
		t.Errorf("second turn: prompt tokens %d, the template's rendering has %d (the first %d)", second.Usage.PromptTokens, n2, n)
	}
	if second.Usage.CompletionTokens < 1 {
		t.Errorf("second turn: %d completion tokens", second.Usage.CompletionTokens)
	}
}

// pyDumps prints JSON text as Python's json.dumps does by default (", "
// and ": " separators, keys in their order), as templates' tojson does.
func pyDumps(t *testing.T, text string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var b strings.Builder
	var dump func()
	dump = func() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("arguments %s: %v", text, err)
		}
		switch v := tok.(type) {
		case json.Delim:
			b.WriteString(v.String())
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if v == '{' {
					k, _ := dec.Token()
					key, _ := json.Marshal(k)
					b.WriteString(string(key) + ": ")
				}
				dump()
			}
			end, _ := dec.Token()
			b.WriteString(end.(json.Delim).String())
		case json.Number:
			b.WriteString(v.String())
		default:
			e, _ := json.Marshal(v)
			b.Write(e)
		}
	}
	dump()
	return b.String()
}

// rawReply generates, through /v1/completions, the raw text that
// follows the prompt ids under the given sampling fields.
func rawReply(t *testing.T, ts *testServer, ids []int, fields map[string]any) string {
	t.Helper()
	body := map[string]any{"prompt": ids}
	for k, v := range fields {
		body[k] = v
	}
	var out completionResponse
	if resp := postJSON(t, ts, "/v1/completions", body, &out); resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
		t.Fatalf("completion: status %d, %d choices", resp.StatusCode, len(out.Choices))
	}
	return out.Choices[0].Text
}

// TestQwen3Reasoning: on the Qwen3 chat model, chat_template_kwargs
// enable_thinking false renders the template's empty think block (4
// tokens more than the prompt with thinking on) and the reply is all
// answer; with thinking on, a reply the logit bias makes of <think>,
// </think> and two words is split at the first </think>: the thinking
// goes to reasoning_content and the rest to content, both equal to the
// parts of the raw text /v1/completions generates from the same prompt
// and seed, and streamed in the same two parts.
func TestQwen3Reasoning(t *testing.T) {
	m := openQwen3(t)
	ts := newTestServerFor(t, m, Options{ModelID: "qwen3-chat"})
	msgs := []aotlm.Message{{Role: "user", Content: "Plan a short walk."}}
	onText, on := oracleTokens(t, m, msgs, nil)
	offText, off := oracleTokens(t, m, msgs, map[string]any{"enable_thinking": false})
	if !strings.HasSuffix(offText, "<|im_start|>assistant\n<think>\n\n</think>\n\n") || offText[:len(onText)] != onText || off != on+4 {
		t.Fatalf("thinking off renders %d tokens (%q), on %d: want the empty think block, 4 tokens more", off, offText, on)
	}
	word := func(s string) string {
		ids, err := m.Encode(s, true)
		if err != nil || len(ids) != 1 {
			t.Fatalf("%q encodes to %v (%v), want one token", s, ids, err)
		}
		return strconv.Itoa(ids[0])
	}
	plan, hello := word(" Plan"), word(" Hello")
	think, unthink := word("<think>"), word("</think>")
	chatMsgs := []map[string]any{{"role": "user", "content": msgs[0].Content}}

	// thinking off: the prompt holds the empty block, the reply is answer
	words := map[string]any{plan: 100, hello: 100}
	r := chatJSON(t, ts, map[string]any{"messages": chatMsgs, "max_tokens": 6, "temperature": 1, "seed": 7,
		"logit_bias": words, "chat_template_kwargs": map[string]any{"enable_thinking": false}})
	if r.Usage.PromptTokens != off {
		t.Errorf("thinking off: %d prompt tokens, the template's rendering has %d", r.Usage.PromptTokens, off)
	}
	offIDs, _ := m.Encode(offText, true)
	raw := rawReply(t, ts, offIDs, map[string]any{"max_tokens": 6, "temperature": 1, "seed": 7, "logit_bias": words})
	msg := r.Choices[0].Message
	if msg.ReasoningContent != nil || msg.Content == nil || strings.TrimSpace(*msg.Content) != strings.TrimSpace(raw) || raw == "" {
		t.Errorf("thinking off: content %q, reasoning %v; the raw reply is %q", deref(msg.Content), msg.ReasoningContent, raw)
	}

	// thinking on: find a seed whose raw reply thinks, then answers
	onIDs, _ := m.Encode(onText, true)
	marks := map[string]any{think: 100, unthink: 100, plan: 100, hello: 100}
	// the penalties lower a token each time it is said, so that the
	// biased tokens take turns whatever the random weights favour
	fields := map[string]any{"max_tokens": 10, "temperature": 2, "logit_bias": marks,
		"presence_penalty": 2, "frequency_penalty": 2}
	for seed := 1; seed <= 60; seed++ {
		fields["seed"] = seed
		raw := rawReply(t, ts, onIDs, fields)
		after, ok := strings.CutPrefix(raw, "<think>")
		thought, answer, closed := strings.Cut(after, "</think>")
		if !ok || !closed || strings.TrimSpace(thought) == "" || strings.TrimSpace(answer) == "" {
			continue
		}
		body := map[string]any{"messages": chatMsgs}
		for k, v := range fields {
			body[k] = v
		}
		r := chatJSON(t, ts, body)
		msg := r.Choices[0].Message
		if r.Usage.PromptTokens != on {
			t.Errorf("thinking on: %d prompt tokens, the template's rendering has %d", r.Usage.PromptTokens, on)
		}
		if msg.ReasoningContent == nil || *msg.ReasoningContent != strings.TrimSpace(thought) ||
			msg.Content == nil || *msg.Content != strings.TrimSpace(answer) {
			t.Fatalf("seed %d: raw reply %q split into reasoning %v and content %v; want %q and %q",
				seed, raw, msg.ReasoningContent, msg.Content, strings.TrimSpace(thought), strings.TrimSpace(answer))
		}
		body["stream"] = true
		reasoning, content := streamedChat(t, ts, body)
		if reasoning != *msg.ReasoningContent || content != *msg.Content {
			t.Errorf("seed %d: streamed reasoning %q and content %q, the whole answer's %q and %q",
				seed, reasoning, content, *msg.ReasoningContent, *msg.Content)
		}
		t.Logf("seed %d: reasoning %q, content %q", seed, *msg.ReasoningContent, *msg.Content)
		return
	}
	t.Fatal("no seed of 1..60 made a reply that opens with <think>, thinks, closes and answers")
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestQwen3LongPrompt: on the Qwen3 chat model (context 4,096), a chat
// of about 3,000 tokens of a book is accepted and answered with the
// reply a session gives to the same rendered prompt; a prompt over the
// context is refused with a 400 that names the context.
func TestQwen3LongPrompt(t *testing.T) {
	m := openQwen3(t)
	ts := newTestServerFor(t, m, Options{ModelID: "qwen3-chat"})
	book := string(testutil.ReadFile(t, "text/war-and-peace.txt"))
	// 12,500 characters of the book are about 3,000 Qwen3 tokens
	long := book[20000:32500]
	want := ts.direct(t, long, aotlm.Request{MaxTokens: 16})
	r := chatJSON(t, ts, map[string]any{"messages": []map[string]any{{"role": "user", "content": long}},
		"max_tokens": 16, "temperature": 0})
	_, n := oracleTokens(t, m, []aotlm.Message{{Role: "user", Content: long}}, nil)
	if r.Usage.PromptTokens != n || n != len(want.PromptIDs) || n < 2800 || n > 3500 {
		t.Fatalf("prompt tokens %d, the template's rendering has %d, the session's prompt %d (want about 3,000)",
			r.Usage.PromptTokens, n, len(want.PromptIDs))
	}
	msg := r.Choices[0].Message
	if msg.Content == nil || *msg.Content != want.Text || want.Text == "" || r.Usage.CompletionTokens < 1 {
		t.Fatalf("reply %q (%d tokens), the session's %q", deref(msg.Content), r.Usage.CompletionTokens, want.Text)
	}
	t.Logf("%d prompt tokens, %d completion tokens", n, r.Usage.CompletionTokens)

	body, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": book[20000:40000]}}, "max_tokens": 4})
	resp, text := send(t, ts, http.MethodPost, "/v1/chat/completions", string(body), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(text, "4096") {
		t.Errorf("a prompt over the context: status %d: %s", resp.StatusCode, text)
	}
}

// streamedChat posts a streaming chat request and joins the deltas of
// reasoning_content and of content.
func streamedChat(t *testing.T, ts *testServer, body map[string]any) (reasoning, content string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(ts.http.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("streaming chat: status %d", resp.StatusCode)
	}
	var r, c strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var chunk chatResponse
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, ch := range chunk.Choices {
			if d := ch.Delta; d != nil {
				if d.ReasoningContent != nil {
					r.WriteString(*d.ReasoningContent)
				}
				if d.Content != nil {
					c.WriteString(*d.Content)
				}
			}
		}
	}
	if !done {
		t.Fatalf("the stream ended without [DONE]: %v", sc.Err())
	}
	return r.String(), c.String()
}

// TestQwen3ToolHistoryAPIs: an earlier tool call sent back through the
// Anthropic (tool_use), Responses (function_call) and Ollama (tool_calls)
// APIs reaches the Qwen3 template as message.tool_calls, as through chat
// completions: each prompt has exactly the tokens of the template's
// rendering of the call in its own <tool_call> layout.
func TestQwen3ToolHistoryAPIs(t *testing.T) {
	m := openQwen3(t)
	user := "What is the weather in Lima now, in celsius?"
	result := `{"temperature": 19}`
	text, n := oracleTokens(t, m, []aotlm.Message{{Role: "user", Content: user},
		{Role: "assistant", ToolCalls: []aotlm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lima","unit":"celsius"}`}}},
		{Role: "tool", Content: result}}, nil)
	if want := "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " +
		pyDumps(t, `{"city":"Lima","unit":"celsius"}`) + "}\n</tool_call><|im_end|>\n"; !strings.Contains(text, want) {
		t.Fatalf("the rendering lacks %q:\n%s", want, text)
	}

	// Ollama first, on a fresh server: its count leaves out cached tokens
	ts := newTestServerFor(t, m, Options{ModelID: "qwen3-chat"})
	var ollama struct {
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	postJSON(t, ts, "/api/chat", map[string]any{"model": "qwen3-chat", "stream": false, "options": map[string]any{"num_predict": 1, "temperature": 0},
		"messages": []map[string]any{{"role": "user", "content": user},
			{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"function": map[string]any{"name": "get_weather",
				"arguments": map[string]any{"city": "Lima", "unit": "celsius"}}}}},
			{"role": "tool", "content": result, "tool_name": "get_weather"}}}, &ollama)
	if ollama.PromptEvalCount != n {
		t.Errorf("Ollama: %d prompt tokens, the template's rendering has %d", ollama.PromptEvalCount, n)
	}

	var anth struct {
		InputTokens int `json:"input_tokens"`
	}
	// (Messages think only when asked to; the template's default thinks)
	postJSON(t, ts, "/v1/messages/count_tokens", map[string]any{"thinking": map[string]any{"type": "enabled"}, "messages": []map[string]any{{"role": "user", "content": user},
		{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "call_1", "name": "get_weather",
			"input": map[string]any{"city": "Lima", "unit": "celsius"}}}},
		{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "call_1", "content": result}}}}}, &anth)
	if anth.InputTokens != n {
		t.Errorf("Anthropic: %d input tokens, the template's rendering has %d", anth.InputTokens, n)
	}

	var resp struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	postJSON(t, ts, "/v1/responses", map[string]any{"max_output_tokens": 1, "temperature": 0, "store": false,
		"input": []any{map[string]any{"role": "user", "content": user},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": `{"city":"Lima","unit":"celsius"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": result}}}, &resp)
	if resp.Usage.InputTokens != n {
		t.Errorf("Responses: %d input tokens, the template's rendering has %d", resp.Usage.InputTokens, n)
	}
}
