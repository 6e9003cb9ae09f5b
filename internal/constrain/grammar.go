package constrain

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// Grammar is a compiled context-free grammar over Unicode characters,
// from GBNF (ParseGBNF) or a regular expression (CompileRegex), ready to
// drive a GrammarRecognizer. It is immutable and safe to share.
//
// Every rule can end (has a finite shortest string) and no rule is
// left-recursive, so a recognizer never loops and always knows the
// shortest way to finish.
type Grammar struct {
	elems   []elem      // the alternatives, each closed by an end element
	sets    []runes     // character sets, as sorted disjoint ranges
	ascii   [][2]uint64 // each set's characters below 128, as bits
	setMin  []int       // bytes of each set's shortest character
	alts    [][]int     // the start of each alternative of each rule
	restMin []int       // per element: bytes of the shortest rest of its alternative
	root    int
	growth  int
}

type elemKind uint8

const (
	eEnd  elemKind = iota // the alternative is over
	eSet                  // one character of a set
	eRule                 // a rule
)

type elem struct {
	kind elemKind
	arg  int // the set or the rule
}

// runes is a set of characters as sorted, disjoint, non-adjacent
// inclusive ranges.
type runes [][2]rune

func (s runes) has(r rune) bool {
	_, ok := slices.BinarySearchFunc(s, r, func(x [2]rune, r rune) int {
		switch {
		case x[1] < r:
			return -1
		case x[0] > r:
			return 1
		}
		return 0
	})
	return ok
}

// meets reports whether s holds a character in [lo, hi].
func (s runes) meets(lo, hi rune) bool {
	for _, x := range s {
		if x[0] <= hi && x[1] >= lo {
			return true
		}
	}
	return false
}

// normRunes sorts and merges ranges.
func normRunes(rs [][2]rune) runes {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b [2]rune) int { return int(a[0]) - int(b[0]) })
	out := runes{}
	for _, r := range rs {
		if r[0] > r[1] {
			continue
		}
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// minus returns s without the characters in [lo, hi].
func (s runes) minus(lo, hi rune) runes {
	out := runes{}
	for _, x := range s {
		if x[1] < lo || x[0] > hi {
			out = append(out, x)
			continue
		}
		if x[0] < lo {
			out = append(out, [2]rune{x[0], lo - 1})
		}
		if x[1] > hi {
			out = append(out, [2]rune{hi + 1, x[1]})
		}
	}
	return out
}

// negate returns the characters not in s.
func (s runes) negate() runes {
	out := runes{}
	next := rune(0)
	for _, r := range s {
		if r[0] > next {
			out = append(out, [2]rune{next, r[0] - 1})
		}
		next = r[1] + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, [2]rune{next, utf8.MaxRune})
	}
	return out
}

// anyRune is every character.
var anyRune = runes{{0, utf8.MaxRune}}

// where names a place in a grammar's source for error messages.
type where interface{ at() string }

// builder turns rules of items into a Grammar, checking that every rule
// can end and none is left-recursive.
type builder struct {
	rules [][][]item // per rule, its alternatives
	names []string
	from  []where // where each rule is defined
	sets  []runes
}

// item is one element of an alternative: a set (rule < 0) or a rule.
type item struct {
	set, rule int
}

func (b *builder) addSet(s runes) item {
	b.sets = append(b.sets, s)
	return item{set: len(b.sets) - 1, rule: -1}
}

func (b *builder) addRule(name string, w where) int {
	b.rules = append(b.rules, nil)
	b.names = append(b.names, name)
	b.from = append(b.from, w)
	return len(b.rules) - 1
}

func runeLen(r rune) int { return max(1, utf8.RuneLen(r)) }

// build checks the rules and flattens them.
func (b *builder) build(root int) (*Grammar, error) {
	g := &Grammar{root: root}
	for _, s := range b.sets {
		// surrogates have no UTF-8 encoding
		s = s.minus(0xD800, 0xDFFF)
		g.sets = append(g.sets, s)
		var bits [2]uint64
		for r := rune(0); r < 128; r++ {
			if s.has(r) {
				bits[r>>6] |= 1 << (r & 63)
			}
		}
		g.ascii = append(g.ascii, bits)
		if len(s) == 0 {
			g.setMin = append(g.setMin, inf)
		} else {
			g.setMin = append(g.setMin, runeLen(s[0][0]))
		}
	}
	// shortest strings, to a fixed point
	ruleMin := make([]int, len(b.rules))
	for i := range ruleMin {
		ruleMin[i] = inf
	}
	seqMin := func(seq []item) int {
		n := 0
		for _, it := range seq {
			m := ruleMin[max(it.rule, 0)]
			if it.rule < 0 {
				m = g.setMin[it.set]
			}
			if m >= inf {
				return inf
			}
			n += m
		}
		return n
	}
	// a rule is worked out again when a rule it uses gets shorter
	users := make([][]int, len(b.rules))
	for r, alts := range b.rules {
		for _, seq := range alts {
			for _, it := range seq {
				if it.rule >= 0 {
					users[it.rule] = append(users[it.rule], r)
				}
			}
		}
	}
	queue := make([]int, 0, len(b.rules))
	queued := make([]bool, len(b.rules))
	for r := range b.rules {
		queue, queued[r] = append(queue, r), true
	}
	for len(queue) > 0 {
		r := queue[0]
		queue, queued[r] = queue[1:], false
		m := inf
		for _, seq := range b.rules[r] {
			m = min(m, seqMin(seq))
		}
		if m >= ruleMin[r] {
			continue
		}
		ruleMin[r] = m
		for _, u := range users[r] {
			if !queued[u] {
				queue, queued[u] = append(queue, u), true
			}
		}
	}
	for r := range b.rules {
		if ruleMin[r] >= inf {
			return nil, fmt.Errorf("%s: %s can never end (every alternative needs itself or an empty character set)", b.from[r].at(), b.names[r])
		}
	}
	// left recursion: a rule reached again before any character
	state := make([]uint8, len(b.rules)) // 0 new, 1 on the path, 2 done
	var visit func(r int) error
	visit = func(r int) error {
		switch state[r] {
		case 1:
			return fmt.Errorf("%s: %s is left-recursive (it can reach itself before reading a character)", b.from[r].at(), b.names[r])
		case 2:
			return nil
		}
		state[r] = 1
		for _, seq := range b.rules[r] {
			for _, it := range seq {
				if it.rule < 0 {
					break
				}
				if err := visit(it.rule); err != nil {
					return err
				}
				if ruleMin[it.rule] > 0 {
					break
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range b.rules {
		if err := visit(r); err != nil {
			return nil, err
		}
	}
	// flatten
	g.alts = make([][]int, len(b.rules))
	for r, alts := range b.rules {
		maxAlt := 0
		for _, seq := range alts {
			g.alts[r] = append(g.alts[r], len(g.elems))
			for _, it := range seq {
				if it.rule < 0 {
					g.elems = append(g.elems, elem{kind: eSet, arg: it.set})
				} else {
					g.elems = append(g.elems, elem{kind: eRule, arg: it.rule})
				}
			}
			g.elems = append(g.elems, elem{kind: eEnd})
			maxAlt = max(maxAlt, seqMin(seq))
		}
		g.growth += maxAlt - ruleMin[r]
	}
	g.growth = min(g.growth+utf8.UTFMax, inf/4)
	g.restMin = make([]int, len(g.elems))
	for i := len(g.elems) - 1; i >= 0; i-- {
		e := g.elems[i]
		switch e.kind {
		case eSet:
			g.restMin[i] = g.setMin[e.arg] + g.restMin[i+1]
		case eRule:
			g.restMin[i] = ruleMin[e.arg] + g.restMin[i+1]
		}
	}
	return g, nil
}

// maxStacks bounds the parses a recognizer follows at once; past it a
// highly ambiguous grammar keeps only the first ones.
const maxStacks = 1024

// maxFrames bounds the frames a recognizer keeps for reuse; past it it
// starts afresh (the frames in use stay valid).
const maxFrames = 1 << 17

// gframe is one level of a parse stack: where to continue in an
// alternative, and the frame to return to after it. A frame is made
// once per position and return, and never changed but for its caches.
type gframe struct {
	pos     int
	next    *gframe
	closing int // bytes of the shortest completion of this stack
	// the stacks after this frame's character, once computed
	succ       []*gframe
	succAccept bool
	succDone   bool
	emark      uint32 // the expansion that last reached this frame
	omark      uint32 // the step that last output this frame
	id         uint32 // the frame's number in its arena, for state keys
}

type gframeKey struct {
	pos  int
	next *gframe
}

// arena makes frames, the same frame for the same position and return,
// so that parses that meet again are followed once and what follows a
// frame is worked out once.
type arena struct {
	g          *Grammar
	own        map[gframeKey]*gframe
	egen, ogen uint32
	nid        uint32 // frames made
}

// GrammarRecognizer recognizes the prefixes of the strings of a
// Grammar, byte by byte (UTF-8), following every parse at once. It is
// not safe for concurrent use.
type GrammarRecognizer struct {
	g      *Grammar
	stacks []*gframe    // live parses; the top of each is a character set
	accept bool         // a parse is complete
	pend   []byte       // the bytes of an unfinished character
	a      *arena       // shared by the recognizer's forks
	bufs   [2][]*gframe // Try's stacks
}

// NewGrammarRecognizer returns a recognizer at the start of g's root.
func NewGrammarRecognizer(g *Grammar) *GrammarRecognizer {
	r := &GrammarRecognizer{g: g, a: &arena{g: g, own: map[gframeKey]*gframe{}}}
	r.a.egen++
	var out []*gframe
	accept := false
	for _, alt := range g.alts[g.root] {
		out, accept = r.a.expand(r.a.mk(alt, nil), out, accept)
	}
	r.stacks, r.accept = out, accept
	return r
}

func (a *arena) mk(pos int, next *gframe) *gframe {
	k := gframeKey{pos, next}
	if f, ok := a.own[k]; ok {
		return f
	}
	if len(a.own) >= maxFrames {
		a.own = map[gframeKey]*gframe{}
	}
	a.nid++
	f := &gframe{pos: pos, next: next, closing: a.g.restMin[pos], id: a.nid}
	if next != nil {
		f.closing += next.closing
	}
	a.own[k] = f
	return f
}

// expand adds to out the stacks f stands for once every rule at its top
// is opened and every finished alternative returned from; frames
// already reached in this expansion (a.egen) are not followed again.
func (a *arena) expand(f *gframe, out []*gframe, accept bool) ([]*gframe, bool) {
	g := a.g
	for f != nil && g.elems[f.pos].kind == eEnd {
		f = f.next
	}
	if f == nil {
		return out, true
	}
	if f.emark == a.egen {
		return out, accept
	}
	f.emark = a.egen
	e := g.elems[f.pos]
	if e.kind == eSet {
		return append(out, f), accept
	}
	// a rule last in its alternative returns where the alternative
	// would: the stack does not grow with right recursion
	ret := f.next
	if g.elems[f.pos+1].kind != eEnd {
		ret = a.mk(f.pos+1, f.next)
	}
	for _, alt := range g.alts[e.arg] {
		out, accept = a.expand(a.mk(alt, ret), out, accept)
	}
	return out, accept
}

// successors returns the stacks after f's character.
func (a *arena) successors(f *gframe) ([]*gframe, bool) {
	if !f.succDone {
		a.egen++
		f.succ, f.succAccept = a.expand(a.mk(f.pos+1, f.next), nil, false)
		f.succDone = true
	}
	return f.succ, f.succAccept
}

// utf8Need is the length of the character a lead byte starts (0: not a
// lead byte).
func utf8Need(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c >= 0xC2 && c <= 0xDF:
		return 2
	case c >= 0xE0 && c <= 0xEF:
		return 3
	case c >= 0xF0 && c <= 0xF4:
		return 4
	}
	return 0
}

// prefixRange is the range of characters whose encoding starts with p
// (an unfinished character of the length its lead byte tells).
func prefixRange(p []byte) (lo, hi rune) {
	n := utf8Need(p[0])
	lead := rune(p[0]) & (0x7F >> n)
	lo, hi = lead, lead
	for i := 1; i < n; i++ {
		var c rune = 0x80
		if i < len(p) {
			c = rune(p[i])
		}
		lo = lo<<6 | (c & 0x3F)
		if i >= len(p) {
			c = 0xBF
		}
		hi = hi<<6 | (c & 0x3F)
	}
	// the shortest encoding is the only valid one
	lo = max(lo, [...]rune{0, 0, 0x80, 0x800, 0x10000}[n])
	return lo, min(hi, utf8.MaxRune)
}

// has reports whether set i holds r.
func (g *Grammar) has(i int, r rune) bool {
	if r < 128 {
		return g.ascii[i][r>>6]&(1<<(r&63)) != 0
	}
	return g.sets[i].has(r)
}

// step advances stacks over one byte; pend holds the bytes of the
// unfinished character before it. It returns the new stacks (in out's
// array), whether a parse is complete, the new pending bytes and
// whether c can follow.
func (a *arena) step(stacks []*gframe, pend []byte, c byte, out []*gframe) ([]*gframe, bool, []byte, bool) {
	g := a.g
	out = out[:0]
	if len(pend) == 0 {
		if utf8Need(c) == 0 {
			return out, false, pend, false
		}
	} else if c&0xC0 != 0x80 {
		return out, false, pend, false
	}
	pend = append(pend, c)
	if n := utf8Need(pend[0]); len(pend) < n {
		lo, hi := prefixRange(pend)
		for _, f := range stacks {
			if lo <= hi && g.sets[g.elems[f.pos].arg].meets(lo, hi) {
				out = append(out, f)
			}
		}
		return out, false, pend, len(out) > 0
	}
	r, size := utf8.DecodeRune(pend)
	if r == utf8.RuneError && size <= 1 {
		return out, false, pend[:0], false
	}
	pend = pend[:0]
	accept := false
	a.ogen++
	for _, f := range stacks {
		if !g.has(g.elems[f.pos].arg, r) {
			continue
		}
		succ, acc := a.successors(f)
		accept = accept || acc
		for _, s := range succ {
			if s.omark != a.ogen {
				s.omark = a.ogen
				out = append(out, s)
			}
		}
	}
	if len(out) > maxStacks {
		// an ambiguous grammar: follow the first parses only (what is
		// accepted is still in the language; some strings may be lost)
		out = out[:maxStacks]
	}
	return out, accept, pend, len(out) > 0 || accept
}

// Feed advances over b; it returns false if b cannot follow (leaving r
// in an undefined state).
func (r *GrammarRecognizer) Feed(b []byte) bool {
	for _, c := range b {
		stacks, accept, pend, ok := r.a.step(r.stacks, r.pend, c, nil)
		if !ok {
			return false
		}
		r.stacks, r.pend = stacks, pend
		if len(pend) == 0 {
			r.accept = accept
		}
	}
	return true
}

// Done reports whether the bytes so far are a complete string of the
// grammar.
func (r *GrammarRecognizer) Done() bool { return r.accept && len(r.pend) == 0 }

// ClosingLen is the length in bytes of the shortest completion.
func (r *GrammarRecognizer) ClosingLen() int {
	return r.g.closing(r.stacks, r.pend, r.accept)
}

func (g *Grammar) closing(stacks []*gframe, pend []byte, accept bool) int {
	if len(pend) == 0 && accept {
		return 0
	}
	n := inf
	for _, f := range stacks {
		c := f.closing
		if len(pend) > 0 {
			c += utf8Need(pend[0]) - len(pend) - g.setMin[g.elems[f.pos].arg]
		}
		n = min(n, c)
	}
	if n == inf {
		return 0
	}
	return n
}

// Growth is the most one byte can add to ClosingLen.
func (r *GrammarRecognizer) Growth() int { return r.g.growth }

// Try reports whether b can follow, leaving r unchanged, and when
// closing is set the length of the shortest completion after b.
func (r *GrammarRecognizer) Try(b []byte, closing bool) (int, bool) {
	stacks, accept := r.stacks, r.accept
	var pend [utf8.UTFMax]byte
	np := copy(pend[:], r.pend)
	for i, c := range b {
		next, acc, p, ok := r.a.step(stacks, pend[:np], c, r.bufs[i%2])
		r.bufs[i%2] = next[:0]
		if !ok {
			return 0, false
		}
		np = len(p)
		if np == 0 {
			accept = acc
		}
		stacks = next
	}
	if !closing {
		return 0, true
	}
	return r.g.closing(stacks, pend[:np], accept), true
}
