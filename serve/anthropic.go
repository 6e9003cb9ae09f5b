package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/aotlm/aotlm"
)

// This file serves Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens) over the chat completions machinery: a
// request is translated into a chat request, and the reply's thinking,
// text and tool calls into content blocks.

// messagesRequest is the body of /v1/messages.
type messagesRequest struct {
	Model         string           `json:"model"`
	MaxTokens     *int             `json:"max_tokens"`
	Messages      []anthMessage    `json:"messages"`
	System        anthBlocks       `json:"system"`
	StopSequences []string         `json:"stop_sequences"`
	Stream        bool             `json:"stream"`
	Temperature   *float64         `json:"temperature"`
	TopP          *float64         `json:"top_p"`
	TopK          *int             `json:"top_k"`
	Tools         []anthTool       `json:"tools"`
	ToolChoice    *anthToolChoice  `json:"tool_choice"`
	Thinking      *anthThinking    `json:"thinking"`
	Metadata      *json.RawMessage `json:"metadata"`
	// Grammar and Regex keep the reply to a GBNF grammar or a regular
	// expression, as in chat completions (extensions of the API).
	Grammar string `json:"grammar"`
	Regex   string `json:"regex"`
}

type anthMessage struct {
	Role    string     `json:"role"`
	Content anthBlocks `json:"content"`
}

// anthBlock is one content block of a message.
type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *anthSource     `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   anthBlocks      `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
}

// anthBlocks is a content field: a string (one text block) or an array
// of blocks.
type anthBlocks []anthBlock

func (b *anthBlocks) UnmarshalJSON(data []byte) error {
	return textOrList(data, (*[]anthBlock)(b), func(t string) anthBlock { return anthBlock{Type: "text", Text: t} },
		&fieldError{"content", "want a string or an array of content blocks"})
}

// text joins the text blocks.
func (b anthBlocks) text() string {
	var parts []string
	for _, x := range b {
		if x.Type == "text" {
			parts = append(parts, x.Text)
		}
	}
	return strings.Join(parts, "\n")
}

type anthSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type anthTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type anthThinking struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// chatRequest translates the request into a chat completions request.
func (m *messagesRequest) chatRequest() (*chatRequest, *apiError) {
	c := &chatRequest{}
	c.Model, c.MaxTokens, c.Stream = m.Model, m.MaxTokens, m.Stream
	c.Grammar, c.Regex = m.Grammar, m.Regex
	c.Temperature, c.TopP, c.TopK, c.Stop = m.Temperature, m.TopP, m.TopK, m.StopSequences
	if sys := m.System.text(); sys != "" {
		c.Messages = append(c.Messages, chatMessage{Role: "system", Content: textContent{Text: sys, Set: true}})
	}
	for i, msg := range m.Messages {
		switch msg.Role {
		case "user":
			var parts []contentPart
			images := false
			flush := func() {
				if len(parts) == 0 {
					return
				}
				var txt []string
				for _, p := range parts {
					if !p.Image {
						txt = append(txt, p.Text)
					}
				}
				tc := textContent{Text: strings.Join(txt, "\n"), Set: true}
				if images {
					tc.Parts = parts
				}
				c.Messages = append(c.Messages, chatMessage{Role: "user", Content: tc})
				parts, images = nil, false
			}
			for _, b := range msg.Content {
				switch b.Type {
				case "text":
					parts = append(parts, contentPart{Text: b.Text})
				case "image":
					u, e := b.imageURL(i)
					if e != nil {
						return nil, e
					}
					parts = append(parts, contentPart{ImageURL: u, Image: true})
					images = true
				case "tool_result":
					flush()
					out := b.Content.text()
					if b.IsError {
						out = "error: " + out
					}
					c.Messages = append(c.Messages, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: textContent{Text: out, Set: true}})
				default:
					return nil, badRequest(fmt.Sprintf("messages.%d.content", i), "message %d: a %q block: a user message holds text, image and tool_result blocks", i, b.Type)
				}
			}
			flush()
		case "assistant":
			out := chatMessage{Role: "assistant"}
			var txt []string
			for _, b := range msg.Content {
				switch b.Type {
				case "text":
					txt = append(txt, b.Text)
				case "thinking":
					out.ReasoningContent = b.Thinking
				case "redacted_thinking":
				case "tool_use":
					var call toolCall
					call.ID, call.Type, call.Function.Name = b.ID, "function", b.Name
					args := bytes.TrimSpace(b.Input)
					if len(args) == 0 {
						args = []byte("{}")
					}
					call.Function.Arguments = string(args)
					out.ToolCalls = append(out.ToolCalls, call)
				default:
					return nil, badRequest(fmt.Sprintf("messages.%d.content", i), "message %d: a %q block: an assistant message holds text, thinking and tool_use blocks", i, b.Type)
				}
			}
			out.Content = textContent{Text: strings.Join(txt, "\n"), Set: true}
			c.Messages = append(c.Messages, out)
		default:
			return nil, badRequest(fmt.Sprintf("messages.%d.role", i), "message %d has role %q: want user or assistant", i, msg.Role)
		}
	}
	for i, t := range m.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, badRequest(fmt.Sprintf("tools.%d", i), "tool %d has type %q: only custom tools (a name and an input_schema) are supported", i, t.Type)
		}
		c.Tools = append(c.Tools, tool{Type: "function", Function: toolFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	if tc := m.ToolChoice; tc != nil {
		var v any
		switch tc.Type {
		case "auto", "":
			v = "auto"
		case "any":
			v = "required"
		case "none":
			v = "none"
		case "tool":
			v = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		default:
			return nil, badRequest("tool_choice", "tool_choice type %q: want auto, any, tool or none", tc.Type)
		}
		c.ToolChoice, _ = json.Marshal(v)
	}
	// Messages think only when asked to
	think := false
	if m.Thinking != nil {
		switch m.Thinking.Type {
		case "enabled", "adaptive":
			think = true
			if m.Thinking.BudgetTokens > 0 {
				c.ThinkingBudget = &m.Thinking.BudgetTokens
			}
		case "disabled":
		default:
			return nil, badRequest("thinking", "thinking type %q: want enabled or disabled", m.Thinking.Type)
		}
	}
	c.ChatTemplateKwargs = map[string]any{"enable_thinking": think}
	return c, nil
}

// imageURL turns an image block's source into the URL an image part
// reads.
func (b *anthBlock) imageURL(msg int) (string, *apiError) {
	if b.Source == nil {
		return "", badRequest(fmt.Sprintf("messages.%d.content", msg), "message %d: an image block without a source", msg)
	}
	switch b.Source.Type {
	case "base64":
		return "data:" + b.Source.MediaType + ";base64," + b.Source.Data, nil
	case "url":
		return b.Source.URL, nil
	}
	return "", badRequest(fmt.Sprintf("messages.%d.content", msg), "message %d: an image source of type %q: want base64 or url", msg, b.Source.Type)
}

// messagesJob checks and renders a Messages request.
func (s *Server) messagesJob(r *http.Request, needMax bool) (*messagesRequest, job, *constraints, *apiError) {
	var req messagesRequest
	if e := decodeBody(r, &req); e != nil {
		return nil, job{}, nil, e
	}
	if needMax && req.MaxTokens == nil {
		return nil, job{}, nil, badRequest("max_tokens", "max_tokens: field required")
	}
	if len(req.Messages) == 0 {
		return nil, job{}, nil, badRequest("messages", "messages: at least one message is required")
	}
	creq, e := req.chatRequest()
	if e != nil {
		return nil, job{}, nil, e
	}
	j, _, cons, e := s.chatJob(creq)
	if e != nil {
		return nil, job{}, nil, e
	}
	return &req, j, cons, nil
}

// handleCountTokens answers POST /v1/messages/count_tokens.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) *apiError {
	_, j, _, e := s.messagesJob(r, false)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(j.ids)})
	return nil
}

// anthUsage is a Messages usage object.
type anthUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

func anthUsageOf(res *aotlm.Result) anthUsage {
	return anthUsage{InputTokens: len(res.PromptIDs) - res.Reused, CacheReadInputTokens: res.Reused, OutputTokens: len(res.IDs)}
}

// anthMessageOut is a Messages response.
type anthMessageOut struct {
	ID           string      `json:"id"`
	Type         string      `json:"type"`
	Role         string      `json:"role"`
	Model        string      `json:"model"`
	Content      []anthBlock `json:"content"`
	StopReason   *string     `json:"stop_reason"`
	StopSequence *string     `json:"stop_sequence"`
	Usage        anthUsage   `json:"usage"`
}

// anthStop maps a reply's end to Anthropic's stop_reason and
// stop_sequence (the stop string the generated tokens reached).
func (s *Server) anthStop(rp *reply, stops []string) (string, *string) {
	switch {
	case rp.finish == "tool_calls":
		return "tool_use", nil
	case rp.finish == "length":
		return "max_tokens", nil
	case rp.res.StopReason == aotlm.StopString:
		// the reply's text ends before the stop string; the tokens go on
		rest := ""
		if tok := s.m.Tokenizer(); tok != nil {
			rest, _ = strings.CutPrefix(tok.Decode(rp.res.IDs), rp.res.Text)
		}
		best := -1
		for i, st := range stops {
			if j := strings.Index(rest, st); j >= 0 && (best < 0 || j < strings.Index(rest, stops[best])) {
				best = i
			}
		}
		if best >= 0 {
			return "stop_sequence", &stops[best]
		}
		return "stop_sequence", nil
	}
	return "end_turn", nil
}

// toolUseBlock turns a parsed call into a tool_use block.
func toolUseBlock(c toolCall) anthBlock {
	input := json.RawMessage(c.Function.Arguments)
	if !json.Valid(input) {
		input = json.RawMessage("{}")
	}
	return anthBlock{Type: "tool_use", ID: newID("toolu_"), Name: c.Function.Name, Input: input}
}

// handleMessages answers POST /v1/messages.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) *apiError {
	req, j, cons, e := s.messagesJob(r, true)
	if e != nil {
		return e
	}
	sl, e := s.acquire(r.Context(), j.ids, j.adapter)
	if e != nil {
		return e
	}
	defer s.pool.release(sl)
	out := anthMessageOut{ID: newID("msg_"), Type: "message", Role: "assistant", Model: s.id, Content: []anthBlock{}}
	if !req.Stream {
		rp, err := s.generateReply(r.Context(), sl, j, cons, nil)
		if err != nil {
			return generationError(err)
		}
		if rp.reasoning != "" {
			out.Content = append(out.Content, anthBlock{Type: "thinking", Thinking: rp.reasoning, Signature: ""})
		}
		if rp.content != "" || len(rp.calls) == 0 {
			out.Content = append(out.Content, anthBlock{Type: "text", Text: rp.content})
		}
		for _, c := range rp.calls {
			out.Content = append(out.Content, toolUseBlock(c))
		}
		reason, seq := s.anthStop(rp, req.StopSequences)
		out.StopReason, out.StopSequence = &reason, seq
		out.Usage = anthUsageOf(rp.res)
		writeJSON(w, http.StatusOK, out)
		return nil
	}

	ev := startSSE(w)
	out.Usage = anthUsage{InputTokens: len(j.ids)}
	if ev.event("message_start", map[string]any{"type": "message_start", "message": out}) != nil {
		return nil
	}
	index, open, pinged := -1, "", false
	start := func(block any) error {
		index++
		if err := ev.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block}); err != nil {
			return err
		}
		if !pinged {
			pinged = true
			return ev.event("ping", map[string]string{"type": "ping"})
		}
		return nil
	}
	stop := func() error {
		if open == "thinking" {
			if err := ev.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]string{"type": "signature_delta", "signature": ""}}); err != nil {
				return err
			}
		}
		open = ""
		return ev.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	delta := func(kind string, d map[string]string) error {
		if open != kind {
			if open != "" {
				if err := stop(); err != nil {
					return err
				}
			}
			var block any = map[string]string{"type": "text", "text": ""}
			if kind == "thinking" {
				block = map[string]string{"type": "thinking", "thinking": "", "signature": ""}
			}
			if err := start(block); err != nil {
				return err
			}
			open = kind
		}
		return ev.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
	}
	rp, err := s.generateReply(r.Context(), sl, j, cons, func(reasoning, content string) error {
		if reasoning != "" {
			if err := delta("thinking", map[string]string{"type": "thinking_delta", "thinking": reasoning}); err != nil {
				return err
			}
		}
		if content != "" {
			return delta("text", map[string]string{"type": "text_delta", "text": content})
		}
		return nil
	})
	if err != nil {
		if r.Context().Err() == nil {
			ae := generationError(err)
			ev.event("error", map[string]any{"type": "error", "error": map[string]string{"type": anthErrorType(ae.Status), "message": ae.Message}})
		}
		return nil
	}
	if open != "" {
		stop()
	}
	if index < 0 && len(rp.calls) == 0 {
		start(map[string]string{"type": "text", "text": ""})
		stop()
	}
	for _, c := range rp.calls {
		b := toolUseBlock(c)
		start(map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}})
		ev.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
			"delta": map[string]string{"type": "input_json_delta", "partial_json": string(b.Input)}})
		stop()
	}
	reason, seq := s.anthStop(rp, req.StopSequences)
	ev.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": anthUsageOf(rp.res)})
	ev.event("message_stop", map[string]string{"type": "message_stop"})
	return nil
}

// event writes one named server-sent event.
func (e *sse) event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	return e.rc.Flush()
}

// anthErrorType is Anthropic's error type for an HTTP status.
func anthErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// writeAnthropicError writes e in Anthropic's shape:
// {"type": "error", "error": {"type", "message"}}.
func writeAnthropicError(w http.ResponseWriter, e *apiError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	writeJSON(w, e.Status, map[string]any{"type": "error",
		"error": map[string]string{"type": anthErrorType(e.Status), "message": e.Message}})
}
