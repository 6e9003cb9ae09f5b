package constrain

import "math"

// Recognizer is a format a Mask keeps generation to: it reads bytes,
// knows which may come next and how short the rest can be.
type Recognizer interface {
	// Feed advances over b; it returns false if b cannot follow.
	Feed(b []byte) bool
	// Done reports whether the bytes so far are complete.
	Done() bool
	// ClosingLen is the length of the shortest completion.
	ClosingLen() int
	// Try reports whether b can follow, leaving the recognizer
	// unchanged, and when closing is set ClosingLen after b.
	Try(b []byte, closing bool) (int, bool)
	// Growth is the most one byte can add to ClosingLen.
	Growth() int
}

// Mask keeps a generation to a Recognizer's format by setting the
// logits of the tokens that cannot follow to -Inf. It knows each
// token's bytes and the ids that end generation: those are allowed only
// once the text is complete, and then they are all that is allowed.
// Under a budget, a token is allowed only if the fewest whole tokens
// that complete the text after it still fit in what is left, so a
// generation given at least MinBudget tokens always ends complete. The
// fewest tokens are found by a search over the recognizer's states
// (for the recognizers of this package and their compositions); for
// another Recognizer the mask counts one token per byte of the shortest
// completion instead. A token after which the shortest completion, in
// bytes, fits in the tokens left is allowed without a search: when the
// vocabulary holds every single byte (as byte-level vocabularies do)
// such a completion takes at most that many tokens, so the budget is
// kept exactly.
type Mask struct {
	tokens   [][]byte // bytes of each id; nil for ids with no text
	stop     map[int]bool
	r        Recognizer
	fed      int          // generated ids fed to r
	budget   int          // tokens the generation may produce (0: unbounded)
	maxTok   int          // the longest token, in bytes
	allBytes bool         // every single byte is a token
	search   *tokenSearch // nil when r cannot fork
	broken   bool
}

// NewMask makes a mask that keeps one generation to a JSON value (an
// object when objectOnly is set). tokens holds the bytes of each id (nil
// or empty: never generated), stop the ids that end generation, budget
// the most tokens the generation produces (0: no limit).
func NewMask(tokens [][]byte, stop []int, budget int, objectOnly bool) *Mask {
	return NewMaskFor(NewJSON(objectOnly), tokens, stop, budget)
}

// NewMaskFor makes a mask that keeps one generation to r's format; the
// other arguments are as for NewMask. The mask owns r.
func NewMaskFor(r Recognizer, tokens [][]byte, stop []int, budget int) *Mask {
	m := &Mask{tokens: tokens, stop: map[int]bool{}, r: r, budget: budget}
	for _, id := range stop {
		m.stop[id] = true
	}
	var single [256]bool
	n := 0
	for _, t := range tokens {
		m.maxTok = max(m.maxTok, len(t))
		if len(t) == 1 && !single[t[0]] {
			single[t[0]] = true
			n++
		}
	}
	m.allBytes = n == 256
	if canFork(r) {
		m.search = newTokenSearch(tokens)
	}
	return m
}

// Apply masks logits before the next token is drawn; generated are the
// ids drawn so far in this generation.
func (m *Mask) Apply(logits []float32, generated []int) {
	for ; m.fed < len(generated); m.fed++ {
		id := generated[m.fed]
		if id < 0 || id >= len(m.tokens) || !m.r.Feed(m.tokens[id]) {
			m.broken = true // a drawn token the mask did not allow
		}
	}
	if m.broken {
		return
	}
	neg := float32(math.Inf(-1))
	if m.r.Done() {
		for i := range logits {
			if !m.stop[i] {
				logits[i] = neg
			}
		}
		return
	}
	// with few tokens left, a token must leave room to finish; when the
	// vocabulary holds every byte, a completion of n bytes takes at most
	// n tokens, so the check is needed only when one token could grow
	// the completion past what is left, and the search only for tokens
	// whose completion is longer in bytes than the tokens left
	left, check := 0, false
	if m.budget > 0 {
		left = m.budget - len(generated)
		check = left-1 < m.r.ClosingLen()+m.maxTok*m.r.Growth()
	}
	allowed := 0
	for i := range logits {
		var t []byte
		if i < len(m.tokens) {
			t = m.tokens[i]
		}
		ok := false
		if len(t) > 0 {
			var closing int
			closing, ok = m.r.Try(t, check)
			if ok && check && closing > left-1 {
				ok = m.fits(t, left-1, closing)
			}
		}
		if !ok {
			logits[i] = neg
		} else {
			allowed++
		}
	}
	if allowed == 0 {
		// the vocabulary cannot continue (it lacks a needed byte): end
		for id := range m.stop {
			if id < len(logits) {
				logits[id] = 0
			}
		}
	}
}

// Done reports whether the text fed so far is complete.
func (m *Mask) Done() bool { return !m.broken && m.r.Done() }

// fits reports whether a text completed after token t can take at
// most left tokens; closing is the shortest completion after t, in
// bytes, counted one token per byte when the search cannot tell.
func (m *Mask) fits(t []byte, left, closing int) bool {
	if m.search == nil {
		return closing <= left
	}
	f := m.r.(forker).fork()
	f.Feed(t)
	_, st := m.search.fewest(f, left)
	if st == searchUnknown {
		return closing <= left
	}
	return st == searchFound
}

// searchBound is how deep MinTokens searches: with every byte in the
// vocabulary the shortest completion in bytes bounds the tokens.
const searchBound = 256

// exactMin returns the fewest tokens of a complete text from the start,
// and whether the search could tell.
func (m *Mask) exactMin() (int, bool) {
	if m.search == nil {
		return 0, false
	}
	bound := searchBound
	if m.allBytes {
		bound = m.r.ClosingLen()
	}
	n, st := m.search.fewest(m.r, bound)
	switch st {
	case searchFound:
		return n, true
	case searchNone:
		if m.firstClosing() < 0 {
			return -1, true
		}
	}
	return 0, false
}

// firstClosing returns the shortest completion left after one token
// (-1 when no token can start the text).
func (m *Mask) firstClosing() int {
	best := -1
	for _, t := range m.tokens {
		if len(t) == 0 {
			continue
		}
		if c, ok := m.r.Try(t, true); ok && (best < 0 || c < best) {
			best = c
		}
	}
	return best
}

// MinTokens returns the fewest tokens any complete text of the mask's
// format takes, stop token excluded, before anything is fed, found by
// searching the vocabulary's tokens from the start. When the search
// cannot tell (a Recognizer of another package, or too many states) it
// is a lower bound instead: the first token is chosen exactly, and each
// later token shortens the completion by at most the longest token. It
// returns -1 when the vocabulary cannot start the format at all.
func (m *Mask) MinTokens() int {
	if m.fed > 0 || m.broken || m.r.Done() {
		return 0
	}
	if n, ok := m.exactMin(); ok {
		return n
	}
	return m.minTokens(m.firstClosing())
}

// minTokens is MinTokens given the shortest completion after one token.
func (m *Mask) minTokens(best int) int {
	switch {
	case best < 0:
		return -1
	case best == 0 || m.maxTok == 0:
		return 1
	}
	return 1 + (best+m.maxTok-1)/m.maxTok
}

// MinBudget returns the smallest budget under which the mask lets a
// generation start, before anything is fed; with it the generation ends
// complete. It is MinTokens when the search can tell; otherwise it is
// the budget under which even the best first token leaves a completion
// longer than the tokens after it (counted one per byte, as Apply does
// then). It returns -1 when the vocabulary cannot start the format.
func (m *Mask) MinBudget() int {
	if m.fed > 0 || m.broken || m.r.Done() {
		return 0
	}
	if n, ok := m.exactMin(); ok {
		return n
	}
	return m.ByteBudget()
}

// ByteBudget returns the budget under which even the best first token
// leaves a completion longer than the tokens after it, counted one token
// per byte as Apply counts them away from the limit: at least MinBudget
// when the vocabulary holds every byte, and cheap, so a request whose
// budget reaches it needs no search. It returns 0 once text was fed and
// -1 when the vocabulary cannot start the format.
func (m *Mask) ByteBudget() int {
	if m.fed > 0 || m.broken || m.r.Done() {
		return 0
	}
	best := m.firstClosing()
	if best < 0 {
		return -1
	}
	return max(best+1, m.minTokens(best))
}

// DoneWith reports whether the text fed so far and then token id, the
// last one drawn (which Apply has not seen), is complete: a generation
// that reached its token limit there holds a whole reply.
func (m *Mask) DoneWith(id int) bool {
	if m.broken || id < 0 || id >= len(m.tokens) {
		return false
	}
	f, ok := m.r.(forker)
	if !ok || !canFork(m.r) {
		return false
	}
	r := f.fork()
	return r.Feed(m.tokens[id]) && r.Done()
}
