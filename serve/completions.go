package serve

import (
	"net/http"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/constrain"
	"github.com/aotlm/aotlm/internal/modelparts"
)

type completionChoice struct {
	Text         string        `json:"text"`
	Index        int           `json:"index"`
	Logprobs     *textLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// textLogprobs is the legacy completions logprobs shape.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func (t *textLogprobs) add(e logprobEntry, offset int) {
	t.Tokens = append(t.Tokens, e.Token)
	t.TokenLogprobs = append(t.TokenLogprobs, e.Logprob)
	top := map[string]float64{}
	for _, x := range e.TopLogprobs {
		top[x.Token] = x.Logprob
	}
	t.TopLogprobs = append(t.TopLogprobs, top)
	t.TextOffset = append(t.TextOffset, offset)
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage,omitempty"`
}

// handleCompletions answers POST /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) *apiError {
	var req completionRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	a, e := s.adapterOf(req.Model, req.Adapter)
	if e != nil {
		return e
	}
	if !req.Prompt.Set {
		return badRequest("prompt", "prompt is missing")
	}
	if req.Echo {
		return badRequest("echo", "echo is not supported")
	}
	p, stops, limit, e := req.params(s.m.GenerationDefaults(), s.tokenBound(&req.genFields))
	if e != nil {
		return e
	}
	ids := req.Prompt.IDs
	if ids == nil {
		var err error
		if ids, err = s.m.Encode(req.Prompt.Text, false); err != nil {
			return badRequest("prompt", "%v", err)
		}
	}
	vocab := s.m.Info().Vocab
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return badRequest("prompt", "token id %d is outside the vocabulary of %d", id, vocab)
		}
	}
	shift, e := req.shift(s.opts.ContextShift, s.ctx)
	if e != nil {
		return e
	}
	if e := s.checkPrompt(ids, limit, shift); e != nil {
		return e
	}
	var lp *logprobs
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > maxTopLogprobs {
			return badRequest("logprobs", "logprobs %d must be in [0, %d]", *req.Logprobs, maxTopLogprobs)
		}
		lp = &logprobs{tok: modelparts.Tokenizer(s.m), top: *req.Logprobs}
	}
	grammar, e := s.outputGrammar(&req.genFields)
	if e != nil {
		return e
	}
	if grammar != nil && req.IgnoreEOS {
		return badRequest("ignore_eos", "ignore_eos cannot be used with a grammar: the reply ends where the grammar does")
	}
	if grammar != nil {
		budget := limit
		if budget == 0 {
			budget = s.ctx - len(ids)
		}
		if e := s.checkRoom(s.grammarMask(grammar, budget, nil), limit, budget, req.limitName(), grammarName(&req.genFields)); e != nil {
			return e
		}
	}
	j := job{ids: ids, req: aotlm.Request{IDs: ids, MaxTokens: limit, Sampling: p, Stop: stops, IgnoreEOS: req.IgnoreEOS, ContextShift: shift}}
	bias, e := req.logitBias(vocab)
	if e != nil {
		return e
	}
	// each choice gets its own mask (nil: free text)
	var mask *constrain.Mask
	newChoice := func() {
		var apply func([]float32, []int)
		if grammar != nil {
			budget := limit
			if budget == 0 {
				budget = s.ctx - len(ids)
			}
			j.req.StopIDs = s.eot
			mask = s.grammarMask(grammar, budget, append(s.m.StopIDs(), s.eot...))
			apply = mask.Apply
		}
		j.req.Logits = withBias(bias, chainLogits(apply, lp))
	}
	newChoice() // the first choice's hook tells whether speculation may run
	if e := s.speculate(&j, &req.genFields); e != nil {
		return e
	}
	finishOf := func(res *aotlm.Result) string {
		c := constraints{mask: mask}
		return c.finish(res)
	}
	sl, e := s.acquire(r.Context(), ids, a)
	if e != nil {
		return e
	}
	defer s.pool.release(sl)
	base := completionResponse{ID: newID("cmpl-"), Object: "text_completion", Created: unixNow(), Model: s.id, SystemFingerprint: fingerprint}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	// choice i runs with the seed after the previous choice's, on the
	// session whose cache holds the prompt: only the first prefills it
	seed := j.req.Sampling.Seed
	var total *usage
	if !req.Stream {
		for i := range n {
			j.req.Sampling.Seed = seed + uint64(i)
			newChoice()
			var tl *textLogprobs
			offset := 0
			if lp != nil {
				tl = &textLogprobs{}
			}
			res, err := s.run(r.Context(), sl, j, func(t aotlm.Token) error {
				if tl != nil && t.ID >= 0 {
					tl.add(lp.entry(t.ID), offset)
				}
				offset += len(t.Text)
				return nil
			})
			if err != nil {
				return generationError(err)
			}
			finish := finishOf(res)
			base.Choices = append(base.Choices, completionChoice{Text: res.Text, Index: i, Logprobs: tl, FinishReason: &finish})
			total = addUsage(total, res)
		}
		base.Usage = total
		writeJSON(w, http.StatusOK, base)
		return nil
	}
	ev := startSSE(w)
	for i := range n {
		j.req.Sampling.Seed = seed + uint64(i)
		newChoice()
		offset := 0
		res, err := s.run(r.Context(), sl, j, func(t aotlm.Token) error {
			var tl *textLogprobs
			if lp != nil && t.ID >= 0 {
				tl = &textLogprobs{}
				tl.add(lp.entry(t.ID), offset)
			}
			offset += len(t.Text)
			if t.Text == "" && tl == nil {
				return nil
			}
			c := base
			c.Choices = []completionChoice{{Text: t.Text, Index: i, Logprobs: tl}}
			return ev.send(c)
		})
		if err != nil {
			if r.Context().Err() == nil {
				ev.send(map[string]any{"error": generationError(err)})
			}
			return nil
		}
		finish := finishOf(res)
		c := base
		c.Choices = []completionChoice{{Index: i, FinishReason: &finish}}
		ev.send(c)
		total = addUsage(total, res)
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := base
		c.Choices = []completionChoice{}
		c.Usage = total
		ev.send(c)
	}
	ev.done()
	return nil
}
