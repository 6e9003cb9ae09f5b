package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// This file serves OpenAI's Responses API (POST /v1/responses, GET and
// DELETE /v1/responses/{id}) over the chat completions machinery. A
// stored response (the default, "store": true) keeps its conversation
// in memory, so that a later request continues it with
// previous_response_id; the store holds the last maxStoredResponses.

// maxStoredResponses bounds the responses kept for previous_response_id.
const maxStoredResponses = 256

// responsesRequest is the body of /v1/responses.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              respInput       `json:"input"`
	Instructions       *string         `json:"instructions"`
	Tools              []respTool      `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Stream             bool            `json:"stream"`
	PreviousResponseID string          `json:"previous_response_id"`
	Store              *bool           `json:"store"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Metadata           map[string]any  `json:"metadata"`
	Text               *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	Reasoning *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
	// Grammar and Regex keep the reply to a GBNF grammar or a regular
	// expression, as in chat completions (extensions of the API).
	Grammar string `json:"grammar"`
	Regex   string `json:"regex"`
}

type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// respInput is the input: a string (one user message) or a list of
// items.
type respInput struct {
	Items []respItem
	Set   bool
}

func (in *respInput) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	in.Set = true
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		in.Items = []respItem{{Type: "message", Role: "user", Content: respContent{{Type: "input_text", Text: s}}}}
		return nil
	}
	if err := json.Unmarshal(data, &in.Items); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return err
		}
		return &fieldError{"input", "want a string or an array of input items"}
	}
	return nil
}

// respItem is one input item: a message, a function call, a function
// call's output or a reasoning item.
type respItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   respContent     `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments string          `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Summary   []respPart      `json:"summary,omitempty"`
}

// respPart is a part of a message's content.
type respPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url,omitempty"`
}

// respContent is a message's content: a string or an array of parts.
type respContent []respPart

func (c *respContent) UnmarshalJSON(data []byte) error {
	return textOrList(data, (*[]respPart)(c), func(t string) respPart { return respPart{Type: "input_text", Text: t} },
		&fieldError{"input", "a message's content: want a string or an array of input_text and input_image parts"})
}

// chatMessages turns input items into chat messages.
func chatMessagesOf(items []respItem) ([]chatMessage, *apiError) {
	var msgs []chatMessage
	reasoning := ""
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			cm := chatMessage{Role: it.Role}
			var text []string
			var parts []contentPart
			images := false
			for _, p := range it.Content {
				switch p.Type {
				case "input_text", "output_text", "text":
					text = append(text, p.Text)
					parts = append(parts, contentPart{Text: p.Text})
				case "refusal":
				case "input_image":
					if p.ImageURL == "" {
						return nil, badRequest(fmt.Sprintf("input[%d]", i), "input %d: an input_image needs an image_url (a data: URL); file ids are not supported", i)
					}
					parts = append(parts, contentPart{ImageURL: p.ImageURL, Image: true})
					images = true
				default:
					return nil, badRequest(fmt.Sprintf("input[%d]", i), "input %d: a content part of type %q: want input_text, output_text or input_image", i, p.Type)
				}
			}
			cm.Content = textContent{Text: strings.Join(text, ""), Set: true}
			if images {
				cm.Content.Parts = parts
			}
			if it.Role == "assistant" {
				cm.ReasoningContent, reasoning = reasoning, ""
				if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && !msgs[n-1].Content.Set {
					// the calls this text goes with came first
					msgs[n-1].Content = cm.Content
					continue
				}
			}
			msgs = append(msgs, cm)
		case "function_call":
			var call toolCall
			call.ID, call.Type, call.Function.Name, call.Function.Arguments = it.CallID, "function", it.Name, it.Arguments
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				continue
			}
			msgs = append(msgs, chatMessage{Role: "assistant", ToolCalls: []toolCall{call}, ReasoningContent: reasoning})
			reasoning = ""
		case "function_call_output":
			out := string(it.Output)
			var s string
			if json.Unmarshal(it.Output, &s) == nil {
				out = s
			} else {
				var parts respContent
				if json.Unmarshal(it.Output, &parts) == nil {
					var b strings.Builder
					for _, p := range parts {
						b.WriteString(p.Text)
					}
					out = b.String()
				}
			}
			msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: it.CallID, Content: textContent{Text: out, Set: true}})
		case "reasoning":
			var b strings.Builder
			for _, p := range append(it.Summary, it.Content...) {
				b.WriteString(p.Text)
			}
			reasoning = b.String()
		default:
			return nil, badRequest(fmt.Sprintf("input[%d]", i), "input %d has type %q: want message, function_call, function_call_output or reasoning", i, it.Type)
		}
	}
	return msgs, nil
}

// respOut is one output item.
type respOut struct {
	Type      string         `json:"type"`
	ID        string         `json:"id"`
	Status    string         `json:"status,omitempty"`
	Role      string         `json:"role,omitempty"`
	Content   *[]respOutPart `json:"content,omitempty"`
	Summary   *[]respOutPart `json:"summary,omitempty"`
	CallID    string         `json:"call_id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Arguments *string        `json:"arguments,omitempty"`
}

type respOutPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations *[]any `json:"annotations,omitempty"`
	Logprobs    *[]any `json:"logprobs,omitempty"`
}

func outputText(text string) respOutPart {
	return respOutPart{Type: "output_text", Text: text, Annotations: &[]any{}, Logprobs: &[]any{}}
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responseObj is a response.
type responseObj struct {
	ID                 string         `json:"id"`
	Object             string         `json:"object"`
	CreatedAt          int64          `json:"created_at"`
	Status             string         `json:"status"`
	Error              any            `json:"error"`
	IncompleteDetails  any            `json:"incomplete_details"`
	Instructions       *string        `json:"instructions"`
	MaxOutputTokens    *int           `json:"max_output_tokens"`
	Model              string         `json:"model"`
	Output             []respOut      `json:"output"`
	ParallelToolCalls  bool           `json:"parallel_tool_calls"`
	PreviousResponseID *string        `json:"previous_response_id"`
	Reasoning          any            `json:"reasoning"`
	Store              bool           `json:"store"`
	Temperature        *float64       `json:"temperature"`
	TopP               *float64       `json:"top_p"`
	Text               any            `json:"text"`
	ToolChoice         any            `json:"tool_choice"`
	Tools              []respTool     `json:"tools"`
	Truncation         string         `json:"truncation"`
	Usage              *respUsage     `json:"usage"`
	Metadata           map[string]any `json:"metadata"`
}

// storedResponse is a response and the conversation it ended.
type storedResponse struct {
	resp     responseObj
	messages []chatMessage
}

// responseStore keeps the last maxStoredResponses responses.
type responseStore struct {
	mu    sync.Mutex
	byID  map[string]*storedResponse
	order []string
}

func (st *responseStore) get(id string) *storedResponse {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byID[id]
}

func (st *responseStore) put(r *storedResponse) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID == nil {
		st.byID = map[string]*storedResponse{}
	}
	st.byID[r.resp.ID] = r
	st.order = append(st.order, r.resp.ID)
	for len(st.byID) > maxStoredResponses && len(st.order) > 0 {
		delete(st.byID, st.order[0])
		st.order = st.order[1:]
	}
}

func (st *responseStore) delete(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID[id] == nil {
		return false
	}
	delete(st.byID, id)
	for i, x := range st.order {
		if x == id {
			st.order = append(st.order[:i], st.order[i+1:]...)
			break
		}
	}
	return true
}

// chatRequest translates the request (after the stored conversation it
// continues) into a chat completions request; history is the
// conversation without the instructions.
func (s *Server) responsesChat(req *responsesRequest) (*chatRequest, []chatMessage, *apiError) {
	if !req.Input.Set {
		return nil, nil, badRequest("input", "input is missing")
	}
	var history []chatMessage
	if req.PreviousResponseID != "" {
		prev := s.responses.get(req.PreviousResponseID)
		if prev == nil {
			return nil, nil, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "previous_response_id", Code: "previous_response_not_found",
				Message: fmt.Sprintf("previous response with id %q not found (the server keeps the last %d stored responses)", req.PreviousResponseID, maxStoredResponses)}
		}
		history = append(history, prev.messages...)
	}
	in, e := chatMessagesOf(req.Input.Items)
	if e != nil {
		return nil, nil, e
	}
	history = append(history, in...)
	c := &chatRequest{}
	c.Model, c.MaxTokens, c.Temperature, c.TopP = req.Model, req.MaxOutputTokens, req.Temperature, req.TopP
	c.Grammar, c.Regex, c.limitField = req.Grammar, req.Regex, "max_output_tokens"
	if req.Instructions != nil && *req.Instructions != "" {
		c.Messages = append(c.Messages, chatMessage{Role: "system", Content: textContent{Text: *req.Instructions, Set: true}})
	}
	c.Messages = append(c.Messages, history...)
	for i, t := range req.Tools {
		if t.Type != "function" {
			return nil, nil, badRequest(fmt.Sprintf("tools[%d]", i), "tool %d has type %q: only function tools are supported", i, t.Type)
		}
		c.Tools = append(c.Tools, tool{Type: "function", Function: toolFunction{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	if tc := bytes.TrimSpace(req.ToolChoice); len(tc) > 0 && tc[0] == '{' {
		var obj struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(tc, &obj) != nil || obj.Type != "function" || obj.Name == "" {
			return nil, nil, badRequest("tool_choice", "tool_choice: want none, auto, required or {\"type\": \"function\", \"name\": ...}")
		}
		c.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": obj.Name}})
	} else {
		c.ToolChoice = req.ToolChoice
	}
	if req.Text != nil && req.Text.Format != nil {
		f := req.Text.Format
		c.ResponseFormat = &responseFormat{Type: f.Type}
		if f.Type == "json_schema" {
			c.ResponseFormat.JSONSchema = &struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict bool            `json:"strict"`
			}{f.Name, f.Schema, f.Strict}
		}
	}
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		c.ReasoningEffort = *req.Reasoning.Effort
	}
	return c, history, nil
}

// handleResponses answers POST /v1/responses.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) *apiError {
	var req responsesRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	creq, history, e := s.responsesChat(&req)
	if e != nil {
		return e
	}
	j, _, cons, e := s.chatJob(creq)
	if e != nil {
		return e
	}
	sl, e := s.acquire(r.Context(), j.ids, j.adapter)
	if e != nil {
		return e
	}
	defer s.pool.release(sl)
	resp := responseObj{ID: newID("resp_"), Object: "response", CreatedAt: unixNow(), Status: "in_progress",
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: s.id, Output: []respOut{},
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls, Store: req.Store == nil || *req.Store,
		Temperature: req.Temperature, TopP: req.TopP, Truncation: "disabled", Tools: req.Tools, Metadata: req.Metadata,
		Reasoning: map[string]any{"effort": nil, "summary": nil}, Text: map[string]any{"format": map[string]string{"type": "text"}}, ToolChoice: "auto"}
	if req.Text != nil && req.Text.Format != nil {
		resp.Text = req.Text
	}
	if req.Reasoning != nil {
		resp.Reasoning = req.Reasoning
	}
	if len(bytes.TrimSpace(req.ToolChoice)) > 0 {
		resp.ToolChoice = req.ToolChoice
	}
	if resp.Tools == nil {
		resp.Tools = []respTool{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]any{}
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	// finish completes resp from the reply and stores it
	finish := func(rp *reply, out []respOut) {
		resp.Output = out
		resp.Status = "completed"
		if rp.finish == "length" {
			resp.Status = "incomplete"
			resp.IncompleteDetails = map[string]string{"reason": "max_output_tokens"}
		}
		u := &respUsage{InputTokens: len(rp.res.PromptIDs), OutputTokens: len(rp.res.IDs)}
		u.InputTokensDetails.CachedTokens = rp.res.Reused
		u.TotalTokens = u.InputTokens + u.OutputTokens
		resp.Usage = u
		if resp.Store {
			msg := chatMessage{Role: "assistant", Content: textContent{Text: rp.content, Set: true}, ReasoningContent: rp.reasoning}
			for _, o := range out {
				if o.Type == "function_call" {
					var c toolCall
					c.ID, c.Type, c.Function.Name, c.Function.Arguments = o.CallID, "function", o.Name, *o.Arguments
					msg.ToolCalls = append(msg.ToolCalls, c)
				}
			}
			s.responses.put(&storedResponse{resp: resp, messages: append(history[:len(history):len(history)], msg)})
		}
	}
	if !req.Stream {
		rp, err := s.generateReply(r.Context(), sl, j, cons, nil)
		if err != nil {
			return generationError(err)
		}
		var out []respOut
		if rp.reasoning != "" {
			out = append(out, reasoningItem(newID("rs_"), rp.reasoning))
		}
		if rp.content != "" || len(rp.calls) == 0 {
			out = append(out, messageItem(newID("msg_"), rp.content, "completed"))
		}
		for _, c := range rp.calls {
			out = append(out, callItem(c, "completed"))
		}
		finish(rp, out)
		writeJSON(w, http.StatusOK, resp)
		return nil
	}

	ev := startSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) error {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return ev.event(typ, fields)
	}
	if send("response.created", map[string]any{"response": resp}) != nil {
		return nil
	}
	send("response.in_progress", map[string]any{"response": resp})
	var out []respOut
	open, text := "", "" // the item being streamed and its text so far
	closeItem := func() error {
		i := len(out) - 1
		switch open {
		case "reasoning":
			out[i] = reasoningItem(out[i].ID, text)
			if err := send("response.reasoning_text.done", map[string]any{"item_id": out[i].ID, "output_index": i, "content_index": 0, "text": text}); err != nil {
				return err
			}
		case "message":
			out[i] = messageItem(out[i].ID, text, "completed")
			if err := send("response.output_text.done", map[string]any{"item_id": out[i].ID, "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}}); err != nil {
				return err
			}
			if err := send("response.content_part.done", map[string]any{"item_id": out[i].ID, "output_index": i, "content_index": 0, "part": outputText(text)}); err != nil {
				return err
			}
		default:
			return nil
		}
		open, text = "", ""
		return send("response.output_item.done", map[string]any{"output_index": i, "item": out[i]})
	}
	openItem := func(kind string) error {
		if err := closeItem(); err != nil {
			return err
		}
		open = kind
		if kind == "reasoning" {
			out = append(out, respOut{Type: "reasoning", ID: newID("rs_"), Summary: &[]respOutPart{}, Content: &[]respOutPart{}})
			return send("response.output_item.added", map[string]any{"output_index": len(out) - 1, "item": out[len(out)-1]})
		}
		out = append(out, respOut{Type: "message", ID: newID("msg_"), Status: "in_progress", Role: "assistant", Content: &[]respOutPart{}})
		i := len(out) - 1
		if err := send("response.output_item.added", map[string]any{"output_index": i, "item": out[i]}); err != nil {
			return err
		}
		return send("response.content_part.added", map[string]any{"item_id": out[i].ID, "output_index": i, "content_index": 0, "part": outputText("")})
	}
	delta := func(kind, d string) error {
		if open != kind {
			if err := openItem(kind); err != nil {
				return err
			}
		}
		text += d
		i := len(out) - 1
		if kind == "reasoning" {
			return send("response.reasoning_text.delta", map[string]any{"item_id": out[i].ID, "output_index": i, "content_index": 0, "delta": d})
		}
		return send("response.output_text.delta", map[string]any{"item_id": out[i].ID, "output_index": i, "content_index": 0, "delta": d, "logprobs": []any{}})
	}
	rp, err := s.generateReply(r.Context(), sl, j, cons, func(reasoning, content string) error {
		if reasoning != "" {
			if err := delta("reasoning", reasoning); err != nil {
				return err
			}
		}
		if content != "" {
			return delta("message", content)
		}
		return nil
	})
	if err != nil {
		if r.Context().Err() == nil {
			ae := generationError(err)
			send("error", map[string]any{"code": ae.Code, "message": ae.Message, "param": nil})
		}
		return nil
	}
	if open == "reasoning" || (open == "" && len(rp.calls) == 0) {
		delta("message", "")
	}
	closeItem()
	for _, c := range rp.calls {
		item := callItem(c, "in_progress")
		args := *item.Arguments
		empty := ""
		item.Arguments = &empty
		i := len(out)
		out = append(out, item)
		send("response.output_item.added", map[string]any{"output_index": i, "item": item})
		send("response.function_call_arguments.delta", map[string]any{"item_id": item.ID, "output_index": i, "delta": args})
		send("response.function_call_arguments.done", map[string]any{"item_id": item.ID, "output_index": i, "arguments": args, "name": item.Name})
		out[i] = callItem(c, "completed")
		out[i].ID = item.ID
		out[i].CallID = item.CallID
		send("response.output_item.done", map[string]any{"output_index": i, "item": out[i]})
	}
	finish(rp, out)
	done := "response.completed"
	if resp.Status == "incomplete" {
		done = "response.incomplete"
	}
	send(done, map[string]any{"response": resp})
	return nil
}

func reasoningItem(id, text string) respOut {
	return respOut{Type: "reasoning", ID: id, Summary: &[]respOutPart{}, Content: &[]respOutPart{{Type: "reasoning_text", Text: text}}}
}

func messageItem(id, text, status string) respOut {
	return respOut{Type: "message", ID: id, Status: status, Role: "assistant", Content: &[]respOutPart{outputText(text)}}
}

func callItem(c toolCall, status string) respOut {
	args := c.Function.Arguments
	return respOut{Type: "function_call", ID: newID("fc_"), Status: status, CallID: c.ID, Name: c.Function.Name, Arguments: &args}
}

// handleGetResponse answers GET /v1/responses/{id}: a stored response.
func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) *apiError {
	st := s.responses.get(r.PathValue("id"))
	if st == nil {
		return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no stored response with id %q", r.PathValue("id"))}
	}
	writeJSON(w, http.StatusOK, st.resp)
	return nil
}

// handleDeleteResponse answers DELETE /v1/responses/{id}.
func (s *Server) handleDeleteResponse(w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	if !s.responses.delete(id) {
		return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no stored response with id %q", id)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
	return nil
}
