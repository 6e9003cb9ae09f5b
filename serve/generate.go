package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// job is one generation a handler asks for.
type job struct {
	ids []int
	req aotlm.Request
	// onToken, when set, sees each token as it is generated.
	onToken func(aotlm.Token)
	// adapter is the low-rank adapter the request chooses ("" for none).
	adapter string
}

// checkPrompt refuses a prompt that does not fit the context, and a
// limit that does not either unless shift (a context shift makes room).
func (s *Server) checkPrompt(ids []int, limit int, shift *aotlm.ContextShift) *apiError {
	if len(ids) == 0 {
		return badRequest("", "the prompt is empty")
	}
	if len(ids) >= s.ctx {
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded",
			Message: fmt.Sprintf("the prompt is %d tokens; the context holds %d, with room for at least one more", len(ids), s.ctx)}
	}
	if limit > 0 && len(ids)+limit > s.ctx && shift == nil {
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded",
			Message: fmt.Sprintf("the prompt (%d tokens) and max_tokens (%d) exceed the context of %d tokens", len(ids), limit, s.ctx)}
	}
	return nil
}

// acquire takes a session for ids with the adapter a applied ("" for
// none), or answers why not.
func (s *Server) acquire(ctx context.Context, ids []int, a string) (*slot, *apiError) {
	sl, err := s.pool.acquire(ctx, ids, adapterScope(scopeOf(ctx), a))
	switch {
	case errors.Is(err, errBusy):
		return nil, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_busy",
			Message: err.Error() + "; retry later", RetryAfter: 1}
	case err != nil && ctx.Err() == nil:
		return nil, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
	case err != nil:
		return nil, &apiError{Status: 499, Type: "invalid_request_error", Code: "client_closed", Message: "the client went away while the request waited"}
	}
	// the adapter first: a change empties the session, which the prompt
	// cache may then fill with a cache of the same scope (and adapter)
	if e := useAdapter(sl, a); e != nil {
		s.pool.release(sl)
		return nil, e
	}
	s.cache.restore(sl, sl.scope, ids)
	return sl, nil
}

// run generates j on sl, counting tokens into the metrics.
func (s *Server) run(ctx context.Context, sl *slot, j job, onToken func(aotlm.Token) error) (*aotlm.Result, error) {
	s.metrics.active.Add(1)
	defer s.metrics.active.Add(-1)
	res, err := sl.s.Generate(ctx, j.req, func(t aotlm.Token) error {
		if t.ID >= 0 {
			s.metrics.token()
		}
		if j.onToken != nil {
			j.onToken(t)
		}
		if onToken != nil {
			return onToken(t)
		}
		return nil
	})
	if res != nil {
		s.metrics.result(res)
	}
	if err != nil && ctx.Err() != nil {
		s.metrics.cancelled.Add(1)
	}
	return res, err
}

// finishReason maps a stop reason to OpenAI's finish_reason.
func finishReason(r string) string {
	switch r {
	case aotlm.StopLength, aotlm.StopContext:
		return "length"
	}
	return "stop"
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	PromptDetails    struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// ContextShift is there when the context filled and a context shift
	// made room (context_shift in the request).
	ContextShift *shiftUsage `json:"context_shift,omitempty"`
	// CompletionDetails and Speculative are there when the request
	// decoded speculatively.
	CompletionDetails *predictionDetails `json:"completion_tokens_details,omitempty"`
	Speculative       *specUsage         `json:"speculative,omitempty"`
}

// shiftUsage tells what context shifts did: how many, and the tokens they
// dropped from the session's cache in all.
type shiftUsage struct {
	Shifts        int `json:"shifts"`
	DroppedTokens int `json:"dropped_tokens"`
}

func usageOf(res *aotlm.Result) *usage {
	u := &usage{PromptTokens: len(res.PromptIDs), CompletionTokens: len(res.IDs)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptDetails.CachedTokens = res.Reused
	if res.Shifts > 0 {
		u.ContextShift = &shiftUsage{Shifts: res.Shifts, DroppedTokens: res.Shifted}
	}
	u.addSpeculative(res)
	return u
}

// addSpeculative counts res's speculative decoding into u.
func (u *usage) addSpeculative(res *aotlm.Result) {
	if res.Decoding == nil {
		return
	}
	u.Speculative = u.Speculative.add(res.Decoding)
	u.CompletionDetails = &predictionDetails{Accepted: u.Speculative.AcceptedTokens,
		Rejected: u.Speculative.DraftTokens - u.Speculative.AcceptedTokens}
}

// addUsage adds the tokens of one more choice of a request to u (nil
// for the first): the prompt counts once, with the cached tokens of the
// first choice, and the completion tokens add up.
func addUsage(u *usage, res *aotlm.Result) *usage {
	if u == nil {
		return usageOf(res)
	}
	u.CompletionTokens += len(res.IDs)
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.addSpeculative(res)
	return u
}

// sse writes server-sent events.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

func (e *sse) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "data: %s\n\n", b); err != nil {
		return err
	}
	return e.rc.Flush()
}

func (e *sse) done() {
	fmt.Fprint(e.w, "data: [DONE]\n\n")
	e.rc.Flush()
}

// logprobs records each step's logits (through Request.Logits) and turns
// the chosen id into OpenAI's logprob entry.
type logprobs struct {
	tok    tokenizer.Tokenizer
	top    int
	logits []float32
}

// hook is the Request.Logits callback.
func (l *logprobs) hook(logits []float32, _ []int) { l.logits = logits }

type logprobEntry struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

// topLogprob is one of the most likely tokens at a step.
type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// entry returns the log-probability entry of id under the last logits.
func (l *logprobs) entry(id int) logprobEntry {
	lg := l.logits
	mx := float32(math.Inf(-1))
	for _, v := range lg {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range lg {
		sum += math.Exp(float64(v - mx))
	}
	lse := float64(mx) + math.Log(sum)
	e := l.piece(id, float64(lg[id])-lse)
	e.TopLogprobs = []topLogprob{}
	if l.top > 0 {
		idx := make([]int, 0, l.top+1)
		for i, v := range lg {
			if len(idx) < l.top || v > lg[idx[len(idx)-1]] {
				j, _ := slices.BinarySearchFunc(idx, v, func(a int, v float32) int {
					if lg[a] > v {
						return -1
					}
					return 1
				})
				idx = slices.Insert(idx, j, i)
				if len(idx) > l.top {
					idx = idx[:l.top]
				}
			}
		}
		for _, i := range idx {
			t := l.piece(i, float64(lg[i])-lse)
			e.TopLogprobs = append(e.TopLogprobs, topLogprob{t.Token, t.Logprob, t.Bytes})
		}
	}
	return e
}

func (l *logprobs) piece(id int, lp float64) logprobEntry {
	text := l.tok.Decode([]int{id})
	b := make([]int, len(text))
	for i := range len(text) {
		b[i] = int(text[i])
	}
	if !utf8.ValidString(text) {
		text = string([]rune(text)) // replacement characters, as OpenAI
	}
	if math.IsInf(lp, -1) {
		lp = -9999
	}
	return logprobEntry{Token: text, Logprob: lp, Bytes: b}
}

func unixNow() int64 { return time.Now().Unix() }

// tokEncodeRaw encodes text with no special tokens added.
var tokEncodeRaw = tokenizer.EncodeOptions{}
