package chat

import (
	"strings"
	"testing"
)

// TestQwen3ToolCalls renders an assistant turn with tool calls through the
// Qwen3 template: each call reaches message.tool_calls, so the template
// writes its own <tool_call> blocks, with the arguments printed by tojson
// in the order the client sent their keys, integers as integers and
// floats as Python prints them; arguments that are not JSON are written
// as sent, and "" is an empty object.
func TestQwen3ToolCalls(t *testing.T) {
	tpl, sp := loadTemplate(t, "tokenizers/qwen3/tokenizer_config.json")
	msgs := []Message{
		{Role: "user", Content: "Weather in Lima?"},
		{Role: "assistant", ToolCalls: []ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: `{"unit":"celsius","city":"Lima","hours":3,"ratio":1.0,"big":1e3,"tags":["á",null,true,{"z":1,"a":2}]}`},
			{ID: "call_2", Name: "get_time", Arguments: ""},
			{Name: "note", Arguments: "plain text"},
		}},
		{Role: "tool", Content: "19"},
		{Role: "tool", Content: "10:00"},
	}
	got, err := tpl.Render(msgs, Options{AddGenerationPrompt: true, BOSToken: sp.BOS, EOSToken: sp.EOS})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nWeather in Lima?<|im_end|>\n<|im_start|>assistant\n" +
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\", \"city\": \"Lima\", \"hours\": 3, \"ratio\": 1.0, " +
		"\"big\": 1000.0, \"tags\": [\"á\", null, true, {\"z\": 1, \"a\": 2}]}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"note\", \"arguments\": plain text}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n19\n</tool_response>\n<tool_response>\n10:00\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	// content before the calls is kept, with a newline before the first
	msgs[1].Content = "Let me look."
	msgs[1].ToolCalls = msgs[1].ToolCalls[1:2]
	got, err = tpl.Render(msgs, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>assistant\nLet me look.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n"; !strings.Contains(got, want) {
		t.Errorf("got %q, want it to hold %q", got, want)
	}
}

// TestToolCallValues checks the shape templates see: OpenAI's {"id",
// "type", "function": {"name", "arguments"}}, and no tool_calls at all on
// a message without calls.
func TestToolCallValues(t *testing.T) {
	tpl, err := Parse(`{% for m in messages %}{{ m.tool_calls is defined }}|` +
		`{% for c in m.tool_calls %}{{ c.id }} {{ c.type }} {{ c.function.name }} {{ c.function.arguments.x }} {{ c.function.arguments | tojson }};{% endfor %}` +
		`{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render([]Message{{Role: "user", Content: "u"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"y": [1.5], "x": "v"}`}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `False|True|c1 function f v {"y": [1.5], "x": "v"};`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestDecodeOrdered checks the JSON decoding of arguments against bad input.
func TestDecodeOrdered(t *testing.T) {
	for _, bad := range []string{`{"a":`, `{"a":1} x`, `[1,]`, `{1:2}`, strings.Repeat("[", 100) + strings.Repeat("]", 100)} {
		if v, err := decodeOrdered(bad); err == nil {
			t.Errorf("decodeOrdered(%q) = %v, want an error", bad, v)
		}
	}
	if v, err := decodeOrdered(`123456789012345678901234567890`); err != nil || v != 1.2345678901234568e29 {
		t.Errorf("a big integer: %v, %v (want a float)", v, err)
	}
}

// TestToolCallsRealTemplates renders an earlier call and its result with
// each template of the test data that reads message.tool_calls, and the
// vendors' templates of Mistral Nemo, Mistral Small 3.2 and gpt-oss
// (testdata/templates): each writes the function's name and its
// arguments (Mistral's with the call's id, which they demand of nine
// letters and digits, also on the result).
func TestToolCallsRealTemplates(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima", "days": 2}, "id": "abc123XYZ"}]</s>` +
			`[TOOL_RESULTS]{"content": 19, "call_id": "abc123XYZ"}[/TOOL_RESULTS]`},
		{"templates/Mistral-Small-3.2-24B-Instruct-2506.jinja", `[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city": "Lima", "days": 2}</s>` +
			`[TOOL_RESULTS]abc123XYZ[TOOL_CONTENT]19[/TOOL_RESULTS]`},
		{"templates/openai-gpt-oss-120b.jinja", `<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Lima", "days": 2}<|call|>` +
			`<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"19"<|end|>`},
		{"tokenizers/qwen2.5/tokenizer_config.json", `<tool_call>
{"name": "get_weather", "arguments": {"city": "Lima", "days": 2}}
</tool_call>`},
		{"tokenizers/llama3.2/tokenizer_config.json", `{"name": "get_weather", "parameters": {"city": "Lima", "days": 2}}<|eot_id|>`},
		{"chat-templates/qwen3.8.chat_template.jinja", "<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>"},
	} {
		t.Run(c.file, func(t *testing.T) {
			var tpl *Template
			sp := Specials{BOS: "<s>", EOS: "</s>"}
			if strings.HasPrefix(c.file, "templates/") {
				tpl = realTemplate(t, strings.TrimPrefix(c.file, "templates/"))
			} else {
				tpl, sp = loadTemplate(t, c.file)
			}
			got, err := tpl.Render([]Message{{Role: "user", Content: "Weather in Lima?"},
				{Role: "assistant", ToolCalls: []ToolCall{{ID: "abc123XYZ", Name: "get_weather", Arguments: `{"city": "Lima", "days": 2}`}}},
				{Role: "tool", Content: "19", ToolCallID: "abc123XYZ"}}, Options{AddGenerationPrompt: true, BOSToken: sp.BOS, EOSToken: sp.EOS, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("got %q, want it to hold %q", got, c.want)
			}
		})
	}
}

// TestToolResultFields: a tool turn reaches the template with its
// tool_call_id and its function's name, the name taken from the earlier
// call of that id when the turn has none; empty fields are left out (so
// `is defined` fails, as with Hugging Face), and the real templates of
// the test data render a tool turn the same with the fields or without.
func TestToolResultFields(t *testing.T) {
	tpl, err := Parse(`{% for m in messages %}{{ m.role }}:{% if m.tool_call_id is defined %}id={{ m.tool_call_id }}{% endif %}` +
		`{% if m.name is defined %} name={{ m.name }}{% endif %};{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "Weather?", Name: "ana"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{}`}, {ID: "c2", Name: "get_time", Arguments: `{}`}}},
		{Role: "tool", Content: "19", ToolCallID: "c2"},
		{Role: "tool", Content: "20", ToolCallID: "c1", Name: "weather"},
		{Role: "tool", Content: "21", ToolCallID: "c9"},
		{Role: "tool", Content: "22"}}
	got, err := tpl.Render(msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "user: name=ana;assistant:;tool:id=c2 name=get_time;tool:id=c1 name=weather;tool:id=c9;tool:;"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, file := range []string{"tokenizers/qwen2.5/tokenizer_config.json", "tokenizers/llama3.2/tokenizer_config.json",
		"tokenizers/qwen3/tokenizer_config.json", "chat-templates/qwen3.8.chat_template.jinja"} {
		tpl, sp := loadTemplate(t, file)
		render := func(id, name string) string {
			out, err := tpl.Render([]Message{{Role: "user", Content: "Weather in Lima?"},
				{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city": "Lima"}`}}},
				{Role: "tool", Content: "19", ToolCallID: id, Name: name}}, Options{AddGenerationPrompt: true, BOSToken: sp.BOS, EOSToken: sp.EOS, Now: fixedNow})
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			return out
		}
		if with, without := render("c1", "get_weather"), render("", ""); with != without || !strings.Contains(with, "19") {
			t.Errorf("%s: the tool turn renders as %q with the fields, %q without", file, with, without)
		}
	}
}
