package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/constrain"
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
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is the model's thinking, split from the answer.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
	Refusal          *string    `json:"refusal,omitempty"`
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
	sl, e := s.acquire(r.Context(), j.ids, j.adapter)
	if e != nil {
		return e
	}
	defer s.pool.release(sl)
	n := 1
	if req.N != nil {
		n = *req.N
	}
	// choice i > 0 is a job of its own (its constraint's state, its
	// logprobs) with the seed after the previous choice's; it runs on the
	// same session, whose cache holds the prompt: only the first choice
	// prefills it
	choice := func(i int) (job, *logprobs, *constraints, *apiError) {
		if i == 0 {
			return j, lp, cons, nil
		}
		ji, lpi, ci, e := s.chatJob(&req)
		if e != nil {
			return ji, nil, nil, e
		}
		ji.req.Sampling.Seed = j.req.Sampling.Seed + uint64(i)
		return ji, lpi, ci, nil
	}
	base := chatResponse{ID: newID("chatcmpl-"), Created: unixNow(), Model: s.id, SystemFingerprint: fingerprint}
	var total *usage
	var last *aotlm.Result
	if !req.Stream {
		base.Object = "chat.completion"
		for i := range n {
			ji, lpi, ci, e := choice(i)
			if e != nil {
				return e
			}
			var entries []logprobEntry
			if lpi != nil {
				ji.onToken = func(t aotlm.Token) {
					if t.ID >= 0 {
						entries = append(entries, lpi.entry(t.ID))
					}
				}
			}
			rp, err := s.generateReply(r.Context(), sl, ji, ci, nil)
			if err != nil {
				return generationError(err)
			}
			msg := &outMessage{Role: "assistant", Content: &rp.content, ToolCalls: rp.calls}
			if rp.reasoning != "" {
				msg.ReasoningContent = &rp.reasoning
			}
			ch := chatChoice{Index: i, Message: msg, FinishReason: &rp.finish}
			if lpi != nil {
				ch.Logprobs = &logprobList{Content: orEmpty(entries)}
			}
			base.Choices = append(base.Choices, ch)
			total, last = addUsage(total, rp.res), rp.res
		}
		base.Usage = total
		base.Timings = timingsOf(last)
		writeJSON(w, http.StatusOK, base)
		return nil
	}

	base.Object = "chat.completion.chunk"
	ev := startSSE(w)
	var entries []logprobEntry // logprobs not yet sent
	chunk := func(i int, d *outMessage, finish *string) error {
		c := base
		var l *logprobList
		if len(entries) > 0 {
			l = &logprobList{Content: entries}
			entries = nil
		}
		c.Choices = []chatChoice{{Index: i, Delta: d, Logprobs: l, FinishReason: finish}}
		return ev.send(c)
	}
	for i := range n {
		ji, lpi, ci, e := choice(i)
		if e != nil {
			ev.send(map[string]any{"error": e})
			return nil
		}
		if lpi != nil {
			ji.onToken = func(t aotlm.Token) {
				if t.ID >= 0 {
					entries = append(entries, lpi.entry(t.ID))
				}
			}
		}
		empty := ""
		if chunk(i, &outMessage{Role: "assistant", Content: &empty}, nil) != nil {
			return nil
		}
		rp, err := s.generateReply(r.Context(), sl, ji, ci, func(reasoning, content string) error {
			d := &outMessage{}
			if reasoning != "" {
				d.ReasoningContent = &reasoning
			}
			if content != "" {
				d.Content = &content
			}
			return chunk(i, d, nil)
		})
		if err != nil {
			if r.Context().Err() == nil {
				ev.send(map[string]any{"error": generationError(err)})
			}
			return nil
		}
		if len(rp.calls) > 0 {
			for k := range rp.calls {
				rp.calls[k].Index = new(int)
				*rp.calls[k].Index = k
			}
			chunk(i, &outMessage{ToolCalls: rp.calls}, nil)
		}
		chunk(i, &outMessage{}, &rp.finish)
		total, last = addUsage(total, rp.res), rp.res
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := base
		c.Choices = []chatChoice{}
		c.Usage = total
		c.Timings = timingsOf(last)
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
	if errors.Is(err, aotlm.ErrEmbeddingsOnly) {
		return &apiError{Status: http.StatusBadRequest, Message: err.Error()}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "generation failed: " + err.Error()}
}

// constraints are what a chat request adds to plain generation.
type constraints struct {
	tools *toolParser
	// mask keeps the reply to response_format or to a required tool
	// call (nil: free text).
	mask *constrain.Mask
	// think is set when the template writes thinking between <think>
	// and </think>; thinkOpen when the prompt ends inside it.
	think, thinkOpen bool
}

// chatJob checks a chat request and renders it into a job.
func (s *Server) chatJob(req *chatRequest) (job, *logprobs, *constraints, *apiError) {
	adapter, e := s.adapterOf(req.Model, req.Adapter)
	if e != nil {
		return job{}, nil, nil, e
	}
	if len(req.Messages) == 0 {
		return job{}, nil, nil, badRequest("messages", "messages is empty: send at least one message")
	}
	msgs := make([]aotlm.Message, 0, len(req.Messages))
	var imgs ImagePrompt // made on the first image part
	// a template that reads message.tool_calls writes earlier calls in its
	// own layout; for one that does not, they are written into the text
	callsInTemplate := strings.Contains(s.m.ChatTemplateSource(), "tool_calls")
	// a tool result names its function; a client that sends only the
	// call's id gets the name of the earlier call with that id
	callNames := map[string]string{}
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
		msg := aotlm.Message{Role: role, Content: content, ReasoningContent: m.ReasoningContent, Name: m.Name}
		if role == "tool" {
			msg.ToolCallID = m.ToolCallID
			if msg.Name == "" {
				msg.Name = callNames[m.ToolCallID]
			}
		}
		for _, c := range m.ToolCalls {
			if c.ID != "" {
				callNames[c.ID] = c.Function.Name
			}
		}
		if role == "assistant" && len(m.ToolCalls) > 0 {
			if callsInTemplate {
				msg.ToolCalls = templateCalls(m.ToolCalls)
			} else {
				msg.Content += renderToolCalls(m.ToolCalls)
			}
		}
		msgs = append(msgs, msg)
	}
	p, stops, limit, e := req.params(s.m.GenerationDefaults(), s.tokenBound(&req.genFields))
	if e != nil {
		return job{}, nil, nil, e
	}
	var cons constraints
	vars := map[string]any{}
	switch req.ReasoningEffort {
	case "":
	case "none", "minimal":
		vars["enable_thinking"] = false
	case "low", "medium", "high", "xhigh":
		vars["enable_thinking"] = true
		vars["reasoning_effort"] = req.ReasoningEffort // gpt-oss's templates read it
	default:
		return job{}, nil, nil, badRequest("reasoning_effort", "reasoning_effort %q: want none, minimal, low, medium or high", req.ReasoningEffort)
	}
	for k, v := range req.ChatTemplateKwargs {
		vars[k] = v
	}
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
	if cons.tools == nil && toolFormatOf(s.m.ChatTemplateSource()) == formatHarmony {
		// gpt-oss answers in channels: its reply is read for the final
		// channel's text (and the analysis) even without tools
		cons.tools = &toolParser{names: map[string]bool{}, format: formatHarmony}
	}
	var format *jsonFormat
	if req.ResponseFormat != nil {
		if format, e = s.responseFormat(req.ResponseFormat); e != nil {
			return job{}, nil, nil, e
		}
	}
	grammar, e := s.outputGrammar(&req.genFields)
	if e != nil {
		return job{}, nil, nil, e
	}
	if grammar != nil && format != nil {
		return job{}, nil, nil, badRequest("response_format", "response_format and a grammar both constrain the reply: send one of them")
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
	if strings.Contains(s.m.ChatTemplateSource(), thinkClose) {
		cons.think = true
		cons.thinkOpen = strings.HasSuffix(strings.TrimRight(text, " \t\r\n"), thinkOpen)
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
	var shift *aotlm.ContextShift
	if imgs == nil { // a prompt with images stops at a full context
		if shift, e = req.shift(s.opts.ContextShift, s.ctx); e != nil {
			return job{}, nil, nil, e
		}
	}
	if e := s.checkPrompt(ids, limit, shift); e != nil {
		return job{}, nil, nil, e
	}
	j := job{ids: ids, adapter: adapter, req: aotlm.Request{IDs: ids, MaxTokens: limit, Sampling: p, Stop: stops, StopIDs: s.eot, ContextShift: shift}}
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
	budget := limit
	if budget == 0 {
		budget = s.ctx - len(ids)
	}
	stopIDs := append(s.m.StopIDs(), s.eot...)
	var newMask func(left int) *constrain.Mask
	var what string // the constraint, as the error of a too small limit names it
	switch {
	case cons.tools != nil && cons.tools.force != nil:
		// a call is required: it wins over response_format, which
		// shapes text replies
		newMask = func(left int) *constrain.Mask { return s.maskFor(cons.tools.force, left, stopIDs) }
		what = "a tool call"
	case format != nil:
		newMask = func(left int) *constrain.Mask { return s.mask(format, left, stopIDs) }
		what = format.name()
	case grammar != nil:
		newMask = func(left int) *constrain.Mask { return s.grammarMask(grammar, left, stopIDs) }
		what = grammarName(&req.genFields)
	}
	if newMask != nil {
		if e := s.checkRoom(newMask(budget), limit, budget, req.limitName(), what); e != nil {
			return job{}, nil, nil, e
		}
	}
	if req.ThinkingBudget != nil && *req.ThinkingBudget < 0 {
		return job{}, nil, nil, badRequest("thinking_budget_tokens", "thinking_budget_tokens %d must be >= 0", *req.ThinkingBudget)
	}
	thinkBudget := 0
	if req.ThinkingBudget != nil {
		thinkBudget = *req.ThinkingBudget
	}
	var apply func([]float32, []int)
	switch {
	case cons.thinkOpen && (newMask != nil || thinkBudget > 0),
		cons.think && newMask == nil && thinkBudget > 0:
		// the model thinks first: the constraint starts after the
		// thinking, which the budget bounds
		g := s.newThinkGate(cons.thinkOpen, thinkBudget, &cons)
		g.newMask, g.left = newMask, budget
		apply = g.Apply
	case newMask != nil:
		// a template that does not open the thinking gets the
		// constraint from the first token (the model answers at once)
		cons.mask = newMask(budget)
		apply = cons.mask.Apply
	}
	bias, e := req.logitBias(s.m.Info().Vocab)
	if e != nil {
		return job{}, nil, nil, e
	}
	j.req.Logits = withBias(bias, chainLogits(apply, lp))
	if e := s.speculate(&j, &req.genFields); e != nil {
		return job{}, nil, nil, e
	}
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
