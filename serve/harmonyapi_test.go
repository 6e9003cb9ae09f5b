package serve

import (
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/aotlm/aotlm"
)

// harmonyReplyGrammar keeps the story model to a gpt-oss reply: an
// analysis message, then the final answer.
const harmonyReplyGrammar = `root ::= "<|channel|>analysis<|message|>" think "<|end|><|start|>assistant<|channel|>final<|message|>" answer
think ::= "The user wants a " [a-z]{3,8} " story. " [a-z]{3,8} " is " [a-z]{3,8} "."
answer ::= "Once upon a time, a " [a-z]{3,8} " sat."
`

var (
	harmonyThinkRE  = regexp.MustCompile(`^The user wants a [a-z]{3,8} story\. [a-z]{3,8} is [a-z]{3,8}\.$`)
	harmonyAnswerRE = regexp.MustCompile(`^Once upon a time, a [a-z]{3,8} sat\.$`)
)

// TestHarmonyStream: a gpt-oss reply streamed in chunks cut anywhere
// gives its thinking and its answer as the whole reply reads them, with
// no markup (a call of an unknown tool leaves the whole reply as text,
// as unstreamed), and gives them as they come (the thinking before the
// reply ends).
func TestHarmonyStream(t *testing.T) {
	p := exampleParser(formatHarmony)
	rng := rand.New(rand.NewPCG(5, 49))
	for _, text := range []string{
		"<|channel|>analysis<|message|>  Need the weather.\n<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}",
		"<|channel|>analysis<|message|> One. <|end|><|start|>assistant<|channel|>analysis<|message|>Two.<|end|><|start|>assistant<|channel|>final<|message|> It is 21 C.\n",
		"<|channel|>final<|message|>Done.<|return|>",
		"Plain text < with > marks | that are none.",
		"<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.delete_all json<|message|>{}",
	} {
		wantR := harmonyAnalysis(text)
		wantC, _ := p.parse(text)
		for range 200 {
			h := &harmonyStream{names: p.names}
			var gotR, gotC strings.Builder
			early := false
			for rest := text; rest != ""; {
				n := 1 + rng.IntN(min(len(rest), 9))
				r, c := h.add(rest[:n])
				rest = rest[n:]
				if r != "" && rest != "" {
					early = true
				}
				gotR.WriteString(r)
				gotC.WriteString(c)
			}
			r, c := h.end(wantR, wantC)
			gotR.WriteString(r)
			gotC.WriteString(c)
			if gotR.String() != wantR || gotC.String() != wantC {
				t.Fatalf("%q: streamed %q / %q, the whole reply reads %q / %q", text, gotR.String(), gotC.String(), wantR, wantC)
			}
			if strings.Contains(gotR.String()+gotC.String(), "<|") != strings.Contains(wantC, "<|") {
				t.Fatalf("%q: markup streamed: %q / %q", text, gotR.String(), gotC.String())
			}
			if len(wantR) > 8 && !early {
				t.Fatalf("%q: the thinking came only at the end", text)
			}
		}
	}
}

// TestHarmonyReasoningAPIs: a gpt-oss reply's analysis channel is the
// Responses API's reasoning item and the Messages API's thinking block
// (and chat completions' reasoning_content, Ollama's thinking), the
// final channel the answer; streamed, the thinking comes in several
// deltas before the answer, adding up to the whole.
func TestHarmonyReasoningAPIs(t *testing.T) {
	m := openStories(t)
	if err := m.SetChatTemplate("harmony", formatTemplates[formatHarmony]); err != nil {
		t.Fatal(err)
	}
	ts := newTestServerFor(t, m, Options{})
	msgs := []map[string]any{{"role": "user", "content": "Tell me a story."}}
	check := func(api, think, answer string) {
		t.Helper()
		if !harmonyThinkRE.MatchString(think) || !harmonyAnswerRE.MatchString(answer) {
			t.Errorf("%s: thinking %q, answer %q", api, think, answer)
		}
	}
	status, out := rawPost(t, ts, "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 200, "grammar": harmonyReplyGrammar})
	if status != http.StatusOK {
		t.Fatal(out)
	}
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	check("chat completions", msg["reasoning_content"].(string), msg["content"].(string))

	status, out = rawPost(t, ts, "/api/chat", map[string]any{"model": "stories", "messages": msgs, "stream": false,
		"options": map[string]any{"num_predict": 200, "grammar": harmonyReplyGrammar}})
	if status != http.StatusOK {
		t.Fatal(out)
	}
	msg = out["message"].(map[string]any)
	check("ollama", msg["thinking"].(string), msg["content"].(string))

	respBody := map[string]any{"input": "Tell me a story.", "max_output_tokens": 200, "grammar": harmonyReplyGrammar}
	status, out = rawPost(t, ts, "/v1/responses", respBody)
	if status != http.StatusOK {
		t.Fatal(out)
	}
	var think, answer string
	for _, it := range out["output"].([]any) {
		item := it.(map[string]any)
		for _, part := range item["content"].([]any) {
			switch text := part.(map[string]any)["text"].(string); item["type"] {
			case "reasoning":
				think += text
			case "message":
				answer += text
			}
		}
	}
	check("responses", think, answer)
	respBody["stream"] = true
	think, answer = "", ""
	thinkDeltas, answered := 0, false
	for _, e := range sseEvents(t, ts, "/v1/responses", respBody) {
		switch e.name {
		case "response.reasoning_text.delta":
			if answered {
				t.Error("responses: thinking after the answer began")
			}
			think += e.data["delta"].(string)
			thinkDeltas++
		case "response.output_text.delta":
			answer += e.data["delta"].(string)
			answered = true
		}
	}
	check("responses, streamed", think, answer)
	if thinkDeltas < 2 {
		t.Errorf("responses: the thinking came in %d delta", thinkDeltas)
	}

	anthBody := map[string]any{"model": "stories", "messages": msgs, "max_tokens": 200, "grammar": harmonyReplyGrammar}
	status, out = rawPost(t, ts, "/v1/messages", anthBody)
	if status != http.StatusOK {
		t.Fatal(out)
	}
	think, answer = "", ""
	for _, b := range out["content"].([]any) {
		switch blk := b.(map[string]any); blk["type"] {
		case "thinking":
			think += blk["thinking"].(string)
		case "text":
			answer += blk["text"].(string)
		}
	}
	check("messages", think, answer)
	anthBody["stream"] = true
	think, answer = "", ""
	thinkDeltas = 0
	for _, e := range sseEvents(t, ts, "/v1/messages", anthBody) {
		if e.name != "content_block_delta" {
			continue
		}
		d := e.data["delta"].(map[string]any)
		switch d["type"] {
		case "thinking_delta":
			think += d["thinking"].(string)
			thinkDeltas++
		case "text_delta":
			answer += d["text"].(string)
		}
	}
	check("messages, streamed", think, answer)
	if thinkDeltas < 2 {
		t.Errorf("messages: the thinking came in %d delta", thinkDeltas)
	}
}

// TestReasoningEffortVar: the reasoning effort a request asks for
// (chat completions' reasoning_effort, the Responses API's
// reasoning.effort, an Ollama think level) reaches the chat template as
// reasoning_effort, which gpt-oss's templates write into the system
// message.
func TestReasoningEffortVar(t *testing.T) {
	m := openStories(t)
	tpl := `{% if reasoning_effort is defined %}<|start|>system<|message|>Reasoning: {{ reasoning_effort }}<|end|>{% endif %}` + formatTemplates[formatHarmony]
	if err := m.SetChatTemplate("effort", tpl); err != nil {
		t.Fatal(err)
	}
	msgs := []aotlm.Message{{Role: "user", Content: "Tell me a story."}}
	_, high := oracleTokens(t, m, msgs, map[string]any{"reasoning_effort": "high"})
	_, none := oracleTokens(t, m, msgs, nil)
	if high == none {
		t.Fatal("the template does not write the effort")
	}
	ts := newTestServerFor(t, m, Options{})
	user := []map[string]any{{"role": "user", "content": "Tell me a story."}}
	var chat struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	postJSON(t, ts, "/v1/chat/completions", map[string]any{"messages": user, "max_tokens": 1, "reasoning_effort": "high"}, &chat)
	if chat.Usage.PromptTokens != high {
		t.Errorf("chat completions: %d prompt tokens, want %d", chat.Usage.PromptTokens, high)
	}
	var resp struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	postJSON(t, ts, "/v1/responses", map[string]any{"input": "Tell me a story.", "max_output_tokens": 1, "store": false, "reasoning": map[string]any{"effort": "high"}}, &resp)
	if resp.Usage.InputTokens != high {
		t.Errorf("responses: %d input tokens, want %d", resp.Usage.InputTokens, high)
	}
	fresh := newTestServerFor(t, m, Options{})
	var ollama struct {
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	postJSON(t, fresh, "/api/chat", map[string]any{"model": "stories", "stream": false, "think": "high", "messages": user, "options": map[string]any{"num_predict": 1}}, &ollama)
	if ollama.PromptEvalCount != high {
		t.Errorf("ollama: %d prompt tokens, want %d", ollama.PromptEvalCount, high)
	}
}

// FuzzHarmonyStream: however a reply is cut into chunks, what the stream
// gives adds up to the whole reply's thinking and answer (their leading
// whitespace aside), unless a mark opens no call of a known tool (an
// unknown name, arguments that are no JSON), which makes the whole reply
// text.
func FuzzHarmonyStream(f *testing.F) {
	f.Add("<|channel|>analysis<|message|> One. <|end|><|start|>assistant<|channel|>final<|message|> It is 21 C.\n", uint64(1))
	f.Add("<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather json<|message|>{\"city\": \"Oslo\"}<|call|>", uint64(2))
	f.Add("  plain text <tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call> after", uint64(3))
	f.Add("Hi<|channel|>final<|message|>\n\nYes<|return|>", uint64(4))
	f.Add(" to=x<|channel|>final<|message|>hi", uint64(5))
	f.Add(" t", uint64(6))
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		p := exampleParser(formatHarmony)
		if _, _, ok := p.marked(text); !ok {
			return // a mark that opens no call of a known tool: the reply is text
		}
		wantR := harmonyAnalysis(text)
		wantC, _ := p.parse(text)
		rng := rand.New(rand.NewPCG(seed, 7))
		h := &harmonyStream{names: p.names}
		var gotR, gotC strings.Builder
		for rest := text; rest != ""; {
			n := 1 + rng.IntN(min(len(rest), 12))
			r, c := h.add(rest[:n])
			rest = rest[n:]
			gotR.WriteString(r)
			gotC.WriteString(c)
		}
		r, c := h.end(wantR, wantC)
		gotR.WriteString(r)
		gotC.WriteString(c)
		if gotR.String() != strings.TrimLeftFunc(wantR, unicode.IsSpace) || gotC.String() != strings.TrimLeftFunc(wantC, unicode.IsSpace) {
			t.Fatalf("%q: streamed %q / %q, the whole reply reads %q / %q", text, gotR.String(), gotC.String(), wantR, wantC)
		}
	})
}
