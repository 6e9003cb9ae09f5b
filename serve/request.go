package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/aotlm/aotlm"
)

// genFields are the generation fields chat and text completions share.
type genFields struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MinP                *float64        `json:"min_p"`
	TopK                *int            `json:"top_k"`
	Seed                *int64          `json:"seed"`
	Stop                stopList        `json:"stop"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	RepeatPenalty       *float64        `json:"repeat_penalty"`
	N                   *int            `json:"n"`
	LogitBias           json.RawMessage `json:"logit_bias"`
	// IgnoreEOS keeps generating past the end-of-sequence token
	// (llama-server's field; for benchmarks).
	IgnoreEOS bool `json:"ignore_eos"`
	// Adapter chooses a loaded low-rank adapter (as "model:adapter" in
	// the model field does).
	Adapter string `json:"adapter"`
	// ContextShift lets generation go on past a full context, dropping
	// older tokens (aotlm.ContextShift); unset, the server's default
	// (Options.ContextShift). NKeep is the tokens at the start that are
	// never dropped (-1, the default: the prompt); llama-server's field.
	ContextShift *bool `json:"context_shift"`
	NKeep        *int  `json:"n_keep"`
	// Grammar keeps the reply to a grammar in GBNF (llama-server's
	// field; constrain.ParseGBNF tells the subset), Regex to a regular
	// expression matching the whole reply (RE2 syntax).
	Grammar string `json:"grammar"`
	Regex   string `json:"regex"`
	// Speculative chooses speculative decoding ({"type": "lookup",
	// "n_max": 8}; SpecLookup, SpecDraft, SpecMTP, SpecNone); unset, the
	// server's default (Options.Speculative). llama-server's flat keys
	// ("speculative.n_max") are read too.
	Speculative *specField `json:"speculative"`
	specFlat
	// limitField names the reply's token limit in the request's own API
	// (max_tokens unless set), for errors about it.
	limitField string
}

// limitName is the request's name of the reply's token limit.
func (g *genFields) limitName() string {
	switch {
	case g.limitField != "":
		return g.limitField
	case g.MaxTokens == nil && g.MaxCompletionTokens != nil:
		return "max_completion_tokens"
	}
	return "max_tokens"
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatRequest is the body of /v1/chat/completions.
type chatRequest struct {
	genFields
	Messages       []chatMessage   `json:"messages"`
	Logprobs       bool            `json:"logprobs"`
	TopLogprobs    *int            `json:"top_logprobs"`
	ResponseFormat *responseFormat `json:"response_format"`
	Tools          []tool          `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	// ChatTemplateKwargs are extra chat template variables, such as
	// enable_thinking (vLLM's and llama-server's field).
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	// ReasoningEffort switches the thinking off ("none", "minimal") or
	// on ("low", "medium", "high") where chat_template_kwargs does not.
	ReasoningEffort string `json:"reasoning_effort"`
	// ThinkingBudget bounds the thinking, in tokens: then the thinking
	// is closed and the model answers.
	ThinkingBudget *int `json:"thinking_budget_tokens"`
}

// completionRequest is the body of /v1/completions.
type completionRequest struct {
	genFields
	Prompt   promptField `json:"prompt"`
	Logprobs *int        `json:"logprobs"`
	Echo     bool        `json:"echo"`
}

// chatMessage is one message; content is a string or an array of parts.
type chatMessage struct {
	Role       string      `json:"role"`
	Content    textContent `json:"content"`
	Name       string      `json:"name,omitempty"`
	ToolCalls  []toolCall  `json:"tool_calls,omitempty"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant turn's thinking.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	} `json:"json_schema"`
}

type tool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// textContent is a message's content: a string, null, or an array of
// {"type": "text", "text": ...} parts (joined) and {"type": "image_url",
// "image_url": {"url": ...}} parts (kept in Parts, in order with the
// text, when there is one).
type textContent struct {
	Text  string
	Set   bool
	Parts []contentPart // nil without image parts
}

func (c *textContent) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		c.Set = true
		return json.Unmarshal(data, &c.Text)
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return &fieldError{"content", "want a string or an array of text and image_url parts"}
	}
	var b strings.Builder
	var all []contentPart
	images := false
	for _, p := range parts {
		switch {
		case p.Type == "text" && p.Text != nil:
			b.WriteString(*p.Text)
			all = append(all, contentPart{Text: *p.Text})
		case p.Type == "image_url":
			url, err := imageURL(p.ImageURL)
			if err != nil {
				return err
			}
			all = append(all, contentPart{ImageURL: url, Image: true})
			images = true
		default:
			return &fieldError{"content", fmt.Sprintf("a part of type %q: only text and image_url parts are supported", p.Type)}
		}
	}
	c.Text, c.Set = b.String(), true
	if images {
		c.Parts = all
	}
	return nil
}

func (c textContent) MarshalJSON() ([]byte, error) {
	if !c.Set {
		return []byte("null"), nil
	}
	return json.Marshal(c.Text)
}

// stopList is "stop": a string, an array of strings, or null.
type stopList []string

func (s *stopList) UnmarshalJSON(data []byte) error {
	return textOrList(data, (*[]string)(s), func(t string) string { return t }, &fieldError{"stop", "want a string or an array of strings"})
}

// textOrList decodes a JSON string (one item, made by fromText) or an
// array of items into dst; null leaves dst as it is, and anything else
// is bad.
func textOrList[T any](data []byte, dst *[]T, fromText func(string) T, bad error) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var text string
		if err := json.Unmarshal(data, &text); err != nil {
			return bad
		}
		*dst = []T{fromText(text)}
		return nil
	}
	var list []T
	if err := json.Unmarshal(data, &list); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return err
		}
		return bad
	}
	*dst = list
	return nil
}

// promptField is a completion prompt: a string, an array of one string,
// or an array of token ids.
type promptField struct {
	Text string
	IDs  []int
	Set  bool
}

func (p *promptField) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	p.Set = true
	if len(data) > 0 && data[0] == '"' {
		return json.Unmarshal(data, &p.Text)
	}
	var texts []string
	if err := json.Unmarshal(data, &texts); err == nil {
		if len(texts) != 1 {
			return &fieldError{"prompt", fmt.Sprintf("an array of %d prompts: send one prompt per request", len(texts))}
		}
		p.Text = texts[0]
		return nil
	}
	var ids []int
	if err := json.Unmarshal(data, &ids); err == nil {
		if len(ids) == 0 {
			return &fieldError{"prompt", "an empty array of token ids"}
		}
		p.IDs = ids
		return nil
	}
	return &fieldError{"prompt", "want a string, an array of one string, or an array of token ids"}
}

// maxLogitBias bounds the size of a logit_bias map.
const maxLogitBias = 1024

// logitBias reads logit_bias: token ids (as JSON keys) to a bias in
// [-100, 100] added to their logits at every step; -100 bans the token.
func (g *genFields) logitBias(vocab int) (map[int]float32, *apiError) {
	if len(g.LogitBias) == 0 || string(g.LogitBias) == "null" {
		return nil, nil
	}
	var raw map[string]float64
	if json.Unmarshal(g.LogitBias, &raw) != nil {
		return nil, badRequest("logit_bias", "logit_bias: want an object of token ids to numbers")
	}
	if len(raw) > maxLogitBias {
		return nil, badRequest("logit_bias", "logit_bias has %d tokens: at most %d", len(raw), maxLogitBias)
	}
	bias := map[int]float32{}
	for k, v := range raw {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= vocab {
			return nil, badRequest("logit_bias", "logit_bias: %q is not a token id of the vocabulary of %d", k, vocab)
		}
		if !(v >= -100 && v <= 100) {
			return nil, badRequest("logit_bias", "logit_bias of token %d is %v: want a number in [-100, 100]", id, v)
		}
		bias[id] = float32(v)
	}
	return bias, nil
}

// withBias adds bias to the logits before next (the constraint and the
// log-probabilities) sees them.
func withBias(bias map[int]float32, next func([]float32, []int)) func([]float32, []int) {
	if len(bias) == 0 {
		return next
	}
	ban := float32(math.Inf(-1))
	return func(l []float32, g []int) {
		for id, b := range bias {
			if b <= -100 {
				l[id] = ban
			} else {
				l[id] += b
			}
		}
		if next != nil {
			next(l, g)
		}
	}
}

// Limits of the fields (the context bounds the token counts).
const (
	maxStops       = 16
	maxStopLen     = 256
	maxTopLogprobs = 20
	maxChoices     = 8 // n
)

// maxShiftTokens bounds max_tokens of a request with a context shift.
const maxShiftTokens = 1 << 24

// tokenBound is the most tokens g may ask for: the context, or with a
// context shift maxShiftTokens.
func (s *Server) tokenBound(g *genFields) int {
	if (g.ContextShift == nil && s.opts.ContextShift) || (g.ContextShift != nil && *g.ContextShift) {
		return maxShiftTokens
	}
	return s.ctx
}

// shift is the request's context shift, nil when off; def is the
// server's default and ctx the session's context.
func (g *genFields) shift(def bool, ctx int) (*aotlm.ContextShift, *apiError) {
	keep := -1
	if g.NKeep != nil {
		if *g.NKeep < -1 || *g.NKeep >= ctx {
			return nil, badRequest("n_keep", "n_keep %d must be -1 (the prompt) or in [0, %d)", *g.NKeep, ctx)
		}
		keep = *g.NKeep
	}
	if g.ContextShift != nil {
		def = *g.ContextShift
	}
	if !def {
		return nil, nil
	}
	return &aotlm.ContextShift{Keep: keep}, nil
}

// params checks the generation fields and turns them into sampling
// parameters, stop strings and a token limit (0: until the context is
// full), using the model's generation defaults for what is not set.
func (g *genFields) params(defaults aotlm.GenerationDefaults, ctx int) (aotlm.Sampling, []string, int, *apiError) {
	p := aotlm.Sampling{Temperature: 1, TopP: 1}
	chosen := aotlm.SamplingSet{Temperature: g.Temperature != nil, TopP: g.TopP != nil, TopK: g.TopK != nil,
		MinP: g.MinP != nil, RepeatPenalty: g.RepeatPenalty != nil}
	p = defaults.Apply(p, chosen)
	if g.N != nil && (*g.N < 1 || *g.N > maxChoices) {
		return p, nil, 0, badRequest("n", "n is %d: want 1 to %d choices", *g.N, maxChoices)
	}
	if g.Temperature != nil {
		if !(*g.Temperature >= 0 && *g.Temperature <= 2) {
			return p, nil, 0, badRequest("temperature", "temperature %v must be in [0, 2]", *g.Temperature)
		}
		p.Temperature = float32(*g.Temperature)
	}
	if g.TopP != nil {
		if !(*g.TopP >= 0 && *g.TopP <= 1) {
			return p, nil, 0, badRequest("top_p", "top_p %v must be in [0, 1]", *g.TopP)
		}
		p.TopP = float32(*g.TopP)
	}
	if g.MinP != nil {
		if !(*g.MinP >= 0 && *g.MinP <= 1) {
			return p, nil, 0, badRequest("min_p", "min_p %v must be in [0, 1]", *g.MinP)
		}
		p.MinP = float32(*g.MinP)
	}
	if g.TopK != nil {
		if *g.TopK < 0 {
			return p, nil, 0, badRequest("top_k", "top_k %d must be >= 0", *g.TopK)
		}
		p.TopK = *g.TopK
	}
	if g.PresencePenalty != nil {
		if !(*g.PresencePenalty >= -2 && *g.PresencePenalty <= 2) {
			return p, nil, 0, badRequest("presence_penalty", "presence_penalty %v must be in [-2, 2]", *g.PresencePenalty)
		}
		p.PresencePenalty = float32(*g.PresencePenalty)
	}
	if g.FrequencyPenalty != nil {
		if !(*g.FrequencyPenalty >= -2 && *g.FrequencyPenalty <= 2) {
			return p, nil, 0, badRequest("frequency_penalty", "frequency_penalty %v must be in [-2, 2]", *g.FrequencyPenalty)
		}
		p.FrequencyPenalty = float32(*g.FrequencyPenalty)
	}
	if g.RepeatPenalty != nil {
		if !(*g.RepeatPenalty >= 0 && *g.RepeatPenalty <= 10) {
			return p, nil, 0, badRequest("repeat_penalty", "repeat_penalty %v must be in [0, 10]", *g.RepeatPenalty)
		}
		p.RepeatPenalty = float32(*g.RepeatPenalty)
	}
	if g.Seed != nil {
		p.Seed = uint64(*g.Seed)
	} else {
		p.Seed = rand.Uint64()
	}
	if len(g.Stop) > maxStops {
		return p, nil, 0, badRequest("stop", "%d stop strings: at most %d", len(g.Stop), maxStops)
	}
	for _, s := range g.Stop {
		if len(s) > maxStopLen {
			return p, nil, 0, badRequest("stop", "a stop string of %d bytes: at most %d", len(s), maxStopLen)
		}
	}
	limit := 0
	field, mt := "max_tokens", g.MaxTokens
	if g.MaxCompletionTokens != nil {
		field, mt = "max_completion_tokens", g.MaxCompletionTokens
	}
	if mt != nil {
		switch {
		case *mt < 1:
			return p, nil, 0, badRequest(field, "%s %d must be >= 1", field, *mt)
		case *mt > ctx:
			return p, nil, 0, badRequest(field, "%s %d is more than the context of %d tokens", field, *mt, ctx)
		}
		limit = *mt
	}
	if err := p.Validate(); err != nil {
		return p, nil, 0, badRequest("", "%v", err)
	}
	return p, g.Stop, limit, nil
}

// number reads a generation default stored as a JSON number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x)
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
