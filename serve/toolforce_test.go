package serve

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/constrain"
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

// textArgsParams has a property of each kind the text formats write.
const textArgsParams = `{"type": "object", "properties": {
	"city": {"type": "string", "minLength": 1, "maxLength": 12},
	"count": {"type": "integer", "minimum": 0},
	"delta": {"type": "integer"},
	"ratio": {"type": "number"},
	"ok": {"type": "boolean"},
	"mode": {"enum": ["fast", "slow", 3]},
	"level": {"type": "string", "enum": ["low", "high"]},
	"meta": {"type": "object"},
	"tags": {"type": "array"},
	"note": {"type": ["string", "null"]}},
	"required": ["city", "count", "mode", "ok"]}`

// TestTextCallGrammarRoundTrip: random texts the forced-call grammar of
// each text format accepts (drawn token by token through its mask, over
// a vocabulary of single bytes and pieces of the markup) read back as
// one call whose arguments validate under the tool's schema.
func TestTextCallGrammarRoundTrip(t *testing.T) {
	vocab := [][]byte{nil} // id 0 ends the text
	for c := byte(' '); c <= '~'; c++ {
		vocab = append(vocab, []byte{c})
	}
	for _, piece := range []string{"\n", "é", "<parameter=", "</parameter>\n", "<arg_key>", "</arg_key>\n", "<arg_value>", "</arg_value>\n",
		`<|"|>`, "<escape>", "true", "false", "null", "12", "-3", "fast", "\"slow\"", "<tool_call>", "call:", "<function="} {
		vocab = append(vocab, []byte(piece))
	}
	validator := schemaValidator(t, textArgsParams)
	rng := rand.New(rand.NewPCG(49, 3))
	for _, c := range []struct {
		f     toolFormat
		quote string
	}{{formatQwenXML, ""}, {formatGLM, ""}, {formatGemma, gemmaQuote}, {formatGemma, fgemmaQuote}} {
		src, err := textCallGrammar(c.f, "probe", []byte(textArgsParams), c.quote)
		if err != nil {
			t.Fatal(err)
		}
		g, err := constrain.ParseGBNF(src)
		if err != nil {
			t.Fatalf("%s: %v in\n%s", c.f, err, src)
		}
		p := &toolParser{names: map[string]bool{"probe": true}, format: c.f, types: map[string]map[string]string{"probe": argTypes(json.RawMessage(textArgsParams))}}
		for trial := range 60 {
			const budget = 600
			mask := constrain.NewMaskFor(constrain.NewGrammarRecognizer(g), vocab, []int{0}, budget)
			var gen []int
			var text strings.Builder
			for len(gen) < budget {
				logits := make([]float32, len(vocab))
				for i := range logits {
					logits[i] = float32(rng.NormFloat64())
				}
				mask.Apply(logits, gen)
				best := -1
				for i, l := range logits {
					if !math.IsInf(float64(l), -1) && (best < 0 || l > logits[best]) {
						best = i
					}
				}
				if best <= 0 {
					break
				}
				gen = append(gen, best)
				text.Write(vocab[best])
			}
			mask.Apply(make([]float32, len(vocab)), gen) // feeds the last token
			if !mask.Done() {
				t.Fatalf("%s trial %d: the text %q is incomplete", c.f, trial, text.String())
			}
			_, calls := p.parse(text.String())
			if len(calls) != 1 {
				t.Fatalf("%s trial %d: %q reads as %d calls", c.f, trial, text.String(), len(calls))
			}
			if err := validates(validator, calls[0].Function.Arguments); err != nil {
				t.Fatalf("%s trial %d: %q reads as %s: %v", c.f, trial, text.String(), calls[0].Function.Arguments, err)
			}
			if trial == 0 {
				t.Logf("%s: %q -> %s", c.f, text.String(), calls[0].Function.Arguments)
			}
		}
	}
}

// FuzzTextCallGrammar: for any parameters schema the JSON-schema subset
// takes, the forced-call grammar of each text format is valid GBNF, and
// its shortest call reads back as a call of the tool.
func FuzzTextCallGrammar(f *testing.F) {
	f.Add([]byte(textArgsParams), uint8(0))
	f.Add([]byte(weatherParams), uint8(1))
	f.Add([]byte(`{"type": "object", "properties": {"a\"b": {"enum": ["<x>", "\n"]}, "c": {"const": null}}, "required": ["c"]}`), uint8(2))
	f.Add([]byte(`{"properties": {"s": {"type": "string", "minLength": 300, "maxLength": 2}}}`), uint8(3))
	formats := []struct {
		f     toolFormat
		quote string
	}{{formatQwenXML, ""}, {formatGLM, ""}, {formatGemma, gemmaQuote}, {formatGemma, fgemmaQuote}}
	f.Fuzz(func(t *testing.T, params []byte, which uint8) {
		if len(params) > 4096 {
			return
		}
		if _, err := constrain.CompileSchema(params); err != nil {
			return // refused before any grammar is written
		}
		c := formats[int(which)%len(formats)]
		src, err := textCallGrammar(c.f, "probe", params, c.quote)
		if err != nil {
			return // a schema the grammar cannot read is a 400
		}
		g, err := constrain.ParseGBNF(src)
		if err != nil {
			t.Fatalf("%s: the grammar of %s does not parse: %v\n%s", c.f, params, err, src)
		}
		r := constrain.NewGrammarRecognizer(g)
		if r.ClosingLen() <= 0 {
			t.Fatalf("%s: the grammar of %s accepts the empty text", c.f, params)
		}
	})
}
