package decoding

import (
	"fmt"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
)

// Target is the sequence a strategy verifies its guesses on: it runs
// passes of several rows under a mask, keeps a chain of them, and rewinds.
// *engine.Session implements it.
type Target interface {
	Run(p *engine.Pass) (engine.Logits, error)
	Commit(rows []int) error
	Rewind(pos int) error
	Decode(id int) ([]float32, error)
	Pos() int
	Context() int
	MaxRows() int
	Recurrent() bool
}

// Strategy makes the Decoder of one generation.
type Strategy interface {
	// Name is the strategy's name as reported ("lookahead", "lookup",
	// "draft").
	Name() string
	// Start makes a decoder over t, whose committed positions hold
	// history, drawing tokens with smp. A target the strategy cannot
	// speed up (a recurrent model) gets a plain decoder and a note in its
	// Stats.
	Start(t Target, history []int, smp *sample.Sampler) (Decoder, error)
}

// Decoder chooses tokens, one or more per pass.
type Decoder interface {
	// Next feeds id, the newest chosen token (not yet in the target), and
	// returns the tokens chosen after it, at least one. Afterwards the
	// target holds id and all the returned tokens but the last, which is
	// chosen but not fed. generated holds the ids generated so far, id
	// last (the sampler's repetition penalty reads it).
	Next(id int, generated []int) ([]int, error)
	// Stats reports what the decoder did so far.
	Stats() Stats
	// Close releases what the decoder holds (a draft model's sequence).
	Close()
}

// Stats counts what a decoder did.
type Stats struct {
	Strategy string `json:"strategy"`
	// Passes is the number of target passes (verify and plain); Verify
	// the verify passes among them and Rows the rows they held.
	Passes int `json:"passes"`
	Verify int `json:"verify_passes"`
	Rows   int `json:"verify_rows"`
	// Tokens is the number of tokens the passes chose.
	Tokens int `json:"tokens"`
	// Drafted is the number of guessed tokens offered for verification,
	// Accepted the number of them kept.
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
	// Fallbacks counts the times the adaptive control switched to plain
	// decoding because guessing did not pay.
	Fallbacks int `json:"fallbacks"`
	// PlainTokenNs and GuessTokenNs are the measured times per token of
	// plain and guessing passes (0 when not measured).
	PlainTokenNs float64 `json:"plain_token_ns,omitempty"`
	GuessTokenNs float64 `json:"guess_token_ns,omitempty"`
	// Note says why the strategy did not run, when it did not.
	Note string `json:"note,omitempty"`
}

// TokensPerPass is the tokens chosen per target pass.
func (s Stats) TokensPerPass() float64 {
	if s.Passes == 0 {
		return 0
	}
	return float64(s.Tokens) / float64(s.Passes)
}

// AcceptanceRate is the fraction of guessed tokens kept.
func (s Stats) AcceptanceRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// Speedup is the measured time per token of plain passes over that of
// guessing passes (0 when either was not measured).
func (s Stats) Speedup() float64 {
	if s.PlainTokenNs == 0 || s.GuessTokenNs == 0 {
		return 0
	}
	return s.PlainTokenNs / s.GuessTokenNs
}

// String is a one-line summary.
func (s Stats) String() string {
	out := fmt.Sprintf("%s: %.2f tokens/pass, %d/%d guesses accepted (%.0f%%), %d verify passes, %d fallbacks",
		s.Strategy, s.TokensPerPass(), s.Accepted, s.Drafted, 100*s.AcceptanceRate(), s.Verify, s.Fallbacks)
	if sp := s.Speedup(); sp > 0 {
		out += fmt.Sprintf(", %.2fx plain per token", sp)
	}
	if s.Note != "" {
		out += " (" + s.Note + ")"
	}
	return out
}

// Adaptive configures the fallback to plain decoding: a strategy times
// its passes and, when guessing costs more per token than plain decoding,
// decodes plainly for a while before trying again.
type Adaptive struct {
	// Off keeps guessing whatever it costs (tests use it to make the
	// passes, and so the random draws, independent of timing).
	Off bool
}

// control is the adaptive switch between guessing and plain passes. It
// times plain passes (per token) and guessing rounds, and compares each
// round's cost in plain passes with the tokens it chose: when guessing
// chooses fewer tokens per round than a round costs, it decodes plainly
// for a while (twice as long after each failed probe); when a round costs
// more than the most tokens it could ever choose, for good.
type control struct {
	off        bool
	plain      float64 // EWMA ns per plain token
	cost, gain float64 // EWMA of a round's time in plain tokens, and its tokens
	guess      float64 // EWMA ns per guessed token
	rounds     int     // guessing rounds since the last switch
	left       int     // plain steps left before guessing again
	backoff    int
	probe      int  // plain steps still to time at the start
	never      bool // guessing cannot pay on this model
	notedNever bool
}

const (
	ewma         = 0.25
	warmRounds   = 4    // guessing rounds timed before judging the gain
	firstBackoff = 32   // plain tokens after the first fallback
	maxBackoff   = 1024 // at most this many plain tokens between probes
)

func newControl(a Adaptive) control {
	c := control{off: a.Off, backoff: firstBackoff}
	if !a.Off {
		c.probe = 2
	}
	return c
}

// plainNext reports whether the next step should be plain.
func (c *control) plainNext() bool { return !c.off && (c.never || c.probe > 0 || c.left > 0) }

func avg(old, x float64) float64 {
	if old == 0 {
		return x
	}
	return old + ewma*(x-old)
}

// plainDone records a plain step of d.
func (c *control) plainDone(d time.Duration, st *Stats) {
	c.plain = avg(c.plain, float64(d.Nanoseconds()))
	st.PlainTokenNs = c.plain
	if c.probe > 0 {
		c.probe--
	} else if c.left > 0 {
		c.left--
		if c.left == 0 {
			c.rounds, c.gain, c.cost = 0, 0, 0
		}
	}
}

// guessDone records a guessing round of d that chose tokens tokens, of at
// most limit.
func (c *control) guessDone(d time.Duration, tokens, limit int, st *Stats) {
	ns := float64(d.Nanoseconds())
	c.guess = avg(c.guess, ns/float64(tokens))
	st.GuessTokenNs = c.guess
	if c.off || c.plain == 0 {
		return
	}
	c.rounds++
	c.cost, c.gain = avg(c.cost, ns/c.plain), avg(c.gain, float64(tokens))
	switch {
	case c.cost >= float64(limit) && (c.rounds >= 2 || c.cost >= 2*float64(limit)):
		c.never = true
		st.Fallbacks++
		if st.Note == "" {
			st.Note = fmt.Sprintf("a guessing pass costs %.1f plain passes and chooses at most %d tokens: plain decoding", c.cost, limit)
		}
	case c.rounds >= warmRounds && c.gain < c.cost:
		c.left = c.backoff
		c.backoff = min(2*c.backoff, maxBackoff)
		st.Fallbacks++
	case c.rounds >= warmRounds:
		c.backoff = firstBackoff
	}
}

// plainStep decodes id and draws the next token: one pass, one token.
func plainStep(t Target, smp *sample.Sampler, id int, generated []int, st *Stats) ([]int, error) {
	logits, err := t.Decode(id)
	if err != nil {
		return nil, err
	}
	st.Passes++
	st.Tokens++
	return []int{smp.Sample(logits, generated)}, nil
}

// plainDecoder decodes one token per pass.
type plainDecoder struct {
	t   Target
	smp *sample.Sampler
	st  Stats
}

func (p *plainDecoder) Next(id int, generated []int) ([]int, error) {
	return plainStep(p.t, p.smp, id, generated, &p.st)
}
func (p *plainDecoder) Stats() Stats { return p.st }
func (p *plainDecoder) Close()       {}

// Plain returns a decoder of one token per pass, reporting name and note.
func Plain(t Target, smp *sample.Sampler, name, note string) Decoder {
	return &plainDecoder{t: t, smp: smp, st: Stats{Strategy: name, Note: note}}
}

// verifyChain runs id and drafts as one chain pass and keeps the longest
// prefix of drafts that the target itself draws: row i's logits give the
// token after drafts[:i]; while that token equals the next draft the walk
// goes on. For deterministic drafts this is the rejection rule (the draft
// is a point mass), so greedy output is exactly the target's and sampled
// output keeps its distribution. It commits id and the accepted drafts
// and returns the chosen tokens (accepted drafts, then the target's own).
func verifyChain(t Target, smp *sample.Sampler, id int, drafts, generated []int, st *Stats) ([]int, error) {
	ids := append([]int{id}, drafts...)
	rows := make([]int, len(ids))
	for i := range rows {
		rows[i] = i
	}
	logits, err := t.Run(&engine.Pass{IDs: ids, Logits: rows})
	if err != nil {
		return nil, err
	}
	hist := append(generated[:len(generated):len(generated)], make([]int, 0, len(ids))...)
	var out []int
	n := 0
	for i := range ids {
		tok := smp.Sample(logits.Row(i), hist)
		out = append(out, tok)
		hist = append(hist, tok)
		if i == len(drafts) || tok != drafts[i] {
			break
		}
		n++
	}
	if err := t.Commit(rows[:n+1]); err != nil {
		return nil, err
	}
	st.Passes++
	st.Verify++
	st.Rows += len(ids)
	st.Drafted += len(drafts)
	st.Accepted += n
	st.Tokens += len(out)
	return out, nil
}
