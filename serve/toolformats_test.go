package serve

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestToolFormatOfRealTemplates: the format is derived from the real
// chat templates of the test data: Qwen3's (Hermes), Llama 3.2's (its
// bare JSON after <|python_tag|>), Gemma 3's (none: it teaches no call
// markup).
func TestToolFormatOfRealTemplates(t *testing.T) {
	for _, c := range []struct {
		family string
		want   toolFormat
	}{
		{"qwen3", formatHermes},
		{"llama3.2", formatLlama3},
		{"gemma3", formatAny},
	} {
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(testutil.ReadFile(t, "tokenizers/"+c.family+"/tokenizer_config.json"), &cfg); err != nil {
			t.Fatalf("%s: %v", c.family, err)
		}
		if cfg.ChatTemplate == "" {
			t.Fatalf("%s: no chat template", c.family)
		}
		if got := toolFormatOf(cfg.ChatTemplate); got != c.want {
			t.Errorf("%s: format %q, want %q", c.family, got, c.want)
		}
	}
}

// TestQwenXMLRealTemplate: the Qwen3.8 template of the test data teaches
// Qwen3-Coder's XML calls; the example call its system prompt shows
// (rendered with a tool) is read as a call, streamed without markup.
func TestQwenXMLRealTemplate(t *testing.T) {
	src := string(testutil.ReadFile(t, "chat-templates/qwen3.8.chat_template.jinja"))
	if got := toolFormatOf(src); got != formatQwenXML {
		t.Fatalf("format %q, want %q", got, formatQwenXML)
	}
	tpl, err := chat.ParseNamed("qwen3.8", src)
	if err != nil {
		t.Fatal(err)
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	out, err := tpl.Render([]chat.Message{{Role: "user", Content: "Weather?"}}, chat.Options{AddGenerationPrompt: true, Vars: map[string]any{"tools": tools}})
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(out, hermesOpen+"\n"+xmlFunction)
	j := strings.Index(out, hermesClose)
	if i < 0 || j < i {
		t.Fatalf("no example call in the rendered prompt:\n%s", out)
	}
	example := out[i : j+len(hermesClose)]
	ex := toolExample{format: formatQwenXML, text: "I will look it up.\n" + example, content: "I will look it up.",
		calls: []string{`example_function_name {"example_parameter_1":"value_1","example_parameter_2":"This is the value for the second parameter\nthat can span\nmultiple lines"}`}}
	p := &toolParser{names: map[string]bool{"example_function_name": true}, format: formatQwenXML}
	content, calls := p.parse(ex.text)
	if got := callStrings(calls); content != ex.content || strings.Join(got, "") != ex.calls[0] {
		t.Fatalf("the template's example %q: content %q, calls %q", example, content, got)
	}
	rng := rand.New(rand.NewPCG(38, 1))
	for range 300 {
		s, c, calls := streamChunks(p, ex.text, func(rest int) int { return 1 + rng.IntN(min(rest, 8)) })
		checkStream(t, ex, s, c, calls)
	}
}

// TestToolFormatOfMarkup: templates are told apart by the markup they
// write for an assistant's calls (fragments written after each family's
// published format).
func TestToolFormatOfMarkup(t *testing.T) {
	for src, want := range map[string]toolFormat{
		`{{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}{{- '<parameter=' + k + '>\n' }}`:                                  formatQwenXML,
		`{{ '\n<tool_call>' + tc.name }}<arg_key>{{ k }}</arg_key>\n<arg_value>{{ v }}</arg_value></tool_call>`:                      formatGLM,
		`{{- "[TOOL_CALLS]" + tool.function.name + "[ARGS]" + tool.function.arguments }}`:                                            formatMistral,
		`{{- '<|tool_call>call:' + function['name'] + '{' -}}`:                                                                       formatGemma,
		`{{- "<|start|>assistant to=functions." + tool_call.name + "<|channel|>commentary json<|message|>" + tool_call.arguments }}`: formatHarmony,
		`<tool_call>\n{"name": {{ tc.name | tojson }}, "arguments": {{ tc.arguments | tojson }}}\n</tool_call>`:                      formatHermes,
		`{{- '<|python_tag|>' + tool_call.name }}`:                                                                                   formatLlama3,
		`{{ message.content }}`: formatAny,
	} {
		if got := toolFormatOf(src); got != want {
			t.Errorf("%q: %q, want %q", src, got, want)
		}
	}
}

// toolExample is a model reply in one format, the text it shows and the
// calls it holds (name, space, compact JSON arguments).
type toolExample struct {
	format  toolFormat
	text    string
	content string
	calls   []string
}

// toolExamples are replies in every format read, written from each
// format's published description, with and without text, with parallel
// calls, and text that looks like markup but is none.
var toolExamples = []toolExample{
	{formatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []string{`get_weather {"city":"Paris"}`}},
	{formatHermes, "Checking.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
		"Checking.", []string{`add {"a":1,"b":2}`, `get_weather {"city":"Oslo"}`}},
	{formatLlama3, `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Rome"}}`, "", []string{`get_weather {"city":"Rome"}`}},
	{formatLlama3, `{"name": "add", "parameters": {"a": 3, "b": 4}}`, "", []string{`add {"a":3,"b":4}`}},
	{formatQwenXML, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
		"", []string{`get_weather {"city":"Paris","days":3}`}},
	{formatQwenXML, "Two calls.\n<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n<parameter=zip>\n01000\n</parameter>\n</function>\n</tool_call>",
		"Two calls.", []string{`add {"a":1,"b":2}`, `get_weather {"city":"São Paulo","zip":"01000"}`}},
	{formatGLM, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
		"", []string{`get_weather {"city":"Paris","days":3}`}},
	{formatGLM, "Let me look.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>zip</arg_key>\n<arg_value>0150</arg_value>\n</tool_call><tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1.5</arg_value>\n<arg_key>b</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>",
		"Let me look.", []string{`get_weather {"city":"Oslo","zip":"0150"}`, `add {"a":1.5,"b":[1,2]}`}},
	{formatMistral, `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}, {"name": "add", "arguments": {"a": 1, "b": 2}}]`,
		"", []string{`get_weather {"city":"Paris"}`, `add {"a":1,"b":2}`}},
	{formatMistral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}`,
		"", []string{`get_weather {"city":"Paris"}`, `add {"a":1,"b":2}`}},
	{formatMistral, `Sure.[TOOL_CALLS]get_weather[CALL_ID]x7Yz12345[ARGS]{"city": "Lyon"}`, "Sure.", []string{`get_weather {"city":"Lyon"}`}},
	{formatGemma, `<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>`, "", []string{`get_weather {"city":"Paris","days":3}`}},
	{formatGemma, `I will call both.<|tool_call>call:add{a:1,b:-2.5}<tool_call|><|tool_call>call:get_weather{city:<|"|>Oslo, Norway<|"|>,opts:{tags:[<|"|>a<|"|>,<|"|>b<|"|>],metric:true,note:null}}<tool_call|>`,
		"I will call both.", []string{`add {"a":1,"b":-2.5}`, `get_weather {"city":"Oslo, Norway","opts":{"tags":["a","b"],"metric":true,"note":null}}`}},
	{formatGemma, `<|tool_call>call:add{a:2,b:None}<tool_call|>`, "", []string{`add {"a":2,"b":null}`}},
	{formatGemma, `<start_function_call>call:get_weather{city:<escape>Rome<escape>}<end_function_call>`, "", []string{`get_weather {"city":"Rome"}`}},
	{formatHarmony, `<|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}`,
		"", []string{`get_weather {"city":"Paris"}`}},
	{formatHarmony, `<|channel|>analysis<|message|>Two things.<|end|><|start|>assistant to=functions.add<|channel|>commentary json<|message|>{"a": 1, "b": 2}<|call|><|start|>assistant<|channel|>commentary to=functions.get_weather json<|message|>{"city": "Oslo"}<|call|>`,
		"", []string{`add {"a":1,"b":2}`, `get_weather {"city":"Oslo"}`}},
	{formatHarmony, `<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny in Paris.`, "It is sunny in Paris.", nil},
	// no calls
	{formatAny, "It is sunny < 30 C [today].", "It is sunny < 30 C [today].", nil},
	{formatMistral, "Use [brackets] and <tags> freely.", "Use [brackets] and <tags> freely.", nil},
	{formatGemma, "<|tool_call>call:delete_all{}<tool_call|>", "<|tool_call>call:delete_all{}<tool_call|>", nil},
	{formatGLM, "<tool_call>get_weather\n<arg_key>city</arg_key>Paris</tool_call>", "<tool_call>get_weather\n<arg_key>city</arg_key>Paris</tool_call>", nil},
	{formatMistral, `[TOOL_CALLS]get_weather{"city": "Paris"}`, `[TOOL_CALLS]get_weather{"city": "Paris"}`, nil},
	{formatGLM, `{"name": "add", "arguments": {"a": 1}}`, `{"name": "add", "arguments": {"a": 1}}`, nil},
}

func exampleParser(f toolFormat) *toolParser {
	return &toolParser{names: map[string]bool{"get_weather": true, "add": true}, format: f,
		types: map[string]map[string]string{"get_weather": argTypes(json.RawMessage(
			`{"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}, "days": {"type": "integer"}}}`))}}
}

func callStrings(calls []toolCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Function.Name+" "+c.Function.Arguments)
	}
	return out
}

// TestParseToolFormats: each example parses to its text and calls, every
// call with an id and the type function.
func TestParseToolFormats(t *testing.T) {
	for _, ex := range toolExamples {
		content, calls := exampleParser(ex.format).parse(ex.text)
		got := callStrings(calls)
		if content != ex.content || strings.Join(got, "\n") != strings.Join(ex.calls, "\n") {
			t.Errorf("%s %q:\ncontent %q calls %q\nwant    %q calls %q", ex.format, ex.text, content, got, ex.content, ex.calls)
		}
		for _, c := range calls {
			if c.ID == "" || c.Type != "function" || !json.Valid([]byte(c.Function.Arguments)) {
				t.Errorf("%s: call %+v", ex.format, c)
			}
		}
	}
}

// callMarkup is the markup of every format: none of it may reach the
// streamed text of a reply whose calls were read.
var callMarkup = []string{hermesOpen, hermesClose, pythonTag, xmlFunction, xmlFunctionEnd, "<parameter=", "</parameter>",
	"<arg_key>", "<arg_value>", mistralCalls, mistralArgs, mistralCallID, gemmaOpen, gemmaClose, gemmaQuote, fgemmaOpen,
	fgemmaQuote, harmonyChannel, harmonyStart, harmonyMessage, harmonyFunction, "<|end|>", "<|call|>", "<|constrain|>"}

// streamChunks feeds text to a textStream in the chunks cut, and returns
// the streamed text and what end gives.
func streamChunks(p *toolParser, text string, cut func(rest int) int) (streamed, content string, calls []toolCall) {
	ts := &textStream{tools: p}
	var b strings.Builder
	for rest := text; rest != ""; {
		n := cut(len(rest))
		b.WriteString(ts.add(rest[:n]))
		rest = rest[n:]
	}
	content, calls, tail := ts.end()
	b.WriteString(tail)
	return b.String(), content, calls
}

// checkStream checks one streamed example: the streamed text is the
// reply's text (no markup when there are calls) and the calls are read.
func checkStream(t *testing.T, ex toolExample, streamed, content string, calls []toolCall) {
	t.Helper()
	if strings.TrimSpace(streamed) != ex.content || content != ex.content {
		t.Fatalf("%s %q: streamed %q, content %q; want %q", ex.format, ex.text, streamed, content, ex.content)
	}
	if got := callStrings(calls); strings.Join(got, "\n") != strings.Join(ex.calls, "\n") {
		t.Fatalf("%s %q: calls %q, want %q", ex.format, ex.text, got, ex.calls)
	}
	if len(ex.calls) > 0 {
		for _, m := range callMarkup {
			if strings.Contains(streamed, m) {
				t.Fatalf("%s %q: %q leaked into the streamed text %q", ex.format, ex.text, m, streamed)
			}
		}
	}
}

// TestToolFormatsDoNotLeak streams every example cut at random chunk
// boundaries (1 to 8 bytes, 300 cuttings each, and one byte at a time):
// no markup reaches the streamed text, which is always the reply's text,
// and the calls are those of the whole reply.
func TestToolFormatsDoNotLeak(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 5))
	for _, ex := range toolExamples {
		p := exampleParser(ex.format)
		s, c, calls := streamChunks(p, ex.text, func(int) int { return 1 })
		checkStream(t, ex, s, c, calls)
		for range 300 {
			s, c, calls := streamChunks(p, ex.text, func(rest int) int { return 1 + rng.IntN(min(rest, 8)) })
			checkStream(t, ex, s, c, calls)
		}
	}
}

// FuzzToolStreamChunks cuts an example reply (chosen by the first byte)
// at the boundaries the other bytes give: the streamed text never holds
// markup and always is the reply's text.
func FuzzToolStreamChunks(f *testing.F) {
	for i := range toolExamples {
		f.Add(byte(i), []byte{1, 2, 3, 5, 8, 13})
		f.Add(byte(i), []byte{7})
	}
	f.Fuzz(func(t *testing.T, which byte, cuts []byte) {
		ex := toolExamples[int(which)%len(toolExamples)]
		k := 0
		s, c, calls := streamChunks(exampleParser(ex.format), ex.text, func(rest int) int {
			n := 1
			if len(cuts) > 0 {
				n = 1 + int(cuts[k%len(cuts)])%16
				k++
			}
			return min(n, rest)
		})
		checkStream(t, ex, s, c, calls)
	})
}

// FuzzToolParse: any reply, in any format and cut anywhere, parses
// without a panic; the streamed text is the parsed text (up to the
// blanks at its ends), and calls come with valid JSON arguments.
func FuzzToolParse(f *testing.F) {
	for i, ex := range toolExamples {
		f.Add(byte(i), ex.text, uint64(i))
	}
	formats := []toolFormat{formatAny, formatHermes, formatLlama3, formatQwenXML, formatGLM, formatMistral, formatGemma, formatHarmony}
	f.Fuzz(func(t *testing.T, which byte, text string, seed uint64) {
		p := exampleParser(formats[int(which)%len(formats)])
		rng := rand.New(rand.NewPCG(seed, 1))
		s, content, calls := streamChunks(p, text, func(rest int) int { return 1 + rng.IntN(min(rest, 8)) })
		if strings.TrimSpace(s) != strings.TrimSpace(content) {
			t.Fatalf("%q: streamed %q, content %q", text, s, content)
		}
		for _, c := range calls {
			if !json.Valid([]byte(c.Function.Arguments)) || !p.names[c.Function.Name] {
				t.Fatalf("%q: call %+v", text, c)
			}
		}
	})
}

// TestHarmonyAnalysis: gpt-oss's analysis messages are its thinking,
// apart from the answer and the calls; other replies have none.
func TestHarmonyAnalysis(t *testing.T) {
	for text, want := range map[string]string{
		"<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather json<|message|>{}":                 "Need the weather.",
		"<|channel|>analysis<|message|> One. <|end|><|start|>assistant<|channel|>analysis<|message|>Two.<|end|><|start|>assistant<|channel|>final<|message|>Done.": "One.\nTwo.",
		"<|channel|>final<|message|>Done.": "",
		"<tool_call>{}</tool_call>":        "",
	} {
		if got := harmonyAnalysis(text); got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
	p := exampleParser(formatHarmony)
	ts := &textStream{tools: p}
	ts.add("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>It is 21 C.")
	if content, calls, tail := ts.end(); content != "It is 21 C." || len(calls) != 0 || tail != content {
		t.Fatalf("content %q, %d calls, tail %q", content, len(calls), tail)
	}
}
