package chat

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// realTemplate loads a template of testdata/templates (the vendors' own,
// see its README).
func realTemplate(t *testing.T, file string) *Template {
	t.Helper()
	tpl, err := Load(filepath.Join("testdata", "templates", file))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// weatherTools is the tools variable of the conversations below, as a
// client sends it (keys in its order): a required string with a
// description, an optional enum with a default, an optional integer.
const weatherTools = `[{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
 "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
 "unit": {"type": "string", "enum": ["c", "f"], "default": "c"}, "days": {"type": "integer"}}, "required": ["city"]}}}]`

// toolConversation is a system prompt, a question, the assistant's call
// (with a nine-character id, as Mistral's templates demand), its result,
// the answer and a second question.
var toolConversation = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Weather in Lima?"},
	{Role: "assistant", ToolCalls: []ToolCall{{ID: "abc123XYZ", Name: "get_weather", Arguments: `{"city": "Lima", "days": 2}`}}},
	{Role: "tool", Content: "19 C", ToolCallID: "abc123XYZ"},
	{Role: "assistant", Content: "It is 19 C."},
	{Role: "user", Content: "Thanks."},
}

// TestRealTemplatesRender renders toolConversation, with the tools, through
// the vendors' templates of Mistral Nemo, Mistral Small 3.2 and gpt-oss,
// each against the text its template writes, worked out by hand from
// the template's source: Nemo's tools as JSON objects written key by key
// before the last user turn and the system prompt joined to that turn,
// its calls as a JSON list with their ids and its results with the call
// id; Small 3.2's [SYSTEM_PROMPT], calls as NAME[CALL_ID]ID[ARGS]JSON and
// results after the call id; gpt-oss's harmony messages: the system
// message with the date and reasoning effort, the developer message with
// the instructions and the tools as a TypeScript namespace, the call on
// the commentary channel addressed to=functions.NAME, the result from
// functions.NAME as a JSON string, the final channel's answer, and the
// assistant header opening the reply (llama.cpp's test-chat expects the
// same "<|start|>assistant" ending).
func TestRealTemplatesRender(t *testing.T) {
	tools, err := decodeOrdered(weatherTools)
	if err != nil {
		t.Fatal(err)
	}
	params := `{"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, ` +
		`"unit": {"type": "string", "enum": ["c", "f"], "default": "c"}, "days": {"type": "integer"}}, "required": ["city"]}`
	for _, c := range []struct{ file, want string }{
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>[INST]Weather in Lima?[/INST]" +
			`[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima", "days": 2}, "id": "abc123XYZ"}]</s>` +
			`[TOOL_RESULTS]{"content": 19 C, "call_id": "abc123XYZ"}[/TOOL_RESULTS]` +
			"It is 19 C.</s>" +
			`[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": ` + params + `}}][/AVAILABLE_TOOLS]` +
			"[INST]Be brief.\n\nThanks.[/INST]"},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT]" +
			"[INST]Weather in Lima?[/INST]" +
			`[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city": "Lima", "days": 2}</s>` +
			"[TOOL_RESULTS]abc123XYZ[TOOL_CONTENT]19 C[/TOOL_RESULTS]" +
			"It is 19 C.</s>" +
			`[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": ` + params + `}}][/AVAILABLE_TOOLS]` +
			"[INST]Thanks.[/INST]"},
		{"openai-gpt-oss-120b.jinja", "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n" +
			"Knowledge cutoff: 2024-06\nCurrent date: 2025-06-20\n\nReasoning: low\n\n" +
			"# Valid channels: analysis, commentary, final. Channel must be included for every message.\n" +
			"Calls to these tools must go to the commentary channel: 'functions'.<|end|>" +
			"<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n" +
			"// Weather of a city\ntype get_weather = (_: {\n// City name\ncity: string,\n" +
			`unit?: "c" | "f", // default: c,` + "\ndays?: number,\n}) => any;\n\n} // namespace functions<|end|>" +
			"<|start|>user<|message|>Weather in Lima?<|end|>" +
			`<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Lima", "days": 2}<|call|>` +
			`<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"19 C"<|end|>` +
			"<|start|>assistant<|channel|>final<|message|>It is 19 C.<|end|>" +
			"<|start|>user<|message|>Thanks.<|end|><|start|>assistant"},
	} {
		t.Run(c.file, func(t *testing.T) {
			tpl := realTemplate(t, c.file)
			got, err := tpl.Render(toolConversation, Options{AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>",
				Now: time.Date(2025, 6, 20, 9, 0, 0, 0, time.UTC), Vars: map[string]any{"tools": tools, "reasoning_effort": "low"}})
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestRealTemplatesRefuse: Mistral's templates raise their own errors on
// a tool result without its call's id and on turns that do not
// alternate; gpt-oss's on a tool result with no call before it.
func TestRealTemplatesRefuse(t *testing.T) {
	noID := []Message{{Role: "user", Content: "u"}, {Role: "assistant", ToolCalls: []ToolCall{{ID: "abc123XYZ", Name: "f", Arguments: "{}"}}},
		{Role: "tool", Content: "r"}}
	twice := []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}
	orphan := []Message{{Role: "user", Content: "u"}, {Role: "tool", Content: "r"}}
	for _, c := range []struct {
		file string
		msgs []Message
	}{
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", noID},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", twice},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", noID},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", twice},
		{"openai-gpt-oss-120b.jinja", orphan},
	} {
		_, err := realTemplate(t, c.file).Render(c.msgs, Options{AddGenerationPrompt: true, Now: time.Date(2025, 6, 20, 0, 0, 0, 0, time.UTC)})
		if !IsException(err) {
			t.Errorf("%s %v: %v, want the template's exception", c.file, c.msgs, err)
		}
	}
}

// TestGptOssThinking: gpt-oss's template reads an assistant turn's
// reasoning as message.thinking: a call's analysis message is written
// while no final answer follows it, and dropped once one does.
func TestGptOssThinking(t *testing.T) {
	tpl := realTemplate(t, "openai-gpt-oss-120b.jinja")
	msgs := []Message{{Role: "user", Content: "Weather in Lima?"},
		{Role: "assistant", ReasoningContent: "Need the weather.", ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city": "Lima"}`}}},
		{Role: "tool", Content: "19 C"}}
	opts := Options{AddGenerationPrompt: true, Now: time.Date(2025, 6, 20, 0, 0, 0, 0, time.UTC)}
	got, err := tpl.Render(msgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	call := `<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Lima"}<|call|>`
	want := "<|start|>user<|message|>Weather in Lima?<|end|><|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|>" + call +
		`<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"19 C"<|end|><|start|>assistant`
	if !strings.HasSuffix(got, want) {
		t.Errorf("got %q, want it to end with %q", got, want)
	}
	got, err = tpl.Render(append(msgs, Message{Role: "assistant", Content: "It is 19 C."}, Message{Role: "user", Content: "Thanks."}), opts)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "Need the weather.") || !strings.Contains(got, "<|end|>"+call) {
		t.Errorf("the analysis of a call answered later is kept: %q", got)
	}
}
