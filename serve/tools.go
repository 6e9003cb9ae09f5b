package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/constrain"
)

// toolParser finds the tool calls in a reply. It reads the formats chat
// templates teach their models (toolFormat): Hermes and Qwen wrap each
// call in <tool_call>{"name": ..., "arguments": {...}}</tool_call>;
// Llama 3 answers with a bare {"name": ..., "parameters": {...}} object,
// after <|python_tag|> or not; Qwen3-Coder, GLM-4.5, Mistral, Gemma and
// gpt-oss have their own markup (toolformats.go).
type toolParser struct {
	names map[string]bool
	// format is the chat template's (toolFormatOf).
	format toolFormat
	// types holds, by tool and argument, the type its parameters schema
	// gives ("string", ...), for formats that write arguments as text.
	types map[string]map[string]string
	// force, for tool_choice "required" or a named function, keeps the
	// reply to one call (of the named function or of any tool) in the
	// format of the model's template, its arguments under the tool's
	// parameters schema: the reply then goes through parse like any
	// other.
	force constrain.Recognizer
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	pythonTag   = "<|python_tag|>"
)

// toolSetup checks tools and tool_choice; it returns the parser and the
// tools as the template sees them, or no parser for tool_choice "none".
func (s *Server) toolSetup(tools []tool, choice json.RawMessage) (*toolParser, []any, *apiError) {
	mode, named := "auto", ""
	if c := bytes.TrimSpace(choice); len(c) > 0 && string(c) != "null" {
		var str string
		var obj struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(c, &str) == nil:
			if str != "none" && str != "auto" && str != "required" {
				return nil, nil, badRequest("tool_choice", "tool_choice %q: want none, auto, required or a function", str)
			}
			mode = str
		case json.Unmarshal(c, &obj) == nil && obj.Type == "function" && obj.Function.Name != "":
			mode, named = "function", obj.Function.Name
		default:
			return nil, nil, badRequest("tool_choice", "tool_choice: want none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}")
		}
	}
	p := &toolParser{names: map[string]bool{}, types: map[string]map[string]string{}}
	if s.m != nil {
		p.format = toolFormatOf(s.m.ChatTemplateSource())
	}
	var vars []any
	for i, t := range tools {
		if t.Type != "function" {
			return nil, nil, badRequest("tools", "tool %d has type %q: only function tools are supported", i, t.Type)
		}
		if t.Function.Name == "" {
			return nil, nil, badRequest("tools", "tool %d has no function name", i)
		}
		if len(t.Function.Parameters) > 0 {
			var v any
			if json.Unmarshal(t.Function.Parameters, &v) != nil {
				return nil, nil, badRequest("tools", "tool %d: parameters is not valid JSON", i)
			}
			if _, ok := v.(map[string]any); !ok && v != nil {
				return nil, nil, badRequest("tools", "tool %d: parameters must be a JSON schema object", i)
			}
		}
		p.names[t.Function.Name] = true
		p.types[t.Function.Name] = argTypes(t.Function.Parameters)
		b, _ := json.Marshal(t)
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		dec.Decode(&v)
		vars = append(vars, v)
	}
	switch mode {
	case "none":
		return nil, nil, nil
	case "function":
		if !p.names[named] {
			return nil, nil, badRequest("tool_choice", "tool_choice names the function %q, which is not in tools", named)
		}
	}
	if mode == "required" || mode == "function" {
		var alts []constrain.Recognizer
		for i, t := range tools {
			if mode == "function" && t.Function.Name != named {
				continue
			}
			r, e := s.callFormat(i, t)
			if e != nil {
				return nil, nil, e
			}
			alts = append(alts, r)
		}
		p.force = alts[0]
		if len(alts) > 1 {
			p.force = constrain.Choice(alts...)
		}
	}
	return p, vars, nil
}

// callFormat is the recognizer of one call of tool t (the i-th), in the
// format the model's template teaches (toolFormatOf): Llama 3's bare
// {"name": ..., "parameters": ...}, Mistral's [TOOL_CALLS][{...}],
// gpt-oss's commentary message to=functions.NAME, the Qwen3-Coder, GLM-4.5
// and Gemma markup with text arguments (textCallGrammar), and the Hermes
// and Qwen <tool_call> block for the others.
func (s *Server) callFormat(i int, t tool) (constrain.Recognizer, *apiError) {
	params := bytes.TrimSpace(t.Function.Parameters)
	if len(params) == 0 || string(params) == "null" {
		params = []byte(`{"type":"object"}`)
	}
	var schema *constrain.Schema
	if e := s.work(fmt.Sprintf("compiling the parameters of tool %d", i), func() *apiError {
		s.warmVocab()
		var err error
		if schema, err = constrain.CompileSchema(params); err != nil {
			return badRequest("tools", "tool %d (%s): parameters %v", i, t.Function.Name, err)
		}
		return nil
	}); e != nil {
		return nil, e
	}
	name, _ := json.Marshal(t.Function.Name)
	args := constrain.NewSchemaJSON(schema)
	src := ""
	if s.m != nil {
		src = s.m.ChatTemplateSource()
	}
	switch f := toolFormatOf(src); f {
	case formatLlama3:
		return constrain.Sequence(`{"name": `+string(name)+`, "parameters": `, args, "}"), nil
	case formatMistral:
		before, after := mistralForced(src, name)
		return constrain.Sequence(before, args, after), nil
	case formatHarmony:
		// the prompt ends with the assistant's <|start|>: the call is a
		// commentary message addressed to the function
		return constrain.Sequence(harmonyChannel+"commentary "+harmonyFunction+t.Function.Name+" <|constrain|>json"+harmonyMessage, args, ""), nil
	case formatQwenXML, formatGLM, formatGemma:
		quote := gemmaQuote
		if strings.Contains(src, fgemmaOpen) {
			quote = fgemmaQuote
		}
		var g *constrain.Grammar
		e := s.work(fmt.Sprintf("writing the call grammar of tool %d", i), func() *apiError {
			src, err := textCallGrammar(f, t.Function.Name, params, quote)
			if err == nil {
				g, err = constrain.ParseGBNF(src)
			}
			if err != nil {
				return badRequest("tools", "tool %d (%s): parameters cannot be written as %s arguments: %v", i, t.Function.Name, f, err)
			}
			return nil
		})
		if e != nil {
			return nil, e
		}
		return constrain.NewGrammarRecognizer(g), nil
	}
	return constrain.Sequence(hermesOpen+"\n"+`{"name": `+string(name)+`, "arguments": `, args, "}\n"+hermesClose), nil
}

// mistralForced returns the text around the arguments of a call of the
// function name (JSON) as a Mistral template writes it: NAME[ARGS]{…}
// after [TOOL_CALLS], with [CALL_ID] and a new id before [ARGS] when the
// template writes ids so (Mistral Small 3.2), else the older
// [TOOL_CALLS][{"name": …, "arguments": {…}}] list.
func mistralForced(src string, name []byte) (before, after string) {
	var fn string
	if !strings.Contains(src, mistralArgs) || json.Unmarshal(name, &fn) != nil {
		return mistralCalls + `[{"name": ` + string(name) + `, "arguments": `, "}]"
	}
	if strings.Contains(src, mistralCallID) {
		return mistralCalls + fn + mistralCallID + mistralID("") + mistralArgs, ""
	}
	return mistralCalls + fn + mistralArgs, ""
}

// maybeCall reports whether text, the start of a reply, may be a tool
// call (so streaming holds it back).
func (p *toolParser) maybeCall(text string) bool {
	t := strings.TrimLeft(text, " \t\r\n")
	marks := callOpens
	if p.bareJSON() {
		marks = append([]string{pythonTag, "{"}, marks...)
	}
	// a call's recipient may follow a gpt-oss generation prompt's header,
	// and any reply holding harmony's marks is read as gpt-oss's
	marks = append([]string{harmonyRecipient}, marks...)
	for _, mark := range marks {
		if strings.HasPrefix(t, mark) || strings.HasPrefix(mark, t) {
			return true
		}
	}
	return false
}

// parse splits a reply into its text and its tool calls. A reply with
// no call is returned as it is, except a gpt-oss reply, whose text is
// its answer's.
func (p *toolParser) parse(text string) (string, []toolCall) {
	rest, calls, ok := p.marked(text)
	if !ok {
		return text, nil
	}
	if len(calls) > 0 {
		return strings.TrimSpace(rest), calls
	}
	if rest != text {
		return strings.TrimSpace(rest), nil
	}
	if !p.bareJSON() {
		return text, nil
	}
	bare := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), pythonTag))
	if strings.HasPrefix(bare, "{") {
		if c, ok := p.call(bare); ok {
			return "", []toolCall{c}
		}
	}
	return text, nil
}

// argTypes returns the type of each property of a parameters schema
// (the first of a list of types), "" where it names none.
func argTypes(params json.RawMessage) map[string]string {
	var schema struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(params, &schema) != nil {
		return nil
	}
	types := map[string]string{}
	for k, v := range schema.Properties {
		var one string
		var list []string
		switch {
		case json.Unmarshal(v.Type, &one) == nil:
			types[k] = one
		case json.Unmarshal(v.Type, &list) == nil && len(list) > 0:
			types[k] = list[0]
		}
	}
	return types
}

// call reads one {"name", "arguments"|"parameters"} object naming a
// known tool.
func (p *toolParser) call(s string) (toolCall, bool) {
	var obj struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(s)), &obj) != nil || !p.names[obj.Name] {
		return toolCall{}, false
	}
	args := obj.Arguments
	if len(args) == 0 {
		args = obj.Parameters
	}
	var c toolCall
	c.ID, c.Type = newID("call_"), "function"
	c.Function.Name = obj.Name
	switch {
	case len(args) == 0:
		c.Function.Arguments = "{}"
	case args[0] == '"': // arguments already encoded as a string
		var str string
		json.Unmarshal(args, &str)
		c.Function.Arguments = str
	default:
		var buf bytes.Buffer
		if json.Compact(&buf, args) != nil {
			return toolCall{}, false
		}
		c.Function.Arguments = buf.String()
	}
	return c, true
}

// templateCalls turns an assistant's earlier tool calls into the
// message's calls, which the template writes as message.tool_calls.
func templateCalls(calls []toolCall) []aotlm.ToolCall {
	out := make([]aotlm.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = aotlm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	return out
}

// renderToolCalls writes an assistant's earlier tool calls into its text
// in the Hermes form, for templates that read only the content.
func renderToolCalls(calls []toolCall) string {
	var b strings.Builder
	for _, c := range calls {
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(c.Function.Arguments)
		}
		obj, _ := json.Marshal(struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{c.Function.Name, args})
		b.WriteString("\n" + hermesOpen + "\n" + string(obj) + "\n" + hermesClose)
	}
	return b.String()
}
