package serve

import (
	"testing"

	"github.com/aotlm/aotlm"
)

// FuzzDecodeRequest feeds arbitrary bytes to the request decoders and the
// field checks: they never panic, and every refusal is a 4xx with a
// message.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stop": ["a", "b"], "temperature": 0.5}`,
		`{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stream": true, "stream_options": {"include_usage": true}}`,
		`{"messages": [], "stop": "x", "seed": -1, "top_k": 3, "min_p": 0.1, "n": 1, "logprobs": true, "top_logprobs": 2}`,
		`{"prompt": [1, 2, 3], "max_tokens": 1e9}`,
		`{"prompt": ["a"], "logprobs": 3, "presence_penalty": 2, "frequency_penalty": -2}`,
		`{"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}, "tools": [{"type": "function", "function": {"name": "f"}}]}`,
		`{"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"a": {"enum": [1, "x"]}, "b": {"$ref": "#"}}, "required": ["a"]}}}}`,
		`{"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}], "tool_choice": "required"}`,
		`{"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "f"}}}`,
		`null`, `[]`, `{"messages": null}`, `{"max_tokens": "5"}`,
		`{"max_tokens": 5, "system": [{"type": "text", "text": "s"}], "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "eA=="}}, {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r"}]}]}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}], "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "f"}, "thinking": {"type": "enabled", "budget_tokens": 10}}`,
		`{"input": [{"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "data:,"}]}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c", "output": "o"}, {"type": "reasoning", "summary": [{"type": "summary_text", "text": "r"}]}], "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "f"}, "text": {"format": {"type": "json_schema", "name": "n", "schema": {}}}, "reasoning": {"effort": "low"}}`,
		`{"model": "m:latest", "messages": [{"role": "user", "content": "c", "images": ["eA=="], "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}], "format": {"type": "object"}, "think": "high", "keep_alive": "5m", "options": {"num_predict": -1, "stop": ["x"]}, "prompt": "p", "raw": true}`,
		`{"format": "json", "think": 3, "options": {"temperature": "hot"}}`,
		`{"speculative": {"type": "draft", "n_max": 4, "n_min": 1, "p_min": 0.5}, "speculative.n_max": 65, "speculative.type": "x"}`,
	} {
		f.Add([]byte(s))
	}
	temp := float32(0.7)
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(e *apiError) {
			if e != nil && (e.Status < 400 || e.Status >= 500 || e.Message == "") {
				t.Fatalf("refusal %+v is not a 4xx with a message", e)
			}
		}
		var c chatRequest
		e := decodeJSON(data, &c)
		check(e)
		if e == nil {
			_, _, _, e = c.params(aotlm.GenerationDefaults{}, 256)
			check(e)
			_, _, e = c.specKey(specKey{typ: SpecLookup})
			check(e)
			if c.ResponseFormat != nil {
				var s Server
				_, e = s.responseFormat(c.ResponseFormat)
				check(e)
			}
			if len(c.Tools) > 0 {
				var s Server
				_, _, e = s.toolSetup(c.Tools, c.ToolChoice)
				check(e)
			}
		}
		var m messagesRequest
		e = decodeJSON(data, &m)
		check(e)
		if e == nil {
			_, e = m.chatRequest()
			check(e)
		}
		var r responsesRequest
		e = decodeJSON(data, &r)
		check(e)
		if e == nil {
			var s Server
			_, _, e = s.responsesChat(&r)
			check(e)
		}
		var o ollamaChatRequest
		e = decodeJSON(data, &o)
		check(e)
		if e == nil {
			_, e = o.chatRequest()
			check(e)
		}
		var p completionRequest
		e = decodeJSON(data, &p)
		check(e)
		if e == nil {
			_, _, _, e = p.params(aotlm.GenerationDefaults{Temperature: &temp}, 256)
			check(e)
		}
	})
}
