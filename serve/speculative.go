package serve

import (
	"errors"
	"fmt"
	"sync"

	"github.com/aotlm/aotlm"
)

// Speculation types of Options.Speculative and of a request's
// speculative.type.
const (
	SpecNone   = "none"   // one token per pass
	SpecLookup = "lookup" // prompt lookup: drafts from the prompt and the reply
	SpecDraft  = "draft"  // a draft model (Options.Draft)
	SpecMTP    = "mtp"    // the model's own multi-token-prediction head
)

// specField is a request's speculative object: {"type": "lookup",
// "n_max": 8, "n_min": 1, "p_min": 0.5}; every field may be left out.
type specField struct {
	Type *string  `json:"type"`
	NMax *int     `json:"n_max"`
	NMin *int     `json:"n_min"`
	PMin *float64 `json:"p_min"`
}

// specFlat are llama-server's flat keys of the same fields
// ("speculative.n_max"), which genFields holds beside the object.
type specFlat struct {
	SpecType *string  `json:"speculative.type"`
	SpecNMax *int     `json:"speculative.n_max"`
	SpecNMin *int     `json:"speculative.n_min"`
	SpecPMin *float64 `json:"speculative.p_min"`
}

// specKey is one configuration of a strategy; the server keeps one
// Strategy per configuration, so that their cost estimates carry from
// request to request.
type specKey struct {
	typ        string
	nmax, nmin int
	pmin       float64
}

// maxSpecKeys bounds the configurations the server keeps strategies of;
// requests past it get a strategy of their own.
const maxSpecKeys = 64

// speculation holds the server's strategies.
type speculation struct {
	mu    sync.Mutex
	byKey map[specKey]*aotlm.Strategy
}

// checkSpeculative refuses an Options.Speculative the server cannot
// run.
func checkSpeculative(m *aotlm.Model, o Options) error {
	switch o.Speculative {
	case "", SpecNone, SpecLookup:
	case SpecDraft:
		if o.Draft == nil {
			return errors.New("serve: Speculative \"draft\" needs a draft model (Options.Draft)")
		}
		if err := m.CheckDraft(o.Draft); err != nil {
			return fmt.Errorf("serve: draft model: %w", err)
		}
	case SpecMTP:
		if !m.HasMTP() {
			return fmt.Errorf("serve: Speculative \"mtp\": %w", aotlm.ErrNoMTP)
		}
	default:
		return fmt.Errorf("serve: Speculative %q: want %q, %q, %q or %q", o.Speculative, SpecNone, SpecLookup, SpecDraft, SpecMTP)
	}
	if o.DraftMax < 0 {
		return fmt.Errorf("serve: DraftMax %d must be >= 0", o.DraftMax)
	}
	return nil
}

// speculative returns the strategy a request asks for with its
// speculative fields, or the server's default; nil for plain decoding.
// explicit reports whether the request chose it itself (a request that
// also asks for logits, a grammar or a context shift is then refused
// rather than decoded plainly).
func (s *Server) speculative(g *genFields) (st *aotlm.Strategy, explicit bool, e *apiError) {
	k, explicit, e := g.specKey(specKey{typ: s.opts.Speculative, nmax: s.opts.DraftMax})
	if e != nil || k.typ == "" || k.typ == SpecNone {
		return nil, explicit, e
	}
	st, err := s.spec.strategy(s.m, s.opts.Draft, k, aotlm.Adapt{Off: s.opts.NoAdapt})
	if err != nil {
		return nil, false, badRequest("speculative.type", "%v", err)
	}
	return st, explicit, nil
}

// specKey reads the request's speculative fields (the object, or
// llama-server's flat keys) over def, the server's default, and reports
// whether the request set any. A type of "" or SpecNone, or an n_max of 0
// the request set, is plain decoding.
func (g *genFields) specKey(def specKey) (specKey, bool, *apiError) {
	k := def
	f := g.Speculative
	if f == nil {
		f = &specField{}
	}
	first := func(obj, flat *int) *int {
		if obj != nil {
			return obj
		}
		return flat
	}
	typ, nmax, nmin, pmin := f.Type, first(f.NMax, g.SpecNMax), first(f.NMin, g.SpecNMin), f.PMin
	if typ == nil {
		typ = g.SpecType
	}
	if pmin == nil {
		pmin = g.SpecPMin
	}
	explicit := typ != nil || nmax != nil || nmin != nil || pmin != nil
	if typ != nil {
		k.typ = *typ
	}
	if k.typ == "" && explicit {
		k.typ = SpecLookup // sizes alone ask for the cheapest strategy
	}
	switch k.typ {
	case "", SpecNone, SpecLookup, SpecDraft, SpecMTP:
	default:
		return k, false, badRequest("speculative.type", "speculative type %q: want %q, %q, %q or %q", k.typ, SpecNone, SpecLookup, SpecDraft, SpecMTP)
	}
	if nmax != nil {
		if *nmax < 0 || *nmax > 64 {
			return k, false, badRequest("speculative.n_max", "speculative.n_max %d must be in [0, 64]", *nmax)
		}
		k.nmax = *nmax
		if k.nmax == 0 {
			k.typ = SpecNone
		}
	}
	if nmin != nil {
		if *nmin < 0 || *nmin > 64 {
			return k, false, badRequest("speculative.n_min", "speculative.n_min %d must be in [0, 64]", *nmin)
		}
		k.nmin = *nmin
	}
	if pmin != nil {
		if !(*pmin >= 0 && *pmin <= 1) {
			return k, false, badRequest("speculative.p_min", "speculative.p_min %v must be in [0, 1]", *pmin)
		}
		k.pmin = *pmin
	}
	return k, explicit, nil
}

// strategy returns the strategy of k, made on first use.
func (sp *speculation) strategy(m, draft *aotlm.Model, k specKey, a aotlm.Adapt) (*aotlm.Strategy, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if st, ok := sp.byKey[k]; ok {
		return st, nil
	}
	var st *aotlm.Strategy
	var err error
	switch k.typ {
	case SpecLookup:
		st, err = aotlm.PromptLookup(aotlm.LookupOptions{DraftMax: k.nmax, DraftMin: k.nmin, Adapt: a})
	case SpecDraft:
		if draft == nil {
			return nil, errors.New("speculative type \"draft\": the server has no draft model (serve --draft FILE)")
		}
		st, err = m.DraftStrategy(draft, aotlm.DraftOptions{DraftMax: k.nmax, DraftMin: k.nmin, PMin: k.pmin, Adapt: a})
	case SpecMTP:
		st, err = m.MTPStrategy(aotlm.MTPOptions{DraftMax: k.nmax, DraftMin: k.nmin, Adapt: a})
	default:
		return nil, fmt.Errorf("speculative type %q: want %q, %q, %q or %q", k.typ, SpecNone, SpecLookup, SpecDraft, SpecMTP)
	}
	if err != nil {
		return nil, err
	}
	if sp.byKey == nil {
		sp.byKey = map[specKey]*aotlm.Strategy{}
	}
	if len(sp.byKey) < maxSpecKeys {
		sp.byKey[k] = st
	}
	return st, nil
}

// speculate sets j's strategy from the request's speculative fields or
// the server's default. The strategies choose tokens without a logits
// hook and stop at a full context, so a job with a hook (logprobs,
// logit_bias, a grammar or response format, tools), a context shift or
// images decodes plainly, or, when the request asked to speculate, is
// refused.
func (s *Server) speculate(j *job, g *genFields) *apiError {
	st, explicit, e := s.speculative(g)
	if e != nil || st == nil {
		return e
	}
	if j.req.Logits != nil || j.req.ContextShift != nil || j.req.Embeds != nil {
		if explicit {
			return badRequest("speculative", "speculative decoding cannot be combined with logprobs, logit_bias, a grammar, a response format, tools, images or a context shift")
		}
		return nil
	}
	j.req.Strategy = st
	return nil
}

// specUsage is usage.speculative: what speculative decoding did in a
// request (summed over its choices). DraftTokens are the guessed tokens
// offered for verification, AcceptedTokens those kept (llama-server's
// draft_n and draft_n_accepted, vLLM's num_draft_tokens and
// num_accepted_tokens); Passes are the model passes that chose the
// reply's tokens, VerifyPasses those among them that verified guesses,
// TokensPerPass the tokens chosen per pass; Fallbacks counts the switches
// to plain decoding because guessing did not pay.
type specUsage struct {
	Type           string  `json:"type"`
	DraftTokens    int     `json:"draft_tokens"`
	AcceptedTokens int     `json:"accepted_tokens"`
	AcceptanceRate float64 `json:"acceptance_rate"`
	Passes         int     `json:"passes"`
	VerifyPasses   int     `json:"verify_passes"`
	TokensPerPass  float64 `json:"tokens_per_pass"`
	Fallbacks      int     `json:"fallbacks"`
	Note           string  `json:"note,omitempty"`
	tokens         int
}

// add counts one more result's decoding into u (nil: a new one).
func (u *specUsage) add(d *aotlm.DecodingStats) *specUsage {
	if d == nil {
		return u
	}
	if u == nil {
		u = &specUsage{Type: d.Strategy, Note: d.Note}
	}
	u.DraftTokens += d.Drafted
	u.AcceptedTokens += d.Accepted
	u.Passes += d.Passes
	u.VerifyPasses += d.Verify
	u.Fallbacks += d.Fallbacks
	u.tokens += d.Tokens
	u.AcceptanceRate, u.TokensPerPass = 0, 0
	if u.DraftTokens > 0 {
		u.AcceptanceRate = float64(u.AcceptedTokens) / float64(u.DraftTokens)
	}
	if u.Passes > 0 {
		u.TokensPerPass = float64(u.tokens) / float64(u.Passes)
	}
	return u
}

// predictionDetails is OpenAI's completion_tokens_details for drafted
// tokens: the accepted and the rejected ones.
type predictionDetails struct {
	Accepted int `json:"accepted_prediction_tokens"`
	Rejected int `json:"rejected_prediction_tokens"`
}
