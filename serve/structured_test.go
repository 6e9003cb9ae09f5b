package serve

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// personSchema has required properties, an enum, an integer in a range,
// a string with a length range, an optional array and a nullable string.
const personSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "minLength": 2, "maxLength": 12},
	"age": {"type": "integer", "minimum": 0, "maximum": 120},
	"mood": {"type": "string", "enum": ["happy", "sad", "angry"]},
	"pets": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
	"nick": {"type": ["string", "null"]}},
	"required": ["name", "age", "mood"], "additionalProperties": false}`

// schemaValidator compiles a schema with an outside JSON Schema
// implementation, the oracle of these tests.
func schemaValidator(t *testing.T, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func validates(v *jsonschema.Schema, text string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return v.Validate(inst)
}

func schemaMap(t *testing.T, src string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(src), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestJSONSchemaOutput: with response_format json_schema, sampled replies
// of a story model (whose free text is far from JSON), long or cut short
// by max_tokens, streamed or not, parse and validate under the schema.
func TestJSONSchemaOutput(t *testing.T) {
	ts := newTestServer(t, Options{})
	v := schemaValidator(t, personSchema)
	format := openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Strict: openai.Bool(true), Schema: schemaMap(t, personSchema)}}}
	moods := map[string]bool{}
	for seed := int64(1); seed <= 6; seed++ {
		p := userChat(40+20*seed, func(p *openai.ChatCompletionNewParams) {
			p.Temperature = openai.Float(1)
			p.Seed = openai.Int(seed)
			p.ResponseFormat = format
			if seed == 6 {
				p.MaxTokens = param.Opt[int64]{} // omitted: until the context is full
			}
		})
		var text, finish string
		if seed%2 == 0 {
			s := ts.client.Chat.Completions.NewStreaming(context.Background(), p)
			for s.Next() {
				for _, c := range s.Current().Choices {
					text += c.Delta.Content
					if c.FinishReason != "" {
						finish = c.FinishReason
					}
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			got, err := ts.client.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			text, finish = got.Choices[0].Message.Content, got.Choices[0].FinishReason
		}
		if err := validates(v, text); err != nil {
			t.Fatalf("seed %d: reply %q (%s) does not validate: %v", seed, text, finish, err)
		}
		var person struct {
			Age  json.Number `json:"age"`
			Mood string      `json:"mood"`
		}
		if err := json.Unmarshal([]byte(text), &person); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(person.Age.String(), ".eE") {
			t.Fatalf("seed %d: age %s is not written as an integer", seed, person.Age)
		}
		moods[person.Mood] = true
		t.Logf("seed %d: %s (%s)", seed, text, finish)
	}
	if len(moods) < 2 {
		t.Fatalf("six sampled replies all chose the mood %v: the enum is not sampled", moods)
	}
}

// TestJSONSchemaRefused: schemas outside the supported subset, or not
// schemas at all, get a 400 naming the problem.
func TestJSONSchemaRefused(t *testing.T) {
	ts := newTestServer(t, Options{})
	cases := map[string]string{
		`{"type": "string", "pattern": "^a+$"}`:                                         "pattern",
		`{"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}`: "multipleOf",
		`{"type": "strung"}`:                    "strung",
		`{"type": "object", "required": ["x"]}`: `"x" is not in properties`,
		`{"$ref": "#/$defs/nowhere"}`:           "not defined",
		`"object"`:                              "a schema is an object",
	}
	for schema, says := range cases {
		body := `{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": ` + schema + `}}}`
		status, msg, _ := post(t, ts, "/v1/chat/completions", body, nil)
		if status != 400 || !strings.Contains(msg, says) || !strings.Contains(msg, "response_format") {
			t.Errorf("schema %s: status %d %q, want 400 saying %q", schema, status, msg, says)
		}
	}
	body := `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "format": "email", "pattern": "@"}}}}}], "tool_choice": "required"}`
	if status, msg, _ := post(t, ts, "/v1/chat/completions", body, nil); status != 400 || !strings.Contains(msg, "pattern") {
		t.Errorf("forced call of a tool with a pattern: status %d %q", status, msg)
	}
	body = `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}`
	if status, msg, _ := post(t, ts, "/v1/chat/completions", body, nil); status != 400 || !strings.Contains(msg, `"g"`) {
		t.Errorf("tool_choice of an unknown function: status %d %q", status, msg)
	}
}

var weatherParams = `{"type": "object", "properties": {
	"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
	"required": ["city", "unit"], "additionalProperties": false}`

var addParams = `{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}`

func toolParams(t *testing.T) []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("the weather in a city"),
			Parameters: schemaMap(t, weatherParams)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "add", Description: openai.String("adds two integers"),
			Parameters: schemaMap(t, addParams)}),
	}
}

// TestToolCallRoundTrip: with tool_choice "required" (or a named
// function) the story model, which knows nothing of tools, is kept to a
// call in the template's format; the server parses it into tool_calls
// whose arguments validate under the tool's parameters. The call and the
// tool's result then go back as an assistant message and a "tool"
// message, and the model answers in text.
func TestToolCallRoundTrip(t *testing.T) {
	ts := newTestServer(t, Options{})
	params := map[string]*jsonschema.Schema{"get_weather": schemaValidator(t, weatherParams), "add": schemaValidator(t, addParams)}
	var first *openai.ChatCompletion
	for seed := int64(1); seed <= 4; seed++ {
		got, err := ts.client.Chat.Completions.New(context.Background(), userChat(120, func(p *openai.ChatCompletionNewParams) {
			p.Temperature = openai.Float(1)
			p.Seed = openai.Int(seed)
			p.Tools = toolParams(t)
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		}))
		if err != nil {
			t.Fatal(err)
		}
		c := got.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
			t.Fatalf("seed %d: finish %q, %d tool calls, content %q", seed, c.FinishReason, len(c.Message.ToolCalls), c.Message.Content)
		}
		call := c.Message.ToolCalls[0]
		v := params[call.Function.Name]
		if v == nil || call.ID == "" || call.Type != "function" {
			t.Fatalf("seed %d: call %+v", seed, call)
		}
		if err := validates(v, call.Function.Arguments); err != nil {
			t.Fatalf("seed %d: arguments %s of %s: %v", seed, call.Function.Arguments, call.Function.Name, err)
		}
		if first == nil {
			first = got
		}
		t.Logf("seed %d: %s(%s)", seed, call.Function.Name, call.Function.Arguments)
	}

	// a named function, streamed: the call comes as a tool_calls delta
	s := ts.client.Chat.Completions.NewStreaming(context.Background(), userChat(120, func(p *openai.ChatCompletionNewParams) {
		p.Temperature = openai.Float(1)
		p.Seed = openai.Int(9)
		p.Tools = toolParams(t)
		p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "add"})
	}))
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("streamed named call: %+v", acc.Choices)
	}
	call := acc.Choices[0].Message.ToolCalls[0]
	if call.Function.Name != "add" || validates(params["add"], call.Function.Arguments) != nil {
		t.Fatalf("streamed named call %s(%s)", call.Function.Name, call.Function.Arguments)
	}

	// the round trip: the call and its result go back, the answer is text
	callMsg := first.Choices[0].Message
	var result string
	if callMsg.ToolCalls[0].Function.Name == "add" {
		result = `{"sum": 5}`
	} else {
		result = `{"temperature": 21, "sky": "clear"}`
	}
	p := userChat(24, func(p *openai.ChatCompletionNewParams) { p.Tools = toolParams(t) })
	p.Messages = append(p.Messages, callMsg.ToParam(), openai.ToolMessage(result, callMsg.ToolCalls[0].ID))
	after, err := ts.client.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	c := after.Choices[0]
	if len(c.Message.ToolCalls) != 0 || c.Message.Content == "" || (c.FinishReason != "stop" && c.FinishReason != "length") {
		t.Fatalf("answer after the tool result: finish %q, content %q, calls %d", c.FinishReason, c.Message.Content, len(c.Message.ToolCalls))
	}
	// the prompt grew by the call and the result (rendered, not dropped)
	callTokens, err := ts.m.Encode(renderToolCalls([]toolCall{{Function: struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}{callMsg.ToolCalls[0].Function.Name, callMsg.ToolCalls[0].Function.Arguments}}})+result, true)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.Usage.PromptTokens - first.Usage.PromptTokens; grew < int64(len(callTokens)) {
		t.Fatalf("the prompt grew by %d tokens; the call and the result alone are %d", grew, len(callTokens))
	}
	t.Logf("answer: %q (%s)", c.Message.Content, c.FinishReason)
}

// llama3Tools is a short template in the manner of Llama 3's, which
// speaks of <|python_tag|> (and not of <tool_call>) when there are tools.
const llama3Tools = `{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}` +
	`{% if tools %}<|python_tag|>{% endif %}{% if add_generation_prompt %}<|assistant|>{% endif %}`

// mistralTools is a short template in the manner of Mistral's, which
// writes an assistant's calls after [TOOL_CALLS].
const mistralTools = `{% for m in messages %}[INST]{{ m.content }}[/INST]{% if m.tool_calls %}[TOOL_CALLS]{{ m.tool_calls | tojson }}{% endif %}{% endfor %}`

// TestForcedCallFormat: a forced call takes the format of the model's
// template: the <tool_call> block for ChatML (Hermes, Qwen), the bare
// object for a Llama 3 template, a [TOOL_CALLS] list for Mistral's; the
// other format is refused.
func TestForcedCallFormat(t *testing.T) {
	hermes := "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>"
	bare := `{"name": "add", "parameters": {"b": 3, "a": 40}}`
	add := tool{Type: "function", Function: toolFunction{Name: "add", Parameters: json.RawMessage(addParams)}}
	for _, c := range []struct {
		template  string
		want, not string
	}{{chatML, hermes, bare}, {llama3Tools, bare, hermes}, {mistralTools, `[TOOL_CALLS][{"name": "add", "arguments": {"a": 5, "b": 6}}]`, hermes}} {
		m := openStories(t)
		if err := m.SetChatTemplate("t", c.template); err != nil {
			t.Fatal(err)
		}
		s := &Server{m: m}
		for text, ok := range map[string]bool{c.want: true, c.not: false} {
			r, e := s.callFormat(0, add)
			if e != nil {
				t.Fatal(e.Message)
			}
			if got := r.Feed([]byte(text)) && r.Done(); got != ok {
				t.Errorf("template %.20q: %q accepted %v, want %v", c.template, text, got, ok)
			}
		}
	}
	// through the client: the Llama 3 format is parsed into tool_calls
	m := openStories(t)
	if err := m.SetChatTemplate("llama3", llama3Tools); err != nil {
		t.Fatal(err)
	}
	ts := newTestServerFor(t, m, Options{})
	got, err := ts.client.Chat.Completions.New(context.Background(), userChat(100, func(p *openai.ChatCompletionNewParams) {
		p.Temperature = openai.Float(1)
		p.Seed = openai.Int(3)
		p.Tools = toolParams(t)
		p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
	}))
	if err != nil {
		var ae *openai.Error
		errors.As(err, &ae)
		t.Fatalf("%v: %s", err, ae.RawJSON())
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("finish %q, content %q, calls %+v", c.FinishReason, c.Message.Content, c.Message.ToolCalls)
	}
	if err := validates(schemaValidator(t, weatherParams), c.Message.ToolCalls[0].Function.Arguments); err != nil {
		t.Fatalf("arguments %s: %v", c.Message.ToolCalls[0].Function.Arguments, err)
	}
}
