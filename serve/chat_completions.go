package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/modelparts"
)

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *outMessage  `json:"message,omitempty"`
	Delta        *outMessage  `json:"delta,omitempty"`
	Logprobs     *logprobList `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type outMessage struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
}

type logprobList struct {
	Content []logprobEntry `json:"content"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
	Timings           *timings     `json:"timings,omitempty"`
}

const fingerprint = "aotlm"

// handleChat answers POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) *apiError {
	var req chatRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	j, lp, cons, e := s.chatJob(&req)
	if e != nil {
		return e
	}
	sl, e := s.acquire(r.Context(), j.ids)
	if e != nil {
		return e
	}
	defer s.pool.release(sl)
	base := chatResponse{ID: newID("chatcmpl-"), Created: unixNow(), Model: s.id, SystemFingerprint: fingerprint}
	if !req.Stream {
		var entries []logprobEntry
		res, err := s.run(r.Context(), sl, j, func(t aotlm.Token) error {
			if lp != nil && t.ID >= 0 {
				entries = append(entries, lp.entry(t.ID))
			}
			return nil
		})
		if err != nil {
			return generationError(err)
		}
		base.Object = "chat.completion"
		msg := &outMessage{Role: "assistant"}
		text := res.Text
		finish := finishReason(res.StopReason)
		if cons != nil && cons.tools != nil {
			if content, calls := cons.tools.parse(text); len(calls) > 0 {
				msg.ToolCalls, text, finish = calls, content, "tool_calls"
			}
		}
		msg.Content = &text
		ch := chatChoice{Message: msg, FinishReason: &finish}
		if lp != nil {
			ch.Logprobs = &logprobList{Content: orEmpty(entries)}
		}
		base.Choices = []chatChoice{ch}
		base.Usage = usageOf(res)
		base.Timings = timingsOf(res)
		writeJSON(w, http.StatusOK, base)
		return nil
	}

	base.Object = "chat.completion.chunk"
	ev := startSSE(w)
	chunk := func(d *outMessage, l *logprobList, finish *string) error {
		c := base
		c.Choices = []chatChoice{{Delta: d, Logprobs: l, FinishReason: finish}}
		return ev.send(c)
	}
	empty := ""
	if chunk(&outMessage{Role: "assistant", Content: &empty}, nil, nil) != nil {
		return nil
	}
	// with tools, the reply is held back until it is known not to be a
	// tool call (it would start with the call's opening mark)
	var held string
	holding := cons != nil && cons.tools != nil
	res, err := s.run(r.Context(), sl, j, func(t aotlm.Token) error {
		var l *logprobList
		if lp != nil && t.ID >= 0 {
			l = &logprobList{Content: []logprobEntry{lp.entry(t.ID)}}
		}
		text := t.Text
		if holding {
			held += text
			if cons.tools.maybeCall(held) {
				return nil
			}
			holding, text = false, held
		}
		if text == "" && l == nil {
			return nil
		}
		return chunk(&outMessage{Content: &text}, l, nil)
	})
	if err != nil {
		if r.Context().Err() == nil {
			ev.send(map[string]any{"error": generationError(err)})
		}
		return nil
	}
	finish := finishReason(res.StopReason)
	if holding {
		content, calls := cons.tools.parse(res.Text)
		if len(calls) > 0 {
			for i := range calls {
				calls[i].Index = new(int)
				*calls[i].Index = i
			}
			if content != "" {
				chunk(&outMessage{Content: &content}, nil, nil)
			}
			chunk(&outMessage{ToolCalls: calls}, nil, nil)
			finish = "tool_calls"
		} else if res.Text != "" {
			chunk(&outMessage{Content: &res.Text}, nil, nil)
		}
	}
	chunk(&outMessage{}, nil, &finish)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := base
		c.Choices = []chatChoice{}
		c.Usage = usageOf(res)
		c.Timings = timingsOf(res)
		ev.send(c)
	}
	ev.done()
	return nil
}

func orEmpty(e []logprobEntry) []logprobEntry {
	if e == nil {
		return []logprobEntry{}
	}
	return e
}

// generationError turns a failed generation into an answer.
func generationError(err error) *apiError {
	if errors.Is(err, aotlm.ErrPromptTooLong) {
		return &apiError{Status: http.StatusBadRequest, Code: "context_length_exceeded", Message: err.Error()}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "generation failed: " + err.Error()}
}

// constraints are what a chat request adds to plain generation.
type constraints struct {
	tools *toolParser
}

// chatJob checks a chat request and renders it into a job.
func (s *Server) chatJob(req *chatRequest) (job, *logprobs, *constraints, *apiError) {
	if e := s.checkModel(req.Model); e != nil {
		return job{}, nil, nil, e
	}
	if len(req.Messages) == 0 {
		return job{}, nil, nil, badRequest("messages", "messages is empty: send at least one message")
	}
	msgs := make([]aotlm.Message, 0, len(req.Messages))
	var imgs ImagePrompt // made on the first image part
	for i, m := range req.Messages {
		role := m.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system"
		case "":
			return job{}, nil, nil, badRequest("messages", "message %d has no role", i)
		default:
			return job{}, nil, nil, badRequest("messages", "message %d has role %q: want system, developer, user, assistant or tool", i, m.Role)
		}
		content := m.Content.Text
		if m.Content.Parts != nil {
			var ie *apiError
			if content, ie = s.imageContent(i, m.Content.Parts, &imgs); ie != nil {
				return job{}, nil, nil, ie
			}
		}
		if role == "assistant" && len(m.ToolCalls) > 0 {
			content += renderToolCalls(m.ToolCalls)
		}
		msgs = append(msgs, aotlm.Message{Role: role, Content: content})
	}
	p, stops, limit, e := req.params(s.m.GenerationDefaults(), s.ctx)
	if e != nil {
		return job{}, nil, nil, e
	}
	var cons constraints
	vars := map[string]any{}
	if len(req.Tools) > 0 {
		tp, tv, e := s.toolSetup(req.Tools, req.ToolChoice)
		if e != nil {
			return job{}, nil, nil, e
		}
		if tp != nil {
			cons.tools = tp
			vars["tools"] = tv
		}
	}
	var format *jsonFormat
	if req.ResponseFormat != nil {
		if format, e = s.responseFormat(req.ResponseFormat); e != nil {
			return job{}, nil, nil, e
		}
	}
	ro := aotlm.RenderOptions{Vars: vars, Now: s.opts.Now}
	if ro.Now.IsZero() {
		ro.Now = time.Now() // the same date for every rendering of the request
	}
	text, err := s.m.RenderChat(msgs, ro)
	if err != nil {
		if errors.Is(err, aotlm.ErrNoChatTemplate) {
			return job{}, nil, nil, badRequest("messages", "the model has no chat template: use /v1/completions")
		}
		return job{}, nil, nil, badRequest("messages", "the chat template refused the messages: %v", err)
	}
	var ids []int
	if imgs != nil {
		if err = s.noSpecialText(req.Messages); err == nil {
			ids, err = imgs.Encode(text)
		}
	} else {
		ids, err = s.encodeChat(msgs, text, ro)
	}
	if err != nil {
		return job{}, nil, nil, badRequest("messages", "%v", err)
	}
	if e := s.checkPrompt(ids, limit); e != nil {
		return job{}, nil, nil, e
	}
	j := job{ids: ids, req: aotlm.Request{IDs: ids, MaxTokens: limit, Sampling: p, Stop: stops, StopIDs: s.eot}}
	if imgs != nil {
		j.req.Embeds = imgs.Embeds()
	}
	var lp *logprobs
	if req.TopLogprobs != nil && (*req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogprobs) {
		return job{}, nil, nil, badRequest("top_logprobs", "top_logprobs %d must be in [0, %d]", *req.TopLogprobs, maxTopLogprobs)
	}
	if req.Logprobs {
		lp = &logprobs{tok: modelparts.Tokenizer(s.m)}
		if req.TopLogprobs != nil {
			lp.top = *req.TopLogprobs
		}
	} else if req.TopLogprobs != nil && *req.TopLogprobs > 0 {
		return job{}, nil, nil, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
	}
	var constrain func([]float32, []int)
	budget := limit
	if budget == 0 {
		budget = s.ctx - len(ids)
	}
	switch {
	case cons.tools != nil && cons.tools.force != nil:
		// a call is required: it wins over response_format, which
		// shapes text replies
		constrain = s.maskFor(cons.tools.force, budget, append(s.m.StopIDs(), s.eot...))
	case format != nil:
		constrain = s.mask(format, budget, append(s.m.StopIDs(), s.eot...))
	}
	j.req.Logits = chainLogits(constrain, lp)
	return j, lp, &cons, nil
}

// chainLogits runs the constraint's mask, then records the logprobs.
func chainLogits(constrain func([]float32, []int), lp *logprobs) func([]float32, []int) {
	switch {
	case constrain == nil && lp == nil:
		return nil
	case lp == nil:
		return constrain
	case constrain == nil:
		return lp.hook
	}
	return func(l []float32, g []int) {
		constrain(l, g)
		lp.hook(l, g)
	}
}

// checkModel accepts the served model's id (or none).
func (s *Server) checkModel(id string) *apiError {
	if id == "" || id == s.id {
		return nil
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: "the model " + jsonQuote(id) + " does not exist: this server serves " + jsonQuote(s.id)}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
