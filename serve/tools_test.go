package serve

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/openai/openai-go/v3"
)

func TestParseToolCalls(t *testing.T) {
	p := &toolParser{names: map[string]bool{"get_weather": true, "add": true}}
	cases := []struct {
		text, content string
		calls         []string // name + " " + arguments
	}{
		// Hermes / Qwen
		{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []string{`get_weather {"city":"Paris"}`}},
		{"Let me check.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n</tool_call>",
			"Let me check.", []string{`add {"a":1,"b":2}`, `get_weather {"city": "Oslo"}`}},
		// Llama 3, bare and after <|python_tag|>
		{`{"name": "get_weather", "parameters": {"city": "Rome"}}`, "", []string{`get_weather {"city":"Rome"}`}},
		{`<|python_tag|>{"name": "add", "parameters": {}}`, "", []string{`add {}`}},
		// not calls: an unknown tool, broken JSON, plain text
		{`{"name": "delete_all", "arguments": {}}`, `{"name": "delete_all", "arguments": {}}`, nil},
		{"<tool_call>{\"name\": \"add\", </tool_call>", "<tool_call>{\"name\": \"add\", </tool_call>", nil},
		{"It is sunny.", "It is sunny.", nil},
	}
	for _, c := range cases {
		content, calls := p.parse(c.text)
		var got []string
		for _, k := range calls {
			if k.Type != "function" || k.ID == "" {
				t.Errorf("%q: call %+v without type or id", c.text, k)
			}
			got = append(got, k.Function.Name+" "+k.Function.Arguments)
		}
		if content != c.content || len(got) != len(c.calls) {
			t.Errorf("%q: content %q calls %q, want %q %q", c.text, content, got, c.content, c.calls)
			continue
		}
		for i := range got {
			if got[i] != c.calls[i] {
				t.Errorf("%q: call %d is %q, want %q", c.text, i, got[i], c.calls[i])
			}
		}
	}
	for _, s := range []string{"", " <tool", "<tool_call>{", "{\"na", "<|python"} {
		if !p.maybeCall(s) {
			t.Errorf("maybeCall(%q) = false", s)
		}
	}
	if p.maybeCall("Once") {
		t.Error("maybeCall(Once) = true")
	}
}

// TestToolsRoundTrip: the tools reach the chat template, and a
// conversation with an assistant's tool call and the tool's result is
// rendered and answered.
func TestToolsRoundTrip(t *testing.T) {
	ts := newTestServer(t, Options{})
	tool := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("the weather in a city"),
		Parameters:  openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})
	plain, err := ts.client.Chat.Completions.New(context.Background(), userChat(4, nil))
	if err != nil {
		t.Fatal(err)
	}
	withTools, err := ts.client.Chat.Completions.New(context.Background(), userChat(4, func(p *openai.ChatCompletionNewParams) {
		p.Tools = []openai.ChatCompletionToolUnionParam{tool}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if withTools.Usage.PromptTokens <= plain.Usage.PromptTokens {
		t.Fatalf("prompt with tools has %d tokens, without %d: the template did not see them", withTools.Usage.PromptTokens, plain.Usage.PromptTokens)
	}
	none, err := ts.client.Chat.Completions.New(context.Background(), userChat(4, func(p *openai.ChatCompletionNewParams) {
		p.Tools = []openai.ChatCompletionToolUnionParam{tool}
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if none.Usage.PromptTokens != plain.Usage.PromptTokens {
		t.Fatalf("tool_choice none: %d prompt tokens, want %d as without tools", none.Usage.PromptTokens, plain.Usage.PromptTokens)
	}
	// the second half of a round trip: the call and its result go back
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	p := userChat(6, func(p *openai.ChatCompletionNewParams) { p.Tools = []openai.ChatCompletionToolUnionParam{tool} })
	p.Messages = append(p.Messages,
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
		openai.ToolMessage(`{"temperature": 21}`, "call_1"))
	after, err := ts.client.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if after.Usage.PromptTokens <= withTools.Usage.PromptTokens {
		t.Fatalf("the tool call and result added no prompt tokens (%d vs %d)", after.Usage.PromptTokens, withTools.Usage.PromptTokens)
	}
}

// TestHistoryCallsByTemplate: an assistant's earlier tool calls reach a
// template that reads message.tool_calls as those calls, and one that
// does not as text in the Hermes form appended to the message's content.
func TestHistoryCallsByTemplate(t *testing.T) {
	var call toolCall
	call.ID, call.Type, call.Function.Name, call.Function.Arguments = "call_1", "function", "add", `{"b":2,"a":1}`
	req := &chatRequest{Messages: []chatMessage{{Role: "user", Content: textContent{Text: "add", Set: true}},
		{Role: "assistant", Content: textContent{Text: "Sure.", Set: true}, ToolCalls: []toolCall{call}},
		{Role: "tool", ToolCallID: "call_1", Content: textContent{Text: "3", Set: true}}}}
	for _, c := range []struct {
		name, template string
		content        string
		calls          []aotlm.ToolCall
		want           string
	}{
		{"reads tool_calls", mistralTools, "Sure.", []aotlm.ToolCall{{ID: "call_1", Name: "add", Arguments: `{"b":2,"a":1}`}},
			`[TOOL_CALLS][{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"b": 2, "a": 1}}}]`},
		{"content only", llama3Tools, "Sure.\n<tool_call>\n{\"name\":\"add\",\"arguments\":{\"b\":2,\"a\":1}}\n</tool_call>", nil,
			"<|assistant|>Sure.\n<tool_call>\n{\"name\":\"add\",\"arguments\":{\"b\":2,\"a\":1}}\n</tool_call><|tool|>3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := openStories(t)
			if err := m.SetChatTemplate("t", c.template); err != nil {
				t.Fatal(err)
			}
			ts := newTestServerFor(t, m, Options{})
			j, _, _, e := ts.srv.chatJob(req)
			if e != nil {
				t.Fatal(e.Message)
			}
			text, err := m.RenderChat([]aotlm.Message{{Role: "user", Content: "add"},
				{Role: "assistant", Content: c.content, ToolCalls: c.calls}, {Role: "tool", Content: "3"}}, aotlm.RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text, c.want) {
				t.Fatalf("the rendering %q lacks %q", text, c.want)
			}
			ids, err := m.Encode(text, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(j.ids, ids) {
				t.Errorf("the prompt has %d ids, the expected rendering %d", len(j.ids), len(ids))
			}
		})
	}
}
