package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// formatTemplates are short chat templates in the manner of each
// family's, each writing an assistant's calls in its markup (which
// tells the format), over ChatML turns the story model can read.
var formatTemplates = map[toolFormat]string{
	formatGLM: chatMLTurns + `{% if false %}<tool_call>{{ tc.name }}<arg_key>{{ k }}</arg_key>
<arg_value>{{ v }}</arg_value></tool_call>{% endif %}`,
	formatGemma: chatMLTurns + `{% if false %}<|tool_call>call:{{ tc.name }}{ }<tool_call|>{% endif %}`,
	formatQwenXML: chatMLTurns + `{% if false %}<tool_call>
<function={{ tc.name }}>
<parameter={{ k }}>
{{ v }}
</parameter>
</function>
</tool_call>{% endif %}`,
	formatHarmony: `{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}` +
		`{% if false %}<|channel|>commentary{% endif %}{% if add_generation_prompt %}<|start|>assistant{% endif %}`,
}

const chatMLTurns = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// fgemmaTemplate writes FunctionGemma's markup.
const fgemmaTemplate = chatMLTurns + `{% if false %}<start_function_call>call:{{ tc.name }}{ }<end_function_call>{% endif %}`

// TestForcedCallTextFormats: a call forced under a template of
// Qwen3-Coder's XML (the test data's real Qwen3.8 template), GLM-4.5's,
// Gemma's or gpt-oss's format is written in that markup (the grammar
// takes a call written as the family's template writes one, and refuses
// the Hermes block), and through the
// server the story model's forced calls come back as tool_calls whose
// arguments validate under the tool's schema.
func TestForcedCallTextFormats(t *testing.T) {
	templates := map[string]string{
		"qwen3-coder":   string(testutil.ReadFile(t, "chat-templates/qwen3.8.chat_template.jinja")),
		"glm4.5":        formatTemplates[formatGLM],
		"gemma":         formatTemplates[formatGemma],
		"functiongemma": fgemmaTemplate,
		"harmony":       formatTemplates[formatHarmony],
	}
	examples := map[string]string{
		"qwen3-coder":   "<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
		"glm4.5":        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>fahrenheit</arg_value>\n</tool_call>",
		"gemma":         `<|tool_call>call:get_weather{city:<|"|>Oslo, Norway<|"|>,unit:<|"|>celsius<|"|>,days:12}<tool_call|>`,
		"functiongemma": `<start_function_call>call:get_weather{city:<escape>Rome<escape>,unit:<escape>celsius<escape>}<end_function_call>`,
		"harmony":       `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "unit": "celsius"}`,
	}
	hermes := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
	weather := tool{Type: "function", Function: toolFunction{Name: "get_weather", Parameters: json.RawMessage(weatherParams)}}
	validator := schemaValidator(t, weatherParams)
	for name, tpl := range templates {
		t.Run(name, func(t *testing.T) {
			m := openStories(t)
			if err := m.SetChatTemplate(name, tpl); err != nil {
				t.Fatal(err)
			}
			s := &Server{m: m}
			for text, ok := range map[string]bool{examples[name]: true, hermes: false} {
				r, e := s.callFormat(0, weather)
				if e != nil {
					t.Fatal(e.Message)
				}
				if got := r.Feed([]byte(text)) && r.Done(); got != ok {
					t.Errorf("%q accepted %v, want %v", text, got, ok)
				}
			}
			p := &toolParser{names: map[string]bool{"get_weather": true}, format: toolFormatOf(tpl), types: map[string]map[string]string{"get_weather": argTypes(json.RawMessage(weatherParams))}}
			if _, calls := p.parse(examples[name]); len(calls) != 1 || validates(validator, calls[0].Function.Arguments) != nil {
				t.Errorf("the example %q reads as %+v", examples[name], calls)
			}

			if name == "qwen3-coder" {
				// the real template's prompt outgrows the story model's
				// context: the server runs on a short one of the format
				if err := m.SetChatTemplate(name, formatTemplates[formatQwenXML]); err != nil {
					t.Fatal(err)
				}
			}
			ts := newTestServerFor(t, m, Options{})
			tools := []map[string]any{
				{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": json.RawMessage(weatherParams)}},
				{"type": "function", "function": map[string]any{"name": "add", "parameters": json.RawMessage(addParams)}},
			}
			addV := schemaValidator(t, addParams)
			for seed := 1; seed <= 4; seed++ {
				choice := any("required")
				if seed%2 == 0 {
					choice = map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}
				}
				body := map[string]any{"messages": []map[string]any{{"role": "user", "content": "What is the weather in Paris?"}},
					"tools": tools, "tool_choice": choice, "max_tokens": 190, "temperature": 1, "seed": seed}
				status, out := rawPost(t, ts, "/v1/chat/completions", body)
				if status != http.StatusOK {
					t.Fatalf("seed %d: %d %v", seed, status, out)
				}
				c := out["choices"].([]any)[0].(map[string]any)
				msg := c["message"].(map[string]any)
				calls, _ := msg["tool_calls"].([]any)
				if c["finish_reason"] != "tool_calls" || len(calls) != 1 {
					t.Errorf("seed %d: finish %v, message %v %v", seed, c["finish_reason"], msg, out["usage"])
					continue
				}
				fn := calls[0].(map[string]any)["function"].(map[string]any)
				args, _ := fn["arguments"].(string)
				v := validator
				if fn["name"] == "add" {
					v = addV
				}
				if seed%2 == 0 && fn["name"] != "get_weather" {
					t.Errorf("seed %d: the named function is get_weather, the call is %v", seed, fn["name"])
				}
				if err := validates(v, args); err != nil {
					t.Errorf("seed %d: %v arguments %s: %v", seed, fn["name"], args, err)
				}
				if content, _ := msg["content"].(string); strings.Contains(content, "<") {
					t.Errorf("seed %d: markup left in the content %q", seed, content)
				}
				t.Logf("seed %d: %v %s", seed, fn["name"], args)
			}
		})
	}
}
