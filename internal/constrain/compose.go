package constrain

import "bytes"

// Sequence returns a recognizer of before, then what inner recognizes,
// then after: for instance a tool call's fixed opening, its arguments
// under their schema, and its closing mark. inner ends as soon as it is
// complete and cannot take the next byte, so after should not start
// with a byte inner may take once complete (whitespace, for JSON). The
// sequence owns inner.
func Sequence(before string, inner Recognizer, after string) Recognizer {
	s := &sequence{before: before, inner: inner, after: after, innerLen: inner.ClosingLen()}
	if before == "" {
		s.phase = 1
	}
	return s
}

type sequence struct {
	before, after string
	inner         Recognizer
	phase         int // 0: in before, 1: in inner, 2: in after
	li            int // bytes of before or after matched
	innerLen      int // inner.ClosingLen(), kept up to date
}

func (s *sequence) Done() bool {
	return s.phase == 2 && s.li == len(s.after) || s.phase == 1 && s.after == "" && s.inner.Done()
}

func (s *sequence) ClosingLen() int {
	switch s.phase {
	case 0:
		return len(s.before) - s.li + s.innerLen + len(s.after)
	case 1:
		return s.innerLen + len(s.after)
	}
	return len(s.after) - s.li
}

func (s *sequence) Growth() int { return s.inner.Growth() }

func (s *sequence) Feed(b []byte) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch s.phase {
		case 0:
			if c != s.before[s.li] {
				return false
			}
			if s.li++; s.li == len(s.before) {
				s.phase, s.li = 1, 0
			}
		case 1:
			if _, ok := s.inner.Try(b[i:i+1], false); ok {
				s.inner.Feed(b[i : i+1])
				s.innerLen = s.inner.ClosingLen()
				continue
			}
			if !s.inner.Done() {
				return false
			}
			s.phase, s.li = 2, 0
			i-- // c belongs to after
		case 2:
			if s.li == len(s.after) || c != s.after[s.li] {
				return false
			}
			s.li++
		}
	}
	if s.phase == 0 && s.li == len(s.before) {
		s.phase = 1
	}
	return true
}

// Try follows Feed without changing s: the inner part takes the longest
// run of b it accepts, as Feed does byte by byte.
func (s *sequence) Try(b []byte, closing bool) (int, bool) {
	phase, li := s.phase, s.li
	i := 0
	if phase == 0 {
		for ; i < len(b) && li < len(s.before); i++ {
			if b[i] != s.before[li] {
				return 0, false
			}
			li++
		}
		if li < len(s.before) {
			return len(s.before) - li + s.innerLen + len(s.after), true
		}
		phase, li = 1, 0
	}
	if phase == 1 {
		r := b[i:]
		if len(r) == 0 {
			return s.innerLen + len(s.after), true
		}
		if n, ok := s.inner.Try(r, closing); ok {
			return n + len(s.after), true
		}
		// the longest accepted run must end the inner part (a byte
		// lowers the closing by at most one, so it is at least innerLen)
		// and be followed by the start of after
		if s.after == "" || len(r) <= s.innerLen || bytes.IndexByte(r[s.innerLen:], s.after[0]) < 0 {
			return 0, false
		}
		k := -1
		for j := len(r) - 1; j >= s.innerLen; j-- {
			if n, ok := s.inner.Try(r[:j], true); ok {
				if n == 0 {
					k = j
				}
				break
			}
		}
		if k < 0 {
			return 0, false
		}
		i += k
		phase, li = 2, 0
	}
	for ; i < len(b); i++ {
		if li == len(s.after) || b[i] != s.after[li] {
			return 0, false
		}
		li++
	}
	return len(s.after) - li, true
}

// Choice returns a recognizer of what any of rs recognizes (for
// instance a call of any one of several tools). It owns rs.
func Choice(rs ...Recognizer) Recognizer {
	tags := make([]int, len(rs))
	for i := range tags {
		tags[i] = i
	}
	return &choice{alts: rs, tags: tags}
}

type choice struct {
	alts []Recognizer // the alternatives still possible
	tags []int        // the place in the first list of each of alts
}

func (c *choice) Done() bool {
	for _, r := range c.alts {
		if r.Done() {
			return true
		}
	}
	return false
}

func (c *choice) ClosingLen() int {
	n := -1
	for _, r := range c.alts {
		if l := r.ClosingLen(); n < 0 || l < n {
			n = l
		}
	}
	return max(n, 0)
}

func (c *choice) Growth() int {
	g := 0
	for _, r := range c.alts {
		g = max(g, r.Growth())
	}
	return g
}

func (c *choice) Feed(b []byte) bool {
	alive, tags := c.alts[:0], c.tags[:0]
	for i, r := range c.alts {
		if r.Feed(b) {
			alive, tags = append(alive, r), append(tags, c.tags[i])
		}
	}
	clear(c.alts[len(alive):])
	c.alts, c.tags = alive, tags
	return len(alive) > 0
}

func (c *choice) Try(b []byte, closing bool) (int, bool) {
	n, any := 0, false
	for _, r := range c.alts {
		if l, ok := r.Try(b, closing); ok && (!any || l < n) {
			n, any = l, true
			if !closing {
				break
			}
		}
	}
	return n, any
}
