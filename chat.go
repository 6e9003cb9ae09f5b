package aotlm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Message is one turn of a conversation.
type Message struct {
	// Role is "system", "user", "assistant", "tool", ...
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is an assistant turn's thinking text; templates see
	// it as message.reasoning_content only when it is not empty.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the function calls an assistant turn made. Templates
	// see them as message.tool_calls in the OpenAI shape {"id", "type":
	// "function", "function": {"name", "arguments"}}, the arguments decoded
	// from their JSON text.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, in a "tool" turn, the id of the call whose result
	// the turn holds (OpenAI's tool_call_id); templates see it as
	// message.tool_call_id when it is not empty.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is, in a "tool" turn, the name of the function whose result
	// the turn holds (a participant's name in other turns); templates see
	// it as message.name when it is not empty. A tool turn that has only
	// a ToolCallID takes the name of the earlier call with that ID.
	Name string `json:"name,omitempty"`
}

// ToolCall is one function call of an assistant turn.
type ToolCall struct {
	// ID is the call's id ("" for none).
	ID string `json:"id,omitempty"`
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the call's arguments as JSON text, normally an object;
	// text that is not JSON reaches the template as a string.
	Arguments string `json:"arguments"`
}

// ChatOptions configures NewChat.
type ChatOptions struct {
	// System is the system prompt ("" for none).
	System string
	// Context is the session's cache size (0: the model's).
	Context int
	// Reserve is how many positions a turn keeps free for the reply when
	// older turns must be dropped to fit (0: a quarter of the context).
	Reserve int
	// Vars are extra template variables (such as "enable_thinking").
	Vars map[string]any
	// Now fixes the date templates print (zero: the current time).
	Now time.Time
	// Encode, when set, turns the rendered conversation into prompt ids
	// in place of the model's tokenizer (for a prompt that places images:
	// the ids it returns may name embedding rows, which the requests given
	// to Send then hold in Request.Embeds).
	Encode func(text string) ([]int, error)
}

// Chat is a conversation on one session: each turn renders the whole
// conversation with the model's chat template, and the session's cache
// reuse prefills only what the last turn added.
type Chat struct {
	s        *Session
	opts     ChatOptions
	turns    []Message
	turnStop []int
}

// ChatResult is one turn's outcome.
type ChatResult struct {
	*Result
	// Dropped is how many of the oldest messages were left out so that
	// the conversation fits the context.
	Dropped int
}

// endOfTurn lists the special tokens with which common chat templates end
// a turn; those the vocabulary holds as single tokens stop a chat reply.
var endOfTurn = []string{"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>", "</s>", "<|user|>"}

// NewChat starts a conversation.
func (m *Model) NewChat(opts ChatOptions) (*Chat, error) {
	if m.template == nil {
		return nil, ErrNoChatTemplate
	}
	if m.tok == nil {
		return nil, ErrNoTokenizer
	}
	s, err := m.NewSession(opts.Context)
	if err != nil {
		return nil, err
	}
	return &Chat{s: s, opts: opts, turnStop: m.EndOfTurnIDs()}, nil
}

// EndOfTurnIDs returns the ids that end a chat reply: the template's EOS
// token and the common end-of-turn tokens the vocabulary holds as single
// tokens.
func (m *Model) EndOfTurnIDs() []int {
	tok := m.tok
	if tok == nil {
		return nil
	}
	var ids []int
	for _, t := range append([]string{m.specials.EOS}, endOfTurn...) {
		if t == "" {
			continue
		}
		if e := tok.Encode(t, tokenizer.EncodeOptions{ParseSpecial: true}); len(e) == 1 && tok.Token(e[0]) == t && !contains(ids, e[0]) {
			ids = append(ids, e[0])
		}
	}
	return ids
}

// Session returns the chat's session.
func (c *Chat) Session() *Session { return c.s }

// Messages returns the conversation so far (the system prompt excluded).
func (c *Chat) Messages() []Message { return c.turns }

// SetSystem replaces the system prompt; the next turn prefills again from
// where the rendered conversation changes.
func (c *Chat) SetSystem(text string) { c.opts.System = text }

// Reset forgets the conversation and empties the cache.
func (c *Chat) Reset() error {
	c.turns = nil
	return c.s.Reset()
}

// Close releases the chat's session.
func (c *Chat) Close() { c.s.Close() }

// Send adds a user message and generates the assistant's reply with req's
// sampling, token limit and stop strings (req.Prompt and req.IDs are
// ignored), streaming its tokens to onToken. When the conversation does
// not fit the context with room for the reply, the oldest turns are left
// out (the system prompt is kept) and ChatResult.Dropped says how many;
// a message that cannot fit even alone is an error.
func (c *Chat) Send(ctx context.Context, user string, req Request, onToken func(Token) error) (*ChatResult, error) {
	msgs := append(append([]Message(nil), c.turns...), Message{Role: "user", Content: user})
	reserve := c.opts.Reserve
	if reserve <= 0 {
		reserve = c.s.Context() / 4
	}
	if req.MaxTokens > 0 {
		reserve = min(reserve, req.MaxTokens)
	}
	dropped := 0
	var ids []int
	for {
		var err error
		if ids, err = c.render(msgs[dropped:]); err != nil {
			return nil, err
		}
		if len(ids)+reserve <= c.s.Context() {
			break
		}
		if dropped+1 >= len(msgs) {
			return nil, fmt.Errorf("%w: the message takes %d tokens with the system prompt; the context holds %d and %d are kept for the reply",
				ErrPromptTooLong, len(ids), c.s.Context(), reserve)
		}
		// drop the oldest message, and a reply that would lead the rest
		dropped++
		for dropped < len(msgs)-1 && msgs[dropped].Role != "user" {
			dropped++
		}
	}
	req.Prompt, req.IDs, req.Raw = "", ids, true
	req.StopIDs = append(append([]int(nil), req.StopIDs...), c.turnStop...)
	res, err := c.s.Generate(ctx, req, onToken)
	if res == nil {
		return nil, err
	}
	c.turns = append(msgs[dropped:], Message{Role: "assistant", Content: res.Text})
	return &ChatResult{Result: res, Dropped: dropped}, err
}

// render renders the system prompt and msgs with the generation prompt
// and encodes the text.
func (c *Chat) render(msgs []Message) ([]int, error) {
	all := msgs
	if c.opts.System != "" {
		all = append([]Message{{Role: "system", Content: c.opts.System}}, msgs...)
	}
	m := c.s.m
	text, err := m.RenderChat(all, RenderOptions{Vars: c.opts.Vars, Now: c.opts.Now})
	if err != nil {
		return nil, err
	}
	encode := func(text string) ([]int, error) { return m.Encode(text, true) }
	if c.opts.Encode != nil {
		encode = c.opts.Encode
	}
	ids, err := encode(text)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errors.New("the chat template rendered no tokens")
	}
	return ids, nil
}
