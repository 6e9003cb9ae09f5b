package aotlm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
)

// Strategy decodes several tokens per pass: it guesses tokens and the
// model checks them in one pass, keeping those it would have chosen
// itself, so greedy output is the same as plain decoding's and sampled
// output keeps its distribution. Make one with Lookahead, PromptLookup,
// Model.DraftStrategy or Model.MTPStrategy and set it in
// Request.Strategy. One Strategy may
// serve many requests; it learns from their passes whether guessing pays.
type Strategy struct {
	impl decoding.Strategy
}

// Name is "lookahead", "lookup", "draft" or "mtp".
func (s *Strategy) Name() string { return s.impl.Name() }

// Adapt controls the fallback to plain decoding shared by the strategies.
type Adapt struct {
	// Off keeps guessing even when it is slower than plain decoding (by
	// default a strategy times its passes and decodes plainly for a while
	// when guessing costs more per token).
	Off bool
}

// LookaheadOptions configure Lookahead decoding. A pass holds
// (W+G)(N-1) rows; it runs on an artifact with a plan that wide (compile
// with --lookahead N,W,G), else decoding is plain.
type LookaheadOptions struct {
	// N is the n-gram size (>= 2), W the window of Jacobi columns guessed
	// per pass (>= 1), G the verification branches per pass (>= 1).
	N, W, G int
	Adapt   Adapt
}

// Rows is the number of rows of one lookahead pass, (W+G)(N-1).
func (o LookaheadOptions) Rows() int { return o.impl().Rows() }

func (o LookaheadOptions) impl() *decoding.Lookahead {
	return &decoding.Lookahead{N: o.N, W: o.W, G: o.G, Adaptive: decoding.Adaptive{Off: o.Adapt.Off}}
}

// Lookahead makes lookahead decoding: Jacobi iterations fill a pool of
// n-grams, and the n-grams that start with the newest token are verified
// in the same pass.
func Lookahead(o LookaheadOptions) (*Strategy, error) {
	l := o.impl()
	if err := l.Check(); err != nil {
		return nil, err
	}
	return &Strategy{impl: l}, nil
}

// LookupOptions configure PromptLookup. Zero sizes take the defaults.
type LookupOptions struct {
	// NgramMax and NgramMin bound the n-gram matched, longest first
	// (defaults 3 and 1).
	NgramMax, NgramMin int
	// DraftMax is the most tokens drafted per pass (default 8); DraftMin
	// the fewest worth a verify pass (default 1).
	DraftMax, DraftMin int
	// Corpus is more text, as token ids (Model.Encode), to find matches
	// in besides the prompt and the output.
	Corpus []int
	Adapt  Adapt
}

// PromptLookup makes prompt lookup decoding: it drafts the tokens that
// followed the latest earlier occurrence of the text's last n-gram.
func PromptLookup(o LookupOptions) (*Strategy, error) {
	switch {
	case o.NgramMax < 0 || o.NgramMin < 0 || o.DraftMax < 0 || o.DraftMin < 0:
		return nil, errors.New("lookup: n-gram and draft sizes must be >= 0")
	case o.NgramMax > 0 && o.NgramMin > o.NgramMax:
		return nil, fmt.Errorf("lookup: n-gram sizes %d..%d are reversed", o.NgramMin, o.NgramMax)
	}
	return &Strategy{impl: &decoding.Lookup{NgramMax: o.NgramMax, NgramMin: o.NgramMin, DraftMax: o.DraftMax,
		DraftMin: o.DraftMin, Corpus: append([]int(nil), o.Corpus...), Adaptive: decoding.Adaptive{Off: o.Adapt.Off}}}, nil
}

// DraftOptions configure Model.DraftStrategy.
type DraftOptions struct {
	// Context is the draft model's cache size (0: the smaller of the
	// two models').
	Context int
	// DraftMax is the most tokens drafted per pass (default 8); DraftMin
	// the fewest worth a verify pass (default 1).
	DraftMax, DraftMin int
	// PMin stops drafting at a token the draft model gives less
	// probability than this (0: never).
	PMin  float64
	Adapt Adapt
}

// DraftStrategy makes speculative decoding with a draft model: draft
// proposes tokens one by one, m verifies them in one pass. The two
// models must share their vocabulary (see CheckDraft); draft must stay
// open while the strategy is used.
func (m *Model) DraftStrategy(draft *Model, o DraftOptions) (*Strategy, error) {
	if err := m.CheckDraft(draft); err != nil {
		return nil, err
	}
	if o.DraftMax < 0 || o.DraftMin < 0 || !(o.PMin >= 0 && o.PMin <= 1) || o.Context < 0 {
		return nil, fmt.Errorf("draft: context %d and sizes %d, %d must be >= 0 and p-min %v in [0, 1]", o.Context, o.DraftMax, o.DraftMin, o.PMin)
	}
	ctx := o.Context
	if ctx == 0 {
		ctx = min(m.cfg.Info.Context, draft.cfg.Info.Context)
	}
	ctx = min(ctx, draft.cfg.Info.Context)
	seq := func() (decoding.DraftSequence, error) {
		s, err := draft.cfg.NewSequence(ctx)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return &Strategy{impl: &decoding.Draft{NewSequence: seq, DraftMax: o.DraftMax, DraftMin: o.DraftMin,
		PMin: o.PMin, Adaptive: decoding.Adaptive{Off: o.Adapt.Off}}}, nil
}

// MTPOptions configure Model.MTPStrategy. Zero sizes take the defaults.
type MTPOptions struct {
	// DraftMax is the most tokens the head drafts per pass (default 3);
	// DraftMin the fewest worth a verify pass (default 1).
	DraftMax, DraftMin int
	Adapt              Adapt
}

// ErrNoMTP is returned by Model.MTPStrategy for a model without a
// multi-token-prediction head.
var ErrNoMTP = errors.New("the model has no multi-token-prediction head (an artifact compiled from a checkpoint that ships one, such as Qwen3.5's)")

// HasMTP reports whether the model carries a multi-token-prediction head
// (MTPStrategy uses it).
func (m *Model) HasMTP() bool { return m.eng != nil && m.eng.MTP() != nil }

// MTPStrategy makes speculative decoding with the model's own
// multi-token-prediction head (Qwen3.5's, compiled into the artifact):
// the head drafts tokens one by one from the model's hidden state, the
// model verifies them in one pass. It needs no second model.
func (m *Model) MTPStrategy(o MTPOptions) (*Strategy, error) {
	if !m.HasMTP() {
		if m.eng != nil {
			if why, ok := m.eng.Manifest().Provenance["mtp"].(string); ok {
				return nil, fmt.Errorf("%w: %s", ErrNoMTP, why)
			}
		}
		return nil, ErrNoMTP
	}
	if o.DraftMax < 0 || o.DraftMin < 0 {
		return nil, fmt.Errorf("mtp: sizes %d, %d must be >= 0", o.DraftMax, o.DraftMin)
	}
	return &Strategy{impl: &decoding.MTP{DraftMax: o.DraftMax, DraftMin: o.DraftMin,
		Adaptive: decoding.Adaptive{Off: o.Adapt.Off}}}, nil
}

// DecodingStats is what a Strategy did in one request.
type DecodingStats struct {
	Strategy string `json:"strategy"`
	// Passes is the number of passes of the model (verify and plain);
	// Verify the verify passes among them and Rows the rows they held.
	Passes int `json:"passes"`
	Verify int `json:"verify_passes"`
	Rows   int `json:"verify_rows"`
	// Tokens is the number of tokens the passes chose.
	Tokens int `json:"tokens"`
	// Drafted is the number of guessed tokens offered for verification,
	// Accepted the number of them kept.
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
	// Fallbacks counts the switches to plain decoding because guessing
	// did not pay.
	Fallbacks int `json:"fallbacks"`
	// PlainTokenNs and GuessTokenNs are the measured times per token of
	// plain and guessing passes (0 when not measured).
	PlainTokenNs float64 `json:"plain_token_ns,omitempty"`
	GuessTokenNs float64 `json:"guess_token_ns,omitempty"`
	// Note says why the strategy did not run, when it did not.
	Note string `json:"note,omitempty"`
}

// TokensPerPass is the tokens chosen per pass of the model.
func (s DecodingStats) TokensPerPass() float64 { return decoding.Stats(s).TokensPerPass() }

// AcceptanceRate is the fraction of guessed tokens kept.
func (s DecodingStats) AcceptanceRate() float64 { return decoding.Stats(s).AcceptanceRate() }

// Speedup is the measured time per token of plain passes over that of
// guessing passes (0 when either was not measured).
func (s DecodingStats) Speedup() float64 { return decoding.Stats(s).Speedup() }

// String is a one-line summary.
func (s DecodingStats) String() string { return decoding.Stats(s).String() }

// MarshalJSON writes the counters with the figures derived from them:
// tokens_per_pass, acceptance_rate and speedup (0 when plain and guessing
// passes were not both timed).
func (s DecodingStats) MarshalJSON() ([]byte, error) {
	type counters DecodingStats
	return json.Marshal(struct {
		counters
		TokensPerPass  float64 `json:"tokens_per_pass"`
		AcceptanceRate float64 `json:"acceptance_rate"`
		Speedup        float64 `json:"speedup"`
	}{counters(s), s.TokensPerPass(), s.AcceptanceRate(), s.Speedup()})
}

// startDecoder starts the request's strategy on the session (nil without
// one), and reports whether its passes may share the model's batched
// passes (see sharedTarget).
func (s *Session) startDecoder(strategy *Strategy, smp *sample.Sampler) (decoding.Decoder, bool, error) {
	if strategy == nil {
		return nil, false, nil
	}
	st := strategy.impl
	t, ok := s.seq.(decoding.Target)
	if !ok {
		return nil, false, fmt.Errorf("%s decoding needs a compiled artifact", st.Name())
	}
	// prompt lookup and draft models verify chains, which share passes;
	// the MTP head drafts from the hidden rows of the target's own passes
	// and lookahead verifies a tree, so those run passes of their own
	es, shared := s.seq.(*engine.Session)
	shared = shared && s.m.batch != nil && (st.Name() == "lookup" || st.Name() == "draft")
	if shared {
		t = &sharedTarget{s: s, es: es}
	}
	dec, err := st.Start(t, s.hist, smp)
	if err != nil {
		return nil, false, fmt.Errorf("%s decoding: %w", st.Name(), err)
	}
	return dec, shared, nil
}

// sharedTarget is the target a strategy verifies its guesses on when the
// session's model shares its decode passes among sessions: while the
// session is a member of the model's batcher, its plain passes and its
// verify chains go through the batcher, so that they share a pass with
// the rows of the other sessions decoding at the same time (one row each,
// or their own chains); other passes (a lookahead tree) run alone.
type sharedTarget struct {
	s  *Session
	es *engine.Session
}

func (t *sharedTarget) Run(p *engine.Pass) (engine.Logits, error) {
	if !t.s.inBatch || !wholeChain(p) || len(p.IDs) > t.s.m.batch.maxRows {
		t.s.call.share = 1
		return t.es.Run(p)
	}
	t.s.call.s = t.es
	return t.s.m.batch.verify(&t.s.call, p.IDs)
}

// wholeChain reports whether p is a chain of token rows asking for the
// logits of all of them (a verify pass).
func wholeChain(p *engine.Pass) bool {
	if p.Mask != nil || p.Pos != nil || p.Embeds != nil || p.Positions != nil || p.Rows != nil || len(p.Logits) != len(p.IDs) {
		return false
	}
	for i, r := range p.Logits {
		if r != i {
			return false
		}
	}
	return true
}

// Share is, for the session's last pass, the number of sessions in it
// times the fraction of its extra rows (beyond one a session) that were
// the session's own (decoding.Sharer): the sessions that waited for the
// session's guesses, weighted by its part of the wait.
func (t *sharedTarget) Share() float64 {
	if !t.s.inBatch {
		return 1
	}
	return t.s.call.share
}

func (t *sharedTarget) Decode(id int) ([]float32, error) { return t.s.decode(id) }
func (t *sharedTarget) Commit(rows []int) error          { return t.es.Commit(rows) }
func (t *sharedTarget) Rewind(pos int) error             { return t.es.Rewind(pos) }
func (t *sharedTarget) Pos() int                         { return t.es.Pos() }
func (t *sharedTarget) Context() int                     { return t.es.Context() }
func (t *sharedTarget) Recurrent() bool                  { return t.es.Recurrent() }

// MaxRows is the longest chain that shares a pass: the most rows a
// batched pass returns the logits of.
func (t *sharedTarget) MaxRows() int { return min(t.es.MaxRows(), t.s.m.batch.maxRows) }

// CostKey keys the strategies' cost estimates apart from those of
// sessions that decode alone: a shared pass's time is that of all its
// rows.
func (t *sharedTarget) CostKey() any {
	return struct {
		shared bool
		key    any
	}{true, t.es.CostKey()}
}

// endDecoder records the decoder's statistics, closes it, and drops the
// tokens it committed past the ones generation kept.
func (s *Session) endDecoder(dec decoding.Decoder, res *Result) {
	if dec == nil {
		return
	}
	st := DecodingStats(dec.Stats())
	res.Decoding = &st
	dec.Close()
	if s.seq.Pos() > len(s.hist) {
		if err := s.seq.Rewind(len(s.hist)); err != nil {
			// a sequence that cannot rewind there starts over
			s.hist = s.hist[:0]
			_ = s.seq.Rewind(0)
		}
	}
}

// ErrTokenizerMismatch is returned by CheckDraft when a draft model's
// tokenizer differs from the target's.
var ErrTokenizerMismatch = errors.New("the draft model's tokenizer differs from the target's")

// CheckDraft reports whether draft can draft tokens for m: the same
// vocabulary, token by token, and the same BOS.
func (m *Model) CheckDraft(draft *Model) error {
	a, b := m.tok, draft.tok
	switch {
	case m.cfg.Info.Vocab != draft.cfg.Info.Vocab:
		return fmt.Errorf("%w: %d tokens, the target has %d", ErrTokenizerMismatch, draft.cfg.Info.Vocab, m.cfg.Info.Vocab)
	case a == nil || b == nil:
		if a != b {
			return fmt.Errorf("%w: only one of them has a tokenizer", ErrTokenizerMismatch)
		}
		return nil
	case a.VocabSize() != b.VocabSize():
		return fmt.Errorf("%w: %d tokens, the target's has %d", ErrTokenizerMismatch, b.VocabSize(), a.VocabSize())
	case m.BOS() != draft.BOS():
		return fmt.Errorf("%w: BOS %d, the target's is %d", ErrTokenizerMismatch, draft.BOS(), m.BOS())
	}
	for id := range a.VocabSize() {
		if x, y := a.Token(id), b.Token(id); x != y {
			return fmt.Errorf("%w: token %d is %q, the target's is %q", ErrTokenizerMismatch, id, y, x)
		}
	}
	return nil
}
