package constrain

import "math"

// Mask keeps a generation to one JSON value by setting the logits of the
// tokens that cannot follow to -Inf. It knows each token's bytes and the
// ids that end generation: those are allowed only once the value is
// complete, and then they are all that is allowed. When the tokens left
// are few, only tokens after which the shortest completion still fits
// are allowed, so the output is complete JSON whenever the vocabulary
// holds the single-byte tokens of that completion.
type Mask struct {
	tokens  [][]byte // bytes of each id; nil for ids with no text
	stop    map[int]bool
	j       *JSON
	scratch JSON
	fed     int // generated ids fed to j
	budget  int // tokens the generation may produce (0: unbounded)
	broken  bool
}

// NewMask makes a mask for one generation. tokens holds the bytes of
// each id (nil or empty: never generated), stop the ids that end
// generation, budget the most tokens the generation produces (0: no
// limit).
func NewMask(tokens [][]byte, stop []int, budget int, objectOnly bool) *Mask {
	m := &Mask{tokens: tokens, stop: map[int]bool{}, j: NewJSON(objectOnly), budget: budget}
	for _, id := range stop {
		m.stop[id] = true
	}
	return m
}

// Apply masks logits before the next token is drawn; generated are the
// ids drawn so far in this generation.
func (m *Mask) Apply(logits []float32, generated []int) {
	for ; m.fed < len(generated); m.fed++ {
		id := generated[m.fed]
		if id < 0 || id >= len(m.tokens) || !m.j.Feed(m.tokens[id]) {
			m.broken = true // a drawn token the mask did not allow
		}
	}
	if m.broken {
		return
	}
	neg := float32(math.Inf(-1))
	if m.j.Done() {
		for i := range logits {
			if !m.stop[i] {
				logits[i] = neg
			}
		}
		return
	}
	// with few tokens left, a token must leave room to finish (one token
	// per byte of the shortest completion at worst)
	left := -1
	if m.budget > 0 {
		left = m.budget - len(generated)
		if left > MaxDepth+16 {
			left = -1
		}
	}
	allowed := 0
	for i := range logits {
		var t []byte
		if i < len(m.tokens) {
			t = m.tokens[i]
		}
		ok := len(t) > 0 && m.j.Accepts(t, &m.scratch)
		if ok && left >= 0 {
			ok = m.scratch.ClosingLen() <= left-1
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

// Done reports whether the text fed so far is a complete value.
func (m *Mask) Done() bool { return !m.broken && m.j.Done() }
