package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strings"
)

// toolFormat is a tool-call format a chat template teaches its model.
type toolFormat string

// The formats read. Every marked format (all but Llama 3's bare object)
// is read whatever the template, since its markup cannot be plain text;
// the template's format decides whether a bare JSON object may be a call.
const (
	// formatAny: the template names no format (or there is none).
	formatAny toolFormat = ""
	// formatHermes: <tool_call>{"name": …, "arguments": {…}}</tool_call>
	// (Hermes, Qwen 2.5 and 3).
	formatHermes toolFormat = "hermes"
	// formatLlama3: a bare {"name": …, "parameters": {…}}, after
	// <|python_tag|> or not (Llama 3.1 to 3.3).
	formatLlama3 toolFormat = "llama3"
	// formatQwenXML: <tool_call><function=NAME><parameter=KEY>VALUE
	// </parameter>…</function></tool_call> (Qwen3-Coder).
	formatQwenXML toolFormat = "qwen3-coder"
	// formatGLM: <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE
	// </arg_value>…</tool_call> (GLM-4.5 and 4.6).
	formatGLM toolFormat = "glm4.5"
	// formatMistral: [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
	// (Mistral v3 to v7 tokenizers) or [TOOL_CALLS]NAME[ARGS]{…}, with an
	// optional [CALL_ID]ID before [ARGS] (later Mistral models).
	formatMistral toolFormat = "mistral"
	// formatGemma: <|tool_call>call:NAME{key:value,…}<tool_call|>, strings
	// between <|"|> marks (Gemma 4), or FunctionGemma's
	// <start_function_call>call:NAME{…}<end_function_call> with <escape>
	// marks.
	formatGemma toolFormat = "gemma"
	// formatHarmony: gpt-oss's messages, a call being one addressed
	// to=functions.NAME whose body is the JSON arguments, ended by
	// <|call|>; the answer is the final channel's text.
	formatHarmony toolFormat = "harmony"
)

// toolFormatOf derives the format from a chat template's source, by the
// markup it writes for an assistant's calls.
func toolFormatOf(src string) toolFormat {
	has := func(s string) bool { return strings.Contains(src, s) }
	switch {
	case has(harmonyChannel):
		return formatHarmony
	case has(mistralCalls):
		return formatMistral
	case has(gemmaOpen), has(fgemmaOpen):
		return formatGemma
	case has("<arg_key>"):
		return formatGLM
	case has(xmlFunction), has("<parameter="):
		return formatQwenXML
	case has(hermesOpen):
		return formatHermes
	case has(pythonTag), has(`"parameters": `):
		// Llama 3.2 asks for {"name": function name, "parameters": …}
		return formatLlama3
	}
	return formatAny
}

const (
	xmlFunction     = "<function="
	xmlFunctionEnd  = "</function>"
	mistralCalls    = "[TOOL_CALLS]"
	mistralArgs     = "[ARGS]"
	mistralCallID   = "[CALL_ID]"
	gemmaOpen       = "<|tool_call>"
	gemmaClose      = "<tool_call|>"
	gemmaQuote      = `<|"|>`
	fgemmaOpen      = "<start_function_call>"
	fgemmaClose     = "<end_function_call>"
	fgemmaQuote     = "<escape>"
	harmonyChannel  = "<|channel|>"
	harmonyStart    = "<|start|>"
	harmonyMessage  = "<|message|>"
	harmonyFunction = "to=functions."
)

// callOpens are the marks that open a call (or, for gpt-oss, a message
// that may be one): streamed text stops at the first of them.
var callOpens = []string{hermesOpen, xmlFunction, mistralCalls, gemmaOpen, fgemmaOpen, harmonyChannel, harmonyStart, harmonyMessage}

// firstOpen returns where the first call mark of s starts and which it
// is, or -1.
func firstOpen(s string) (int, string) {
	at, mark := -1, ""
	for _, m := range callOpens {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at, mark = i, m
		}
	}
	return at, mark
}

// partialOpen is the length of the longest end of s that begins a call
// mark (held back until the next text says whether it is one).
func partialOpen(s string) int {
	n := 0
	for _, m := range callOpens {
		n = max(n, partialSuffix(s, m))
	}
	return n
}

// bareJSON reports whether a bare JSON object may be a call: under
// Llama 3's format, Hermes' (whose models answer so too) and a template
// that names none.
func (p *toolParser) bareJSON() bool {
	return p.format == formatAny || p.format == formatHermes || p.format == formatLlama3
}

// marked reads the calls of text in the marked formats: the text outside
// them and the calls, ok false when a mark opens something that is no
// call of a known tool (the reply is then text).
func (p *toolParser) marked(text string) (rest string, calls []toolCall, ok bool) {
	if strings.Contains(text, harmonyMessage) {
		return p.harmony(text)
	}
	var out strings.Builder
	t := text
	for {
		i, mark := firstOpen(t)
		if i < 0 {
			out.WriteString(t)
			break
		}
		out.WriteString(t[:i])
		body := t[i+len(mark):]
		var cs []toolCall
		var after string
		switch mark {
		case hermesOpen:
			var inner string
			inner, after = cut(body, hermesClose)
			inner = strings.TrimSpace(inner)
			var c toolCall
			switch {
			case strings.HasPrefix(inner, "{"):
				c, ok = p.call(inner)
			case strings.HasPrefix(inner, xmlFunction):
				c, ok = p.xmlCall(strings.TrimPrefix(inner, xmlFunction))
			default:
				c, ok = p.glmCall(inner)
			}
			cs = []toolCall{c}
		case xmlFunction:
			var inner string
			inner, after = cut(body, xmlFunctionEnd)
			var c toolCall
			c, ok = p.xmlCall(inner)
			cs = []toolCall{c}
		case mistralCalls:
			cs, after, ok = p.mistral(body)
		case gemmaOpen, fgemmaOpen:
			closeMark, quote := gemmaClose, gemmaQuote
			if mark == fgemmaOpen {
				closeMark, quote = fgemmaClose, fgemmaQuote
			}
			var inner string
			inner, after = cut(body, closeMark)
			var c toolCall
			c, ok = p.gemmaCall(inner, quote)
			cs = []toolCall{c}
		default: // a gpt-oss mark without a message: no call
			ok = false
		}
		if !ok {
			return text, nil, false
		}
		calls = append(calls, cs...)
		t = after
	}
	return out.String(), calls, true
}

// cut splits s at the first close mark: before it, and after it (the
// end when there is none, as in a reply cut short or ended by a stop
// token).
func cut(s, close string) (string, string) {
	if i := strings.Index(s, close); i >= 0 {
		return s[:i], s[i+len(close):]
	}
	return s, ""
}

// newCall makes a call of a known tool with JSON arguments.
func (p *toolParser) newCall(name string, args []byte) (toolCall, bool) {
	name = strings.TrimSpace(name)
	if !p.names[name] {
		return toolCall{}, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, args) != nil {
		return toolCall{}, false
	}
	var c toolCall
	c.ID, c.Type = newID("call_"), "function"
	c.Function.Name = name
	c.Function.Arguments = buf.String()
	return c, true
}

// argValue is the JSON of an argument written as text (GLM, Qwen3-Coder:
// strings as they are, other values as JSON): a string when the tool's
// schema says so or when the text is no JSON value, else the value.
func (p *toolParser) argValue(tool, key, raw string) json.RawMessage {
	if p.types[tool][key] != "string" {
		if v := strings.TrimSpace(raw); v != "" && json.Valid([]byte(v)) {
			return json.RawMessage(v)
		}
	}
	b, _ := json.Marshal(raw)
	return b
}

// object writes key/value pairs as a JSON object.
func object(keys []string, vals []json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vals[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// xmlCall reads Qwen3-Coder's NAME><parameter=KEY>VALUE</parameter>…
// (what follows <function=).
func (p *toolParser) xmlCall(s string) (toolCall, bool) {
	end := strings.IndexByte(s, '>')
	if end < 0 {
		return toolCall{}, false
	}
	name := strings.TrimSpace(s[:end])
	s, _ = cut(s[end+1:], xmlFunctionEnd)
	var keys []string
	var vals []json.RawMessage
	for {
		i := strings.Index(s, "<parameter=")
		if i < 0 {
			if strings.TrimSpace(s) != "" {
				return toolCall{}, false
			}
			break
		}
		if strings.TrimSpace(s[:i]) != "" {
			return toolCall{}, false
		}
		s = s[i+len("<parameter="):]
		j := strings.IndexByte(s, '>')
		if j < 0 {
			return toolCall{}, false
		}
		key := strings.TrimSpace(s[:j])
		var val string
		val, s = cut(s[j+1:], "</parameter>")
		val = strings.TrimSuffix(strings.TrimPrefix(val, "\n"), "\n")
		keys, vals = append(keys, key), append(vals, p.argValue(name, key, val))
	}
	return p.newCall(name, object(keys, vals))
}

// glmCall reads GLM-4.5's NAME<arg_key>KEY</arg_key><arg_value>VALUE
// </arg_value>… (what <tool_call> holds).
func (p *toolParser) glmCall(s string) (toolCall, bool) {
	i := strings.Index(s, "<arg_key>")
	if i < 0 {
		i = len(s)
	}
	name := strings.TrimSpace(s[:i])
	if strings.ContainsAny(name, "\n{<") {
		return toolCall{}, false
	}
	s = s[i:]
	var keys []string
	var vals []json.RawMessage
	for strings.TrimSpace(s) != "" {
		s = strings.TrimSpace(s)
		rest, ok := strings.CutPrefix(s, "<arg_key>")
		if !ok {
			return toolCall{}, false
		}
		key, rest, ok := strings.Cut(rest, "</arg_key>")
		if !ok {
			return toolCall{}, false
		}
		rest, ok = strings.CutPrefix(strings.TrimSpace(rest), "<arg_value>")
		if !ok {
			return toolCall{}, false
		}
		var val string
		val, s = cut(rest, "</arg_value>")
		key = strings.TrimSpace(key)
		keys, vals = append(keys, key), append(vals, p.argValue(name, key, val))
	}
	return p.newCall(name, object(keys, vals))
}

// mistral reads what follows [TOOL_CALLS]: a JSON array of calls, or
// NAME[ARGS]{…} (NAME[CALL_ID]ID[ARGS]{…}); what follows the calls is
// returned as after.
func (p *toolParser) mistral(s string) (calls []toolCall, after string, ok bool) {
	t := strings.TrimLeft(s, " \t\r\n")
	if strings.HasPrefix(t, "[") {
		dec := json.NewDecoder(strings.NewReader(t))
		var list []json.RawMessage
		if dec.Decode(&list) != nil || len(list) == 0 {
			return nil, "", false
		}
		for _, raw := range list {
			c, ok := p.call(string(raw))
			if !ok {
				return nil, "", false
			}
			var id struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(raw, &id) // p.call read it as an object
			c.ID = mistralID(id.ID)
			calls = append(calls, c)
		}
		return calls, t[dec.InputOffset():], true
	}
	head, args, found := strings.Cut(t, mistralArgs)
	if !found {
		return nil, "", false
	}
	name, id, _ := strings.Cut(head, mistralCallID)
	args = strings.TrimLeft(args, " \t\r\n")
	dec := json.NewDecoder(strings.NewReader(args))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return nil, "", false
	}
	c, ok := p.newCall(name, raw)
	if !ok {
		return nil, "", false
	}
	c.ID = mistralID(strings.TrimSpace(id))
	return []toolCall{c}, args[dec.InputOffset():], true
}

// mistralID is the id of a Mistral call: the model's own when it wrote
// one of nine letters and digits, else nine random ones. Mistral's
// templates refuse any other id when the conversation comes back with
// the call and its result.
func mistralID(given string) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	ok := len(given) == 9
	for i := 0; ok && i < len(given); i++ {
		ok = strings.IndexByte(alnum, given[i]) >= 0
	}
	if ok {
		return given
	}
	var b [9]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b[:])
}

// gemmaCall reads Gemma's call:NAME{key:value,…}, strings between quote
// marks, keys bare.
func (p *toolParser) gemmaCall(s, quote string) (toolCall, bool) {
	s = strings.TrimSpace(s)
	s, ok := strings.CutPrefix(s, "call:")
	if !ok {
		return toolCall{}, false
	}
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return toolCall{}, false
	}
	g := gemmaReader{s: s[i:], quote: quote}
	var b bytes.Buffer
	if !g.value(&b, 0) || strings.TrimSpace(g.s) != "" {
		return toolCall{}, false
	}
	return p.newCall(s[:i], b.Bytes())
}

// gemmaReader turns Gemma's argument syntax into JSON.
type gemmaReader struct {
	s, quote string
}

// maxGemmaDepth bounds the nesting of an argument value.
const maxGemmaDepth = 32

func (g *gemmaReader) skip() { g.s = strings.TrimLeft(g.s, " \t\r\n") }

// str reads a quoted string, or a bare word up to one of stops.
func (g *gemmaReader) str(stops string) (string, bool) {
	g.skip()
	if rest, ok := strings.CutPrefix(g.s, g.quote); ok {
		v, after, ok := strings.Cut(rest, g.quote)
		g.s = after
		return v, ok
	}
	i := strings.IndexAny(g.s, stops)
	if i <= 0 {
		return "", false
	}
	v := strings.TrimSpace(g.s[:i])
	g.s = g.s[i:]
	return v, true
}

func (g *gemmaReader) value(b *bytes.Buffer, depth int) bool {
	if depth > maxGemmaDepth {
		return false
	}
	g.skip()
	switch {
	case strings.HasPrefix(g.s, "{"), strings.HasPrefix(g.s, "["):
		obj := g.s[0] == '{'
		end := byte(']')
		if obj {
			end = '}'
		}
		b.WriteByte(g.s[0])
		g.s = g.s[1:]
		for n := 0; ; n++ {
			g.skip()
			if strings.HasPrefix(g.s, string(end)) {
				g.s = g.s[1:]
				b.WriteByte(end)
				return true
			}
			if n > 0 {
				if !strings.HasPrefix(g.s, ",") {
					return false
				}
				g.s = g.s[1:]
				b.WriteByte(',')
			}
			if obj {
				k, ok := g.str(":")
				if !ok || !strings.HasPrefix(g.s, ":") {
					return false
				}
				g.s = g.s[1:]
				kb, _ := json.Marshal(k)
				b.Write(kb)
				b.WriteByte(':')
			}
			if !g.value(b, depth+1) {
				return false
			}
		}
	case strings.HasPrefix(g.s, g.quote):
		v, ok := g.str("")
		if !ok {
			return false
		}
		vb, _ := json.Marshal(v)
		b.Write(vb)
		return true
	default:
		v, ok := g.str(",}]")
		if !ok {
			return false
		}
		switch {
		case v == "None": // a null as a Jinja template prints it
			b.WriteString("null")
		case json.Valid([]byte(v)):
			b.WriteString(v)
		default:
			vb, _ := json.Marshal(v)
			b.Write(vb)
		}
		return true
	}
}

// harmony reads gpt-oss's messages: the calls (messages addressed
// to=functions.NAME) and the answer (the final channel's text, and text
// before the first message); the analysis channel is dropped.
func (p *toolParser) harmony(text string) (rest string, calls []toolCall, ok bool) {
	var out strings.Builder
	t := text
	if i, _ := firstOpen(t); i > 0 && !harmonyHeaded(t[:i]) {
		out.WriteString(t[:i])
		t = t[i:]
	}
	for {
		i := strings.Index(t, harmonyMessage)
		if i < 0 {
			break
		}
		header := t[:i]
		body := t[i+len(harmonyMessage):]
		end := len(body)
		for _, m := range []string{"<|end|>", "<|call|>", "<|return|>", harmonyStart} {
			if j := strings.Index(body, m); j >= 0 && j < end {
				end = j
			}
		}
		t = body[end:]
		body = body[:end]
		if _, name, found := strings.Cut(header, harmonyFunction); found {
			if j := strings.IndexAny(name, " <"); j >= 0 {
				name = name[:j]
			}
			c, ok := p.newCall(name, []byte(strings.TrimSpace(body)))
			if !ok {
				return text, nil, false
			}
			calls = append(calls, c)
			continue
		}
		channel := ""
		if _, ch, found := strings.Cut(header, harmonyChannel); found {
			channel, _, _ = strings.Cut(ch, " ")
			channel, _, _ = strings.Cut(channel, "<")
		}
		if channel != "analysis" {
			out.WriteString(body)
		}
	}
	return out.String(), calls, true
}

// harmonyRecipient opens the recipient of a gpt-oss message in its
// header, " to=functions.NAME".
const harmonyRecipient = "to="

// harmonyHeaded reports whether a gpt-oss reply's text before its first
// mark is the rest of the header the generation prompt opened
// ("<|start|>assistant"): a recipient, " to=functions.NAME", written
// before the channel.
func harmonyHeaded(s string) bool {
	return strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), harmonyRecipient)
}

// harmonyAnalysis returns the text of gpt-oss's analysis messages in a
// reply, trimmed; "" when it has none.
func harmonyAnalysis(text string) string {
	var out strings.Builder
	for {
		i := strings.Index(text, harmonyMessage)
		if i < 0 {
			break
		}
		header, body := text[:i], text[i+len(harmonyMessage):]
		end := len(body)
		for _, m := range []string{"<|end|>", "<|call|>", "<|return|>", harmonyStart} {
			if j := strings.Index(body, m); j >= 0 && j < end {
				end = j
			}
		}
		text = body[end:]
		if _, ch, found := strings.Cut(header, harmonyChannel); found && strings.HasPrefix(ch, "analysis") && !strings.Contains(header, harmonyFunction) {
			if out.Len() > 0 {
				out.WriteString("\n")
			}
			out.WriteString(strings.TrimSpace(body[:end]))
		}
	}
	return out.String()
}
