package decoding

import (
	"fmt"
	"maps"
	"sync"
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
// times plain passes and guessing rounds, and compares each round's cost
// in plain passes with the tokens it chose: when guessing chooses fewer
// tokens per round than a round costs, it decodes plainly for a while
// (twice as long after each failed probe); when a round costs more than
// the most tokens it could ever choose, for good.
//
// The costs compared are low envelopes of the measured times (see low),
// one for plain passes and one per round size, not their averages: a pass
// the operating system interrupted, or a collection of garbage, can take
// ten times its usual time, and a single such pass must not turn the
// strategy off. Only the tokens chosen are averaged.
type control struct {
	off      bool
	plain    float64         // low envelope of a plain pass's ns
	round    map[int]float64 // low envelope of a round's ns, by its limit
	seen     map[int]int     // rounds timed, by limit
	recent   []roundSize     // the latest rounds since the last switch, at most window
	plainAvg float64         // EWMA ns per plain token (reported)
	guess    float64         // EWMA ns per guessed token (reported)
	rounds   int             // guessing rounds since the last switch
	left     int             // plain steps left before guessing again
	backoff  int
	probe    int  // plain steps still to time at the start
	never    bool // guessing cannot pay on this model
	key      any  // what the costs depend on (see newControl), or nil
	sharer   Sharer
}

// roundSize is what the control keeps of a guessing round: the most
// tokens it could choose (its size), the tokens it chose, and what it
// cost the other sequences of its shared pass, in plain passes (see
// charge; 0 on a pass of its own).
type roundSize struct {
	limit, tokens int
	shared        float64
}

const (
	ewma        = 0.25
	window      = 8 // guessing rounds judged together
	warmRounds  = 4 // guessing rounds timed before judging the gain
	neverRounds = 2 // rounds of one size timed before judging it hopeless for good
	// hopelessMargin: a round whose first timing is this many times what
	// it could return is judged at once (a long fallback)
	hopelessMargin  = 1.5
	hopelessBackoff = 128 // plain tokens after a round that looked hopeless once
	// judgeCost: guessing rounds costing this many plain passes in all
	// are judged even before warmRounds (long rounds, a draft model's)
	judgeCost    = 6
	firstBackoff = 32   // plain tokens after the first fallback
	maxBackoff   = 1024 // at most this many plain tokens between probes
)

// newControl makes the control of one generation. key, when not nil,
// names what its pass costs depend on (the strategy's configuration and
// the target's model and threads, see memoryKey): the control starts from
// what the last generation under the same key measured and left (its cost
// estimates, and the plain stretch still to run after guessing proved
// hopeless), and close leaves its own for the next.
func newControl(a Adaptive, key any) control {
	c := control{off: a.Off, backoff: firstBackoff, round: map[int]float64{}, seen: map[int]int{}, key: key}
	if a.Off {
		return c
	}
	c.probe = 3
	if m, ok := memories.get(key); ok {
		c.plain, c.round, c.seen = m.plain, m.round, m.seen
		c.left, c.backoff, c.probe = m.left, m.backoff, 0
	}
	return c
}

// resumeNote says why a generation starts with plain decoding, when the
// generations before it under the same key left a plain stretch to run.
func (c *control) resumeNote() string {
	if c.left == 0 {
		return ""
	}
	return fmt.Sprintf("plain decoding for the first %d tokens: guessing cost more than it gained in earlier generations on this model", c.left)
}

// close leaves the control's estimates for the next generation under its
// key.
func (c *control) close() {
	if c.off || c.key == nil || c.plain == 0 {
		return
	}
	// the costs carry over, and so does a verdict that guessing cannot
	// pay (it rests on costs alone); a fallback because the guesses
	// failed does not: the next prompt may repeat itself
	m := memory{plain: c.plain, round: maps.Clone(c.round), seen: maps.Clone(c.seen), backoff: firstBackoff}
	if c.never {
		m.left = c.left
	}
	if c.never && m.left == 0 {
		// hopeless, and the plain stretch has run out: the next
		// generation times one more round, which says hopeless again at
		// once unless the costs changed
		for k := range m.seen {
			m.seen[k] = max(m.seen[k], neverRounds-1)
		}
	}
	memories.put(c.key, m)
}

// memory is what a control leaves for the next generation under its key.
type memory struct {
	plain         float64
	round         map[int]float64
	seen          map[int]int
	left, backoff int
}

// costMemories holds the controls' memories, by key; it forgets them all
// when it holds more than maxMemories (models opened and closed in a
// long-running process).
type costMemories struct {
	mu sync.Mutex
	m  map[any]memory
}

const maxMemories = 64

var memories costMemories

func (cm *costMemories) get(key any) (memory, bool) {
	if key == nil {
		return memory{}, false
	}
	cm.mu.Lock()
	defer cm.mu.Unlock()
	m, ok := cm.m[key]
	if ok {
		m.round, m.seen = maps.Clone(m.round), maps.Clone(m.seen)
	}
	return m, ok
}

func (cm *costMemories) put(key any, m memory) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if cm.m == nil || len(cm.m) >= maxMemories {
		cm.m = map[any]memory{}
	}
	cm.m[key] = m
}

// CostKeyer is implemented by targets whose pass costs are those of
// other targets with the same key (the sessions of one model running on
// the same threads): a strategy's cost estimates then carry from one
// generation to the next.
type CostKeyer interface {
	CostKey() any
}

// memoryKey is the key of a control's memory: the strategy's
// configuration and the target's cost key (nil, no memory, when the
// target has none).
func memoryKey(config any, t Target) any {
	k, ok := t.(CostKeyer)
	if !ok {
		return nil
	}
	return struct{ config, target any }{config, k.CostKey()}
}

// Sharer is implemented by targets whose passes other sequences share
// (the sessions of one model decoding at the same time, each with its own
// rows in one pass over the weights). A guessing round in a shared pass
// makes that pass longer for all the sequences in it, so the control
// charges the round for their wait too (see charge): Share is, for the
// target's last pass, the number of sequences in it times the fraction of
// its extra rows (those beyond one row per sequence) that were the
// target's own; 1 for a pass of its own.
type Sharer interface {
	Share() float64
}

// watch makes the control charge t's shared passes (see Sharer).
func (c *control) watch(t Target) {
	c.sharer, _ = t.(Sharer)
}

// charge is the cost of a guessing round of ns on a target whose last
// pass others shared: a plain pass, and the part of the round's excess
// over it that the target's own rows caused, once for every sequence in
// the pass, each of which waited as long (Sharer.Share). judge weighs it;
// the verdict that a round size is hopeless rests on the round's own time
// (the sharing changes from pass to pass).
func (c *control) charge(ns float64) float64 {
	if c.sharer == nil || c.plain == 0 || ns <= c.plain {
		return ns
	}
	return c.plain + c.sharer.Share()*(ns-c.plain)
}

// plainNext reports whether the next step should be plain.
func (c *control) plainNext() bool { return !c.off && (c.never || c.probe > 0 || c.left > 0) }

func avg(old, x float64) float64 {
	if old == 0 {
		return x
	}
	return old + ewma*(x-old)
}

// low folds the time x into the low envelope v of a pass's time: it takes
// a faster time at once, and moves a twentieth of the way to a slower one
// but by at most 5%. A pass's work is fixed and what disturbs its timing
// only adds to it, so the fastest recent time is the best estimate of its
// cost: an interrupted pass, however long, moves it by 5% at most (undone
// by the next undisturbed pass), while a lasting change (a longer
// context, a slower core) is followed within a few dozen passes.
func low(v, x float64) float64 {
	if v == 0 || x < v {
		return x
	}
	return v + min(0.05*(x-v), 0.05*v)
}

// plainDone records a plain step of d.
func (c *control) plainDone(d time.Duration, st *Stats) {
	ns := float64(d.Nanoseconds())
	c.plain = low(c.plain, ns)
	c.plainAvg = avg(c.plainAvg, ns)
	st.PlainTokenNs = c.plainAvg
	if c.probe > 0 {
		c.probe--
	} else if c.left > 0 {
		c.left--
		if c.left == 0 {
			c.rounds, c.recent = 0, c.recent[:0]
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
	c.round[limit] = low(c.round[limit], ns)
	c.seen[limit]++
	c.remember(roundSize{limit, tokens, (c.charge(ns) - ns) / c.plain})
	hopeless := c.round[limit] >= float64(limit)*c.plain
	switch {
	case hopeless && c.seen[limit] >= neverRounds:
		// a round of this size costs what it could ever return, on the
		// best of several timings: stop for good (and for the next
		// generations under the same key, for a long plain stretch)
		c.never = true
		c.left = maxBackoff
		st.Fallbacks++
		c.noteHopeless(limit, st)
	case hopeless:
		// on its first timing: a plain stretch, then one more round to
		// confirm (a disturbed first timing costs that stretch, not the
		// rest of the generation)
		c.left = hopelessBackoff
		c.rounds, c.recent = 0, c.recent[:0]
		st.Fallbacks++
		c.noteHopeless(limit, st)
	default:
		c.judge(st)
	}
}

// missDone records a step of d that paid for a guess but found none
// worth verifying and decoded plainly (a draft model below its
// confidence threshold): one token, at the cost of the guess and the
// plain pass.
func (c *control) missDone(d time.Duration, st *Stats) {
	if c.off || c.plain == 0 {
		return
	}
	c.round[missSize] = low(c.round[missSize], float64(d.Nanoseconds()))
	c.remember(roundSize{missSize, 1, 0})
	c.judge(st)
}

// missSize keys the cost of a missed guess in control.round.
const missSize = 0

// remember adds a round to the recent ones.
func (c *control) remember(r roundSize) {
	c.rounds++
	if len(c.recent) == window {
		c.recent = append(c.recent[:0], c.recent[1:]...)
	}
	c.recent = append(c.recent, r)
}

// judge falls back to plain decoding when the recent rounds chose fewer
// tokens than they cost in plain passes, each at the current estimate of
// a round of its size.
func (c *control) judge(st *Stats) {
	var cost, gain float64
	for _, r := range c.recent {
		cost += c.round[r.limit]/c.plain + r.shared
		gain += float64(r.tokens)
	}
	switch {
	case (c.rounds >= warmRounds || cost >= judgeCost) && gain < cost:
		c.left = c.backoff
		c.backoff = min(2*c.backoff, maxBackoff)
		st.Fallbacks++
	case c.rounds >= warmRounds:
		c.backoff = firstBackoff
	}
}

// noteHopeless says in st why guessing stopped, once.
func (c *control) noteHopeless(limit int, st *Stats) {
	if st.Note == "" {
		st.Note = fmt.Sprintf("a guessing pass costs %.1f plain passes and chooses at most %d tokens: plain decoding", c.round[limit]/c.plain, limit)
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
