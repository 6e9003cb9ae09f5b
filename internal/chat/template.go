package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// DefaultName names a template parsed without a name.
const DefaultName = "chat_template"

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // "system", "user", "assistant", "tool", ...
	Content string `json:"content"`
	// ReasoningContent is an assistant turn's thinking text. It reaches the
	// template as message.reasoning_content (and message.thinking, which
	// gpt-oss's and LFM2's templates read) only when non-empty, so
	// templates that test `is defined` see the same thing as with Hugging
	// Face.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the calls an assistant turn made. Templates see them as
	// message.tool_calls, each in the OpenAI shape {"id", "type":
	// "function", "function": {"name", "arguments"}}, only when there are
	// some.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, in a tool turn, the id of the call it answers;
	// templates see it as message.tool_call_id when it is not empty.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is, in a tool turn, the name of the function that answered
	// (a participant's name in other turns); templates see it as
	// message.name when it is not empty. A tool turn without one takes
	// the name of the earlier call its ToolCallID names.
	Name string `json:"name,omitempty"`
}

// ToolCall is one function call of an assistant turn.
type ToolCall struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is the call's arguments as JSON text. Templates get the
	// decoded value (an object's keys in their order), so that tojson
	// prints it as Hugging Face does; text that is not JSON reaches them as
	// a string, and "" as an empty object.
	Arguments string `json:"arguments"`
}

// Options are the variables a render passes to the template besides the
// messages.
type Options struct {
	// AddGenerationPrompt appends the header that opens the assistant's turn.
	AddGenerationPrompt bool
	// BOSToken and EOSToken are exposed as bos_token and eos_token; an empty
	// one is left undefined, as Hugging Face does for a missing token.
	BOSToken, EOSToken string
	// Now is the time strftime_now reports; zero means the current time.
	// Set it for reproducible output (Llama 3.x prints today's date).
	Now time.Time
	// Vars are extra template variables, e.g. "enable_thinking": false,
	// "date_string": "26 Jul 2024", "reasoning_effort": "low". They cannot
	// replace messages, add_generation_prompt, bos_token, eos_token,
	// raise_exception or strftime_now.
	Vars map[string]any
}

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	name string
	src  string
	tpl  *exec.Template
}

// Parse parses a Jinja chat template named DefaultName.
func Parse(src string) (*Template, error) {
	return ParseNamed(DefaultName, src)
}

// ParseNamed parses a Jinja chat template; name appears in errors.
func ParseNamed(name, src string) (t *Template, err error) {
	defer func() {
		// gonja is third-party code run on downloaded input: turn any
		// panic in it into an error.
		if r := recover(); r != nil {
			t, err = nil, &Error{Template: name, Msg: fmt.Sprintf("parse: template engine failed: %v", r)}
		}
	}()
	cfg := newConfig()
	if err := checkSource(src, cfg); err != nil {
		return nil, &Error{Template: name, Msg: err.Error(), Err: err}
	}
	orig := src
	src = rewriteConditionals(src, cfg)
	tpl, err := exec.NewTemplate(name, cfg, &sourceLoader{name: name, src: src}, environment())
	if err != nil {
		return nil, parseError(name, err)
	}
	guardTree(tpl.Root())
	return &Template{name: name, src: orig, tpl: tpl}, nil
}

// Source returns the template's Jinja source as given.
func (t *Template) Source() string { return t.src }

// Name returns the template's name.
func (t *Template) Name() string { return t.name }

// Render renders the conversation msgs. A template that rejects the
// conversation through raise_exception yields an *ExceptionError; any other
// failure an *Error naming the construct and, when known, its line.
func (t *Template) Render(msgs []Message, opts Options) (out string, err error) {
	var raised *ExceptionError
	defer func() {
		if r := recover(); r != nil {
			if a, ok := r.(budgetAbort); ok {
				out, err = "", &Error{Template: t.name, Msg: a.err.Error(), Err: a.err}
				return
			}
			out, err = "", &Error{Template: t.name, Msg: fmt.Sprintf("render: template engine failed: %v", r)}
		}
	}()
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	data := make(map[string]any, len(opts.Vars)+6)
	for k, v := range opts.Vars {
		data[k] = v
	}
	data["messages"] = messageValues(msgs)
	data["add_generation_prompt"] = opts.AddGenerationPrompt
	delete(data, "bos_token")
	delete(data, "eos_token")
	if opts.BOSToken != "" {
		data["bos_token"] = opts.BOSToken
	}
	if opts.EOSToken != "" {
		data["eos_token"] = opts.EOSToken
	}
	data["raise_exception"] = func(msg string) (string, error) {
		if raised == nil {
			raised = &ExceptionError{Template: t.name, Message: msg}
		}
		return "", raised
	}
	data["strftime_now"] = func(format string) string { return strftime(format, now) }
	bud := newBudget()
	for k, v := range guards(bud) {
		data[k] = v
	}

	var b strings.Builder
	err = t.tpl.Execute(&b, exec.NewContext(data))
	if bud.err != nil {
		// a limit, even if the template went on after it
		return "", &Error{Template: t.name, Msg: bud.err.Error(), Err: bud.err}
	}
	if err != nil {
		if raised != nil {
			return "", raised
		}
		return "", renderError(t.name, err)
	}
	return b.String(), nil
}

// messageValues converts msgs into the list of dicts templates index
// (message['role'], message.content).
func messageValues(msgs []Message) []any {
	out := make([]any, len(msgs))
	callNames := map[string]string{} // the name of each earlier call, by id
	for i, m := range msgs {
		v := map[string]any{"role": m.Role, "content": m.Content}
		if m.ReasoningContent != "" {
			// gpt-oss's and LFM2's templates read it as thinking
			v["reasoning_content"], v["thinking"] = m.ReasoningContent, m.ReasoningContent
		}
		if m.ToolCallID != "" {
			v["tool_call_id"] = m.ToolCallID
		}
		if m.ToolCallID != "" {
			v["tool_call_id"] = m.ToolCallID
		}
		name := m.Name
		if name == "" && m.ToolCallID != "" {
			name = callNames[m.ToolCallID]
		}
		if name != "" {
			v["name"] = name
		}
		for _, c := range m.ToolCalls {
			if c.ID != "" {
				callNames[c.ID] = c.Name
			}
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				// in OpenAI's order, which tojson keeps
				calls[j] = dict("id", c.ID, "type", "function",
					"function", dict("name", c.Name, "arguments", argumentsValue(c.Arguments)))
			}
			v["tool_calls"] = calls
		}
		out[i] = v
	}
	return out
}

// dict makes a mapping that keeps its keys in order from key, value
// pairs.
func dict(kv ...any) exec.Dict {
	d := exec.Dict{Pairs: make([]*exec.Pair, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(kv[i]), Value: exec.AsValue(kv[i+1])})
	}
	return d
}

// IsException reports whether err comes from the template's raise_exception.
func IsException(err error) bool {
	var e *ExceptionError
	return errors.As(err, &e)
}
