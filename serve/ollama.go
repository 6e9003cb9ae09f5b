package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aotlm/aotlm"
)

// This file serves Ollama's API (/api/chat, /api/generate, /api/tags,
// /api/show, /api/ps, /api/version) over the chat completions
// machinery. Replies stream as NDJSON (one JSON object a line) unless
// the request sets "stream": false.

// ollamaVersion is the Ollama release whose API these routes follow
// (/api/version reports it, for clients that check it).
const ollamaVersion = "0.12.0"

// ollamaOptions are the generation options Ollama's requests carry;
// the others (num_ctx, num_thread, ...) are accepted and ignored.
type ollamaOptions struct {
	Temperature      *float64 `json:"temperature"`
	TopP             *float64 `json:"top_p"`
	TopK             *int     `json:"top_k"`
	MinP             *float64 `json:"min_p"`
	Seed             *int64   `json:"seed"`
	NumPredict       *int     `json:"num_predict"`
	Stop             stopList `json:"stop"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	// Grammar and Regex keep the reply to a GBNF grammar or a regular
	// expression, as in chat completions (extensions of the API).
	Grammar string `json:"grammar"`
	Regex   string `json:"regex"`
}

// ollamaCommon are the fields /api/chat and /api/generate share.
type ollamaCommon struct {
	Model     string          `json:"model"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	Options   *ollamaOptions  `json:"options"`
	Think     json.RawMessage `json:"think"`
	KeepAlive json.RawMessage `json:"keep_alive"`
}

type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking,omitempty"`
	Images    []string         `json:"images,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string           `json:"tool_name,omitempty"`
}

type ollamaToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaChatRequest struct {
	ollamaCommon
	Messages []ollamaMessage `json:"messages"`
	Tools    []tool          `json:"tools"`
}

type ollamaGenerateRequest struct {
	ollamaCommon
	Prompt string   `json:"prompt"`
	System string   `json:"system"`
	Images []string `json:"images"`
	Raw    bool     `json:"raw"`
}

// chatRequest fills a chat request's shared fields from c.
func (c *ollamaCommon) chatRequest() (*chatRequest, *apiError) {
	r := &chatRequest{}
	r.Model = strings.TrimSuffix(c.Model, ":latest")
	r.Stream = c.Stream == nil || *c.Stream
	if o := c.Options; o != nil {
		r.Temperature, r.TopP, r.TopK, r.MinP, r.Seed = o.Temperature, o.TopP, o.TopK, o.MinP, o.Seed
		r.Stop, r.RepeatPenalty, r.PresencePenalty, r.FrequencyPenalty = o.Stop, o.RepeatPenalty, o.PresencePenalty, o.FrequencyPenalty
		if o.NumPredict != nil && *o.NumPredict > 0 { // -1 and -2: until the context is full
			r.MaxTokens = o.NumPredict
		}
		r.Grammar, r.Regex = o.Grammar, o.Regex
	}
	r.limitField = "num_predict"
	if r.Grammar != "" || r.Regex != "" {
		if f := bytes.TrimSpace(c.Format); len(f) > 0 && string(f) != "null" && string(f) != `""` {
			return nil, badRequest("format", "format and a grammar both constrain the reply: send one of them")
		}
	}
	if f := bytes.TrimSpace(c.Format); len(f) > 0 && string(f) != "null" && string(f) != `""` {
		var s string
		switch {
		case json.Unmarshal(f, &s) == nil:
			if s != "json" {
				return nil, badRequest("format", "format %q: want \"json\" or a JSON schema", s)
			}
			r.ResponseFormat = &responseFormat{Type: "json_object"}
		case f[0] == '{':
			r.ResponseFormat = &responseFormat{Type: "json_schema"}
			r.ResponseFormat.JSONSchema = &struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict bool            `json:"strict"`
			}{Name: "format", Schema: f}
		default:
			return nil, badRequest("format", "format: want \"json\" or a JSON schema object")
		}
	}
	if t := bytes.TrimSpace(c.Think); len(t) > 0 && string(t) != "null" {
		var b bool
		var level string
		switch {
		case json.Unmarshal(t, &b) == nil:
		case json.Unmarshal(t, &level) == nil && (level == "high" || level == "medium" || level == "low"):
			b = true
		default:
			return nil, badRequest("think", "think: want true, false, \"high\", \"medium\" or \"low\"")
		}
		r.ChatTemplateKwargs = map[string]any{"enable_thinking": b}
		if level != "" {
			r.ChatTemplateKwargs["reasoning_effort"] = level // gpt-oss's templates read it
		}
	}
	return r, nil
}

// ollamaImages turns Ollama's base64 images into image parts after text.
func ollamaImages(text string, images []string) textContent {
	tc := textContent{Text: text, Set: true}
	if len(images) == 0 {
		return tc
	}
	for _, im := range images {
		tc.Parts = append(tc.Parts, contentPart{ImageURL: "data:;base64," + im, Image: true})
	}
	tc.Parts = append(tc.Parts, contentPart{Text: text})
	return tc
}

// handleOllamaChat answers POST /api/chat.
func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) *apiError {
	var req ollamaChatRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	creq, e := req.chatRequest()
	if e != nil {
		return e
	}
	creq.Tools = req.Tools
	for i, m := range req.Messages {
		cm := chatMessage{Role: m.Role, Content: ollamaImages(m.Content, m.Images), ReasoningContent: m.Thinking}
		for k, c := range m.ToolCalls {
			var tc toolCall
			tc.ID, tc.Type, tc.Function.Name = fmt.Sprintf("call_%d_%d", i, k), "function", c.Function.Name
			args := bytes.TrimSpace(c.Function.Arguments)
			if len(args) == 0 {
				args = []byte("{}")
			}
			tc.Function.Arguments = string(args)
			cm.ToolCalls = append(cm.ToolCalls, tc)
		}
		cm.Name = m.ToolName
		creq.Messages = append(creq.Messages, cm)
	}
	return s.ollamaRun(w, r, creq, true)
}

// handleOllamaGenerate answers POST /api/generate: a prompt (and a
// system prompt) rendered through the chat template, or sent as it is
// with "raw": true.
func (s *Server) handleOllamaGenerate(w http.ResponseWriter, r *http.Request) *apiError {
	var req ollamaGenerateRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	creq, e := req.chatRequest()
	if e != nil {
		return e
	}
	if e := s.checkModel(creq.Model); e != nil {
		return e
	}
	if req.Prompt == "" && len(req.Images) == 0 {
		// Ollama's way to load a model: nothing to generate
		writeJSON(w, http.StatusOK, map[string]any{"model": s.id, "created_at": ollamaNow(), "response": "", "done": true, "done_reason": "load"})
		return nil
	}
	if req.Raw {
		return s.ollamaRaw(w, r, &req, creq)
	}
	if req.System != "" {
		creq.Messages = append(creq.Messages, chatMessage{Role: "system", Content: textContent{Text: req.System, Set: true}})
	}
	creq.Messages = append(creq.Messages, chatMessage{Role: "user", Content: ollamaImages(req.Prompt, req.Images)})
	return s.ollamaRun(w, r, creq, false)
}

// ollamaRaw generates from the prompt as it is, with no template.
func (s *Server) ollamaRaw(w http.ResponseWriter, r *http.Request, req *ollamaGenerateRequest, creq *chatRequest) *apiError {
	if len(req.Images) > 0 {
		return badRequest("images", "images need the chat template: drop \"raw\": true")
	}
	p, stops, limit, e := creq.params(s.m.GenerationDefaults(), s.tokenBound(&creq.genFields))
	if e != nil {
		return e
	}
	ids, err := s.m.Encode(req.Prompt, false)
	if err != nil {
		return badRequest("prompt", "%v", err)
	}
	shift, e := creq.shift(s.opts.ContextShift, s.ctx)
	if e != nil {
		return e
	}
	if e := s.checkPrompt(ids, limit, shift); e != nil {
		return e
	}
	j := job{ids: ids, req: aotlm.Request{IDs: ids, MaxTokens: limit, Sampling: p, Stop: stops, StopIDs: s.eot, ContextShift: shift}}
	if e := s.speculate(&j, &creq.genFields); e != nil {
		return e
	}
	grammar, e := s.outputGrammar(&creq.genFields)
	if e != nil {
		return e
	}
	cons := &constraints{}
	if grammar != nil {
		budget := limit
		if budget == 0 {
			budget = s.ctx - len(ids)
		}
		cons.mask = s.grammarMask(grammar, budget, append(s.m.StopIDs(), s.eot...))
		if e := s.checkRoom(cons.mask, limit, budget, creq.limitName(), grammarName(&creq.genFields)); e != nil {
			return e
		}
		j.req.Logits = cons.mask.Apply
	}
	return s.ollamaGenerate(w, r, j, cons, creq.Stream, false)
}

// ollamaRun renders a chat request and answers it in Ollama's shape: a
// message (chat) or a response string (generate).
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, creq *chatRequest, chat bool) *apiError {
	j, _, cons, e := s.chatJob(creq)
	if e != nil {
		return e
	}
	return s.ollamaGenerate(w, r, j, cons, creq.Stream, chat)
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request, j job, cons *constraints, stream, chat bool) *apiError {
	sl, e := s.acquire(r.Context(), j.ids, j.adapter)
	if e != nil {
		return e
	}
	defer s.pool.release(sl)
	start := time.Now()
	// part is one reply object: text (and thinking) so far or at the end
	part := func(reasoning, content string, calls []toolCall) map[string]any {
		out := map[string]any{"model": s.id, "created_at": ollamaNow()}
		if chat {
			msg := map[string]any{"role": "assistant", "content": content}
			if reasoning != "" {
				msg["thinking"] = reasoning
			}
			if len(calls) > 0 {
				msg["tool_calls"] = ollamaCalls(calls)
			}
			out["message"] = msg
		} else {
			out["response"] = content
			if reasoning != "" {
				out["thinking"] = reasoning
			}
		}
		return out
	}
	final := func(out map[string]any, rp *reply) map[string]any {
		reason := rp.finish
		if reason == "tool_calls" {
			reason = "stop"
		}
		res := rp.res
		out["done"], out["done_reason"] = true, reason
		out["total_duration"] = time.Since(start).Nanoseconds()
		out["load_duration"] = 0
		out["prompt_eval_count"] = len(res.PromptIDs) - res.Reused
		out["prompt_eval_duration"] = res.Prefill.Nanoseconds()
		out["eval_count"] = len(res.IDs)
		out["eval_duration"] = res.Decode.Nanoseconds()
		return out
	}
	if !stream {
		rp, err := s.generateReply(r.Context(), sl, j, cons, nil)
		if err != nil {
			return generationError(err)
		}
		writeJSON(w, http.StatusOK, final(part(rp.reasoning, rp.content, rp.calls), rp))
		return nil
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	line := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
		return rc.Flush()
	}
	rp, err := s.generateReply(r.Context(), sl, j, cons, func(reasoning, content string) error {
		out := part(reasoning, content, nil)
		out["done"] = false
		return line(out)
	})
	if err != nil {
		if r.Context().Err() == nil {
			line(map[string]string{"error": generationError(err).Message})
		}
		return nil
	}
	if len(rp.calls) > 0 {
		out := part("", "", rp.calls)
		out["done"] = false
		line(out)
	}
	line(final(part("", "", nil), rp))
	return nil
}

// ollamaCalls turns parsed calls into Ollama's tool_calls (arguments as
// an object).
func ollamaCalls(calls []toolCall) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		out[i].Function.Name = c.Function.Name
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		out[i].Function.Arguments = args
	}
	return out
}

func ollamaNow() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// ollamaDetails describes the model as Ollama's model lists do.
func (s *Server) ollamaDetails() map[string]any {
	arch := s.m.Info().Architecture
	return map[string]any{"parent_model": "", "format": "aotlm", "family": arch, "families": []string{arch},
		"parameter_size": "", "quantization_level": ""}
}

// ollamaModel is the model's entry in /api/tags and /api/ps.
func (s *Server) ollamaModel() map[string]any {
	return map[string]any{"name": s.id, "model": s.id, "modified_at": s.metrics.start.UTC().Format(time.RFC3339),
		"size": 0, "digest": "", "details": s.ollamaDetails()}
}

// handleOllamaTags answers GET /api/tags: the served model.
func (s *Server) handleOllamaTags(w http.ResponseWriter, r *http.Request) *apiError {
	writeJSON(w, http.StatusOK, map[string]any{"models": []any{s.ollamaModel()}})
	return nil
}

// handleOllamaPS answers GET /api/ps: the served model, loaded for as
// long as the server runs.
func (s *Server) handleOllamaPS(w http.ResponseWriter, r *http.Request) *apiError {
	m := s.ollamaModel()
	m["expires_at"] = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	m["size_vram"] = 0
	m["context_length"] = s.ctx
	writeJSON(w, http.StatusOK, map[string]any{"models": []any{m}})
	return nil
}

// handleOllamaShow answers POST /api/show.
func (s *Server) handleOllamaShow(w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if e := s.checkModel(strings.TrimSuffix(name, ":latest")); e != nil {
		return e
	}
	info := s.m.Info()
	src := s.m.ChatTemplateSource()
	caps := []string{"completion"}
	if s.m.CanEmbed() && s.m.Pooling() != "" {
		caps = []string{"embedding"}
	}
	if strings.Contains(src, "tools") {
		caps = append(caps, "tools")
	}
	if strings.Contains(src, thinkClose) {
		caps = append(caps, "thinking")
	}
	if s.opts.Images != nil {
		caps = append(caps, "vision")
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"modelfile": "", "parameters": "", "template": src, "details": s.ollamaDetails(),
		"model_info": map[string]any{"general.architecture": info.Architecture,
			info.Architecture + ".context_length": s.ctx, "tokenizer.vocab_size": info.Vocab},
		"capabilities": caps, "modified_at": s.metrics.start.UTC().Format(time.RFC3339),
	})
	return nil
}

// handleOllamaVersion answers GET /api/version.
func (s *Server) handleOllamaVersion(w http.ResponseWriter, r *http.Request) *apiError {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
	return nil
}

// writeOllamaError writes e in Ollama's shape: {"error": "..."}.
func writeOllamaError(w http.ResponseWriter, e *apiError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	writeJSON(w, e.Status, map[string]string{"error": e.Message})
}
