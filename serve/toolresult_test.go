package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
)

// toolResultTemplate writes each tool turn with the id and name it
// carries, and refuses one that answers another call or names no
// function.
const toolResultTemplate = `{% for m in messages %}{% if m.role == 'tool' %}` +
	`{% if m.name != 'get_weather' or (m.tool_call_id and m.tool_call_id != 'call_1') %}{{ raise_exception('tool turn with id ' ~ m.tool_call_id ~ ' and name ' ~ m.name) }}{% endif %}` +
	`<|im_start|>tool {{ m.name }} {{ m.tool_call_id }}
{{ m.content }}<|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}{% for c in m.tool_calls or [] %}[{{ c.id }} {{ c.function.name }}]{% endfor %}<|im_end|>
{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// TestToolResultIDAndName: a tool result reaches the template with its
// call's id (tool_call_id) and its function's name (name) from every
// API: OpenAI's role tool with tool_call_id (the name resolved from the
// earlier call), Anthropic's tool_result tool_use_id, the Responses
// API's function_call_output call_id and Ollama's tool_name; the prompt
// is the one the template renders for those fields, and a result that
// names a call no earlier turn made reaches it without a name.
func TestToolResultIDAndName(t *testing.T) {
	m := openStories(t)
	if err := m.SetChatTemplate("tool-result", toolResultTemplate); err != nil {
		t.Fatal(err)
	}
	user, result := "What is the weather in Lima?", `{"temperature": 19}`
	oracle := func(id string) int {
		_, n := oracleTokens(t, m, []aotlm.Message{{Role: "user", Content: user},
			{Role: "assistant", ToolCalls: []aotlm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lima"}`}}},
			{Role: "tool", Content: result, ToolCallID: id, Name: "get_weather"}}, nil)
		return n
	}
	withID, withoutID := oracle("call_1"), oracle("")
	if withID == withoutID {
		t.Fatal("the template does not write the id")
	}
	ts := newTestServerFor(t, m, Options{})
	call := map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Lima"}`}}
	openaiBody := func(id string) map[string]any {
		return map[string]any{"max_tokens": 1, "temperature": 0, "messages": []map[string]any{{"role": "user", "content": user},
			{"role": "assistant", "content": nil, "tool_calls": []any{call}},
			{"role": "tool", "tool_call_id": id, "content": result}}}
	}
	var chat struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if resp := postJSON(t, ts, "/v1/chat/completions", openaiBody("call_1"), &chat); resp.StatusCode != http.StatusOK || chat.Usage.PromptTokens != withID {
		t.Errorf("chat completions: %d, %d prompt tokens, want %d", resp.StatusCode, chat.Usage.PromptTokens, withID)
	}
	status, out := rawPost(t, ts, "/v1/chat/completions", openaiBody("call_9"))
	if e, _ := out["error"].(map[string]any); status != http.StatusBadRequest || !strings.Contains(e["message"].(string), "tool turn with id call_9 and name ") {
		t.Errorf("a result of an unknown call: %d %v", status, out)
	}

	var anth struct {
		InputTokens int `json:"input_tokens"`
	}
	postJSON(t, ts, "/v1/messages/count_tokens", map[string]any{"messages": []map[string]any{{"role": "user", "content": user},
		{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": map[string]any{"city": "Lima"}}}},
		{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "call_1", "content": result}}}}}, &anth)
	if anth.InputTokens != withID {
		t.Errorf("Anthropic: %d input tokens, want %d", anth.InputTokens, withID)
	}

	var resp struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	postJSON(t, ts, "/v1/responses", map[string]any{"max_output_tokens": 1, "temperature": 0, "store": false,
		"input": []any{map[string]any{"role": "user", "content": user},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": `{"city":"Lima"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": result}}}, &resp)
	if resp.Usage.InputTokens != withID {
		t.Errorf("Responses: %d input tokens, want %d", resp.Usage.InputTokens, withID)
	}

	// Ollama's calls have no ids (the server numbers them by message and
	// call): the result carries the name only
	fresh := newTestServerFor(t, m, Options{})
	var ollama struct {
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	postJSON(t, fresh, "/api/chat", map[string]any{"model": "stories", "stream": false, "options": map[string]any{"num_predict": 1, "temperature": 0},
		"messages": []map[string]any{{"role": "user", "content": user},
			{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"function": map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Lima"}}}}},
			{"role": "tool", "content": result, "tool_name": "get_weather"}}}, &ollama)
	_, n := oracleTokens(t, m, []aotlm.Message{{Role: "user", Content: user},
		{Role: "assistant", ToolCalls: []aotlm.ToolCall{{ID: "call_1_0", Name: "get_weather", Arguments: `{"city":"Lima"}`}}},
		{Role: "tool", Content: result, Name: "get_weather"}}, nil)
	if ollama.PromptEvalCount != n {
		t.Errorf("Ollama: %d prompt tokens, want %d", ollama.PromptEvalCount, n)
	}
}
