package aotlm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// ErrPromptTooLong is returned when a prompt does not fit the context.
var ErrPromptTooLong = errors.New("prompt is longer than the context")

// Stop reasons of a Result.
const (
	StopEOS      = "eos"       // a stop id was drawn
	StopString   = "stop"      // a stop string appeared
	StopLength   = "length"    // MaxTokens reached
	StopContext  = "context"   // the context is full
	StopCanceled = "cancelled" // the context.Context was done
)

// Request is one generation.
type Request struct {
	// Prompt is the text to continue; IDs, when set, replace it.
	Prompt string
	IDs    []int
	// Raw encodes Prompt with no special tokens added (a rendered chat
	// template writes its own); special tokens in the text are parsed.
	// The text of a raw request's output is decoded on its own (as a chat
	// reply); otherwise it continues the prompt's text (keeping, say, the
	// space before its first word).
	Raw bool
	// MaxTokens bounds the new tokens (<= 0: until a stop or the context
	// is full).
	MaxTokens int
	// PromptOnly prefills the prompt and generates nothing.
	PromptOnly bool
	Sampling   Sampling
	// Stop holds strings that end generation (not included in the text).
	Stop []string
	// StopIDs are more ids that end generation; IgnoreEOS drops the
	// model's own.
	StopIDs   []int
	IgnoreEOS bool
	// Logits, when set, sees each step's logits before sampling, with
	// the ids generated so far; it may change them (masking ids out
	// constrains the output). The slice is valid until the next pass.
	Logits func(logits []float32, generated []int)
	// Strategy, when set, chooses several tokens per pass (lookahead,
	// prompt lookup, a draft model); nil decodes one token per pass.
	// Sessions of a model generating at the same time verify their
	// guesses in the passes they share (see DecodeStats).
	Strategy *Strategy
	// Embeds holds the rows that the prompt's embedding ids name (see
	// EmbedBase); nil when the prompt has none.
	Embeds *Embeds
	// ContextShift, when set, lets generation go on when the context is
	// full instead of stopping with StopContext: the older half of the
	// tokens after the first Keep is dropped and the rest prefilled again
	// (see ContextShift). Nil, the default, stops. It is not combined with
	// a Strategy or Embeds (those stop at a full context).
	ContextShift *ContextShift
}

// ContextShift is the rule of Request.ContextShift, llama.cpp's n_keep
// and context shift: with n tokens in a full cache, the tokens from Keep
// to Keep+(n-Keep)/2 are dropped, the ones after them move down, and the
// cache is rebuilt from the tokens left (a prefill from Keep on), so the
// model sees a contiguous, shorter text. Generation stops with
// StopContext when nothing is left to drop.
type ContextShift struct {
	// Keep is the tokens at the start that are never dropped (a system
	// prompt); -1 keeps the request's whole prompt.
	Keep int
}

// Token is one generated token as it streams: its id and the text it
// completes (possibly empty while a character or a possible stop string
// is incomplete).
type Token struct {
	ID   int
	Text string
}

// Result is what Generate produced, with timings.
type Result struct {
	PromptIDs  []int
	IDs        []int
	Text       string
	StopReason string
	// Reused is how many prompt tokens were already in the session's
	// cache and were not prefilled again.
	Reused  int
	Prefill time.Duration // prefilling the new prompt tokens
	TTFT    time.Duration // start to the first token
	Decode  time.Duration // all single-token passes
	// Decoding reports what Request.Strategy did (nil without one).
	Decoding *DecodingStats
	// Shifts is how many times Request.ContextShift made room, and
	// Shifted the tokens it dropped from the session's cache in all; 0
	// when the context did not fill (their prefills count in Decode).
	Shifts, Shifted int
}

// PrefillTokS is the prompt tokens prefilled per second (0 if unmeasured).
func (r *Result) PrefillTokS() float64 { return perSecond(len(r.PromptIDs)-r.Reused, r.Prefill) }

// DecodeTokS is the decode passes per second (one fewer than ids when the
// last id ended generation by length).
func (r *Result) DecodeTokS() float64 {
	n := len(r.IDs) - 1
	if r.StopReason == StopEOS || r.StopReason == StopString {
		n = len(r.IDs)
	}
	return perSecond(n, r.Decode)
}

func perSecond(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Session is one conversation or document on a model: a sequence and the
// ids it holds. It is not safe for concurrent use.
type Session struct {
	m    *Model
	seq  Sequence
	hist []int // ids committed in seq

	// call is the session's request to the model's batcher, used while
	// its Generate loop is a member (inBatch).
	call    decodeCall
	inBatch bool
}

// NewSession makes a session with a cache of ctx positions (0: the
// model's context).
func (m *Model) NewSession(ctx int) (*Session, error) {
	if ctx < 0 || ctx > m.cfg.Info.Context {
		return nil, fmt.Errorf("a context of %d positions: the model holds at most %d", ctx, m.cfg.Info.Context)
	}
	seq, err := m.cfg.NewSequence(ctx)
	if err != nil {
		return nil, err
	}
	return &Session{m: m, seq: seq}, nil
}

// Model returns the session's model.
func (s *Session) Model() *Model { return s.m }

// Context is the capacity of the session's cache.
func (s *Session) Context() int { return s.seq.Context() }

// History returns the ids the session's cache holds.
func (s *Session) History() []int { return s.hist }

// Reset empties the session.
func (s *Session) Reset() error {
	s.hist = s.hist[:0]
	return s.seq.Rewind(0)
}

// Close releases the session.
func (s *Session) Close() { s.seq.Close() }

// Sequence returns the backend sequence, for callers that drive it
// themselves; Reset the session afterwards.
func (s *Session) Sequence() Sequence { return s.seq }

// Encode turns text into prompt ids: the tokenizer's encoding with the
// model's special-token rule and BOS first when the model has one, or with
// no special tokens added when raw is set.
func (m *Model) Encode(text string, raw bool) ([]int, error) {
	tok := m.tok
	if tok == nil {
		return nil, ErrNoTokenizer
	}
	if raw {
		return tokenizer.EncodeChecked(tok, text, tokenizer.EncodeOptions{ParseSpecial: true})
	}
	ids, err := tokenizer.EncodeChecked(tok, text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return nil, err
	}
	if bos := m.BOS(); bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int{bos}, ids...)
	}
	return ids, nil
}

// Generate continues the request's prompt, calling onToken (if not nil)
// with each new token as it is chosen; an error from onToken stops
// generation and is returned. The prompt's tokens that the session
// already holds (the longest common prefix with its history) are not
// prefilled again. It returns what was generated even with an error; a
// done ctx ends it between passes with StopCanceled and ctx's error.
func (s *Session) Generate(ctx context.Context, req Request, onToken func(Token) error) (*Result, error) {
	if s.m.eng != nil && s.m.eng.Encoder() {
		return nil, ErrEmbeddingsOnly
	}
	if err := req.Sampling.Validate(); err != nil {
		return nil, err
	}
	ids := req.IDs
	if ids == nil {
		var err error
		if ids, err = s.m.Encode(req.Prompt, req.Raw); err != nil {
			return nil, err
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("the prompt is empty and the model has no BOS token to start from")
	}
	if len(ids) > s.seq.Context() {
		return nil, fmt.Errorf("%w: %d prompt tokens, context %d", ErrPromptTooLong, len(ids), s.seq.Context())
	}
	res := &Result{PromptIDs: ids, IDs: []int{}}
	start := time.Now()
	logits, err := s.prefill(ctx, ids, req.Embeds, res)
	if err != nil {
		if ctx.Err() != nil {
			res.StopReason = StopCanceled
		}
		return res, err
	}
	res.Prefill = time.Since(start)
	if req.PromptOnly {
		res.StopReason = StopLength
		return res, nil
	}

	stop := append([]int(nil), req.StopIDs...)
	if !req.IgnoreEOS {
		stop = append(stop, s.m.stop...)
	}
	smp := sample.New(sample.Params(req.Sampling))
	var text textStream
	prime := ids
	if req.Raw {
		prime = nil // a reply after a rendered template stands alone
	}
	text.init(s.m.tok, req.Stop, prime)
	if req.Strategy != nil && req.Logits != nil {
		return res, errors.New("a logits hook and a decoding strategy cannot be combined: the strategy's verify passes choose tokens without the hook")
	}
	dec, shared, err := s.startDecoder(req.Strategy, smp)
	if err != nil {
		return res, err
	}
	defer s.endDecoder(dec, res)
	leave := s.joinBatch(dec == nil || shared)
	defer func() { leave() }()
	var queue []int // tokens a decoder chose ahead
	decStart := time.Now()
	for {
		var id int
		if len(queue) > 0 {
			id, queue = queue[0], queue[1:]
		} else {
			if req.Logits != nil {
				req.Logits(logits, res.IDs)
			}
			id = smp.Sample(logits, res.IDs)
		}
		if len(res.IDs) == 0 {
			res.TTFT = time.Since(start)
		}
		if contains(stop, id) {
			res.StopReason = StopEOS
			break
		}
		res.IDs = append(res.IDs, id)
		piece, hit := text.add(id)
		if onToken != nil {
			if err := onToken(Token{ID: id, Text: piece}); err != nil {
				res.Text = text.String()
				return res, err
			}
		}
		if hit {
			res.StopReason = StopString
			break
		}
		if req.MaxTokens > 0 && len(res.IDs) >= req.MaxTokens {
			res.StopReason = StopLength
			break
		}
		if len(queue) > 0 { // id is in the cache already
			s.hist = append(s.hist, id)
			continue
		}
		if s.seq.Pos() >= s.seq.Context() {
			if req.ContextShift == nil || dec != nil || req.Embeds != nil {
				res.StopReason = StopContext
				break
			}
			leave()
			var dropped int
			logits, dropped, err = s.shift(ctx, req.ContextShift.Keep, len(ids), id)
			if err != nil {
				res.Text = text.String()
				return res, err
			}
			if dropped == 0 {
				res.StopReason = StopContext
				break
			}
			res.Shifts++
			res.Shifted += dropped
			leave = s.joinBatch(true)
			continue
		}
		if err := ctx.Err(); err != nil {
			res.StopReason, res.Text = StopCanceled, text.String()
			return res, err
		}
		if dec != nil {
			if queue, err = dec.Next(id, res.IDs); err != nil {
				res.Text = text.String()
				return res, fmt.Errorf("decode at position %d: %w", s.seq.Pos(), err)
			}
			s.hist = append(s.hist, id)
			continue
		}
		if logits, err = s.decode(id); err != nil {
			res.Text = text.String()
			return res, fmt.Errorf("decode at position %d: %w", s.seq.Pos(), err)
		}
		s.hist = append(s.hist, id)
	}
	leave()
	if rest := text.flush(); rest != "" && onToken != nil {
		if err := onToken(Token{ID: -1, Text: rest}); err != nil {
			res.Text = text.String()
			return res, err
		}
	}
	res.Decode = time.Since(decStart)
	res.Text = text.String()
	return res, nil
}

// shift makes room in a full cache for id (generated, not yet in the
// cache) by Request.ContextShift's rule with keep (-1: prompt, the
// request's prompt length): it drops the older half of the history after
// keep, prefills the cache again from keep on with id last, and returns
// the logits after id and the tokens dropped; 0 dropped (and no change)
// when keep leaves nothing to drop.
func (s *Session) shift(ctx context.Context, keep, prompt, id int) ([]float32, int, error) {
	n := len(s.hist)
	if keep < 0 {
		keep = prompt
	}
	keep = min(keep, n)
	drop := (n - keep) / 2
	if drop < 1 {
		return nil, 0, nil
	}
	kept := make([]int, 0, n-drop+1)
	kept = append(append(append(kept, s.hist[:keep]...), s.hist[keep+drop:]...), id)
	var scratch Result
	logits, err := s.prefill(ctx, kept, nil, &scratch)
	if err != nil {
		return nil, 0, fmt.Errorf("context shift (keep %d, drop %d of %d): %w", keep, drop, n, err)
	}
	return logits, drop, nil
}

// joinBatch makes the session a member of its model's batcher while it
// decodes one token per pass (when ok, the model has a batcher and the
// session is the engine's), so that its passes share the rows of one pass
// with those of the other sessions decoding at the same time. The
// returned function ends the membership; calls after the first do nothing.
func (s *Session) joinBatch(ok bool) (leave func()) {
	es, isEngine := s.seq.(*engine.Session)
	if !ok || s.m.batch == nil || !isEngine {
		return func() {}
	}
	if s.call.wake == nil {
		s.call = decodeCall{s: es, wake: make(chan bool, 1)}
	}
	b := s.m.batch
	b.join()
	s.inBatch = true
	return func() {
		if s.inBatch {
			s.inBatch = false
			b.leave()
		}
	}
}

// decode feeds id and returns the logits after it: through the model's
// batcher while the session is one of its members.
func (s *Session) decode(id int) ([]float32, error) {
	if !s.inBatch {
		return s.seq.Decode(id)
	}
	s.call.id = id
	return s.m.batch.decode(&s.call)
}

// prefill brings the session to hold ids and returns the logits after the
// last one, reusing the longest common prefix of ids and the history.
func (s *Session) prefill(ctx context.Context, ids []int, emb *Embeds, res *Result) ([]float32, error) {
	lcp := 0
	for lcp < len(ids) && lcp < len(s.hist) && ids[lcp] == s.hist[lcp] {
		lcp++
	}
	if lcp == len(ids) {
		lcp-- // the last prompt token is fed again for its logits
	}
	lcp = emb.blockStart(ids, lcp) // an image at rotary positions is placed whole
	if err := s.seq.Rewind(lcp); err != nil {
		lcp = 0 // a backend that cannot rewind there starts over
		if err := s.seq.Rewind(0); err != nil {
			return nil, err
		}
	}
	s.hist = append(s.hist[:lcp], ids[lcp:]...)
	res.Reused = lcp
	logits, err := s.prefillIDs(ctx, ids[lcp:], emb)
	if err != nil {
		s.hist = s.hist[:s.seq.Pos()]
		return nil, fmt.Errorf("prefill: %w", err)
	}
	return logits, nil
}

func contains(ids []int, id int) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// textStream decodes generated ids to text as they come, holding back
// what may be the start of a stop string.
type textStream struct {
	dec     *tokenizer.StreamDecoder
	stops   []string
	text    strings.Builder // everything decoded
	emitted int             // bytes of text handed out
	cut     int             // where a stop string starts, or -1
}

// init primes the decoder with the prompt's last ids, so that the first
// generated word keeps the space a continuation has.
func (t *textStream) init(tok tokenizer.Tokenizer, stops []string, prompt []int) {
	if tok != nil {
		t.dec = tokenizer.NewStreamDecoder(tok)
		for _, id := range prompt[max(0, len(prompt)-4):] {
			if IsEmbedID(id) {
				continue
			}
			t.dec.Add(id)
		}
	}
	for _, s := range stops {
		if s != "" {
			t.stops = append(t.stops, s)
		}
	}
	t.cut = -1
}

// add decodes id and returns the text now safe to hand out, and whether a
// stop string appeared.
func (t *textStream) add(id int) (string, bool) {
	if t.dec == nil {
		return "", false
	}
	t.text.WriteString(t.dec.Add(id))
	all := t.text.String()
	for _, s := range t.stops {
		from := max(0, t.emitted-len(s))
		if i := strings.Index(all[from:], s); i >= 0 && (t.cut < 0 || from+i < t.cut) {
			t.cut = from + i
		}
	}
	if t.cut >= 0 {
		out := all[t.emitted:t.cut]
		t.emitted = t.cut
		return out, true
	}
	safe := len(all)
	for _, s := range t.stops {
		for k := min(len(s)-1, len(all)); k > 0; k-- {
			if strings.HasSuffix(all, s[:k]) {
				safe = min(safe, len(all)-k)
				break
			}
		}
	}
	safe = max(safe, t.emitted)
	out := all[t.emitted:safe]
	t.emitted = safe
	return out, false
}

// flush returns the text held back at the end (none after a stop string).
func (t *textStream) flush() string {
	if t.dec == nil || t.cut >= 0 {
		return ""
	}
	t.text.WriteString(t.dec.Flush())
	all := t.text.String()
	out := all[t.emitted:]
	t.emitted = len(all)
	return out
}

// String returns the generated text, cut before a stop string.
func (t *textStream) String() string {
	all := t.text.String()
	if t.cut >= 0 {
		return all[:t.cut]
	}
	return all
}

// Scorer is a Sequence that also returns the logits of every position it
// is fed (both the engine's and the interpreter's do).
type Scorer interface {
	PrefillAll(ctx context.Context, ids []int) ([][]float32, error)
}

// Logits feeds ids after what the session holds and returns the logits of
// every one of them, one row each.
func (s *Session) Logits(ctx context.Context, ids []int) ([][]float32, error) {
	sc, ok := s.seq.(Scorer)
	if !ok {
		return nil, errors.New("this backend returns the logits of the last position only")
	}
	rows, err := sc.PrefillAll(ctx, ids)
	s.hist = append(s.hist, ids[:min(len(ids), s.seq.Pos()-len(s.hist))]...)
	return rows, err
}
