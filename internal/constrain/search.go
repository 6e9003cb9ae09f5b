package constrain

// maxSearchStates bounds the states one token search visits; past it
// the search gives up and the mask falls back to counting bytes.
const maxSearchStates = 1 << 12

// searchResult is what a token search learned about a state.
type searchResult struct {
	n     int  // found: the fewest tokens; else the search's bound
	found bool // a complete text is n tokens away
	ended bool // not found, and no complete text exists at all
	gave  bool // the search gave up: nothing is known
}

// searchStatus is the answer of tokenSearch.fewest.
type searchStatus uint8

const (
	searchFound   searchStatus = iota // the fewest tokens are known
	searchNone                        // none within the bound
	searchUnknown                     // the search gave up
)

// tokenSearch finds the fewest whole tokens of a vocabulary that
// complete a text from a recognizer's state: a breadth-first search
// over the states tokens lead to, with equal states (by key) followed
// once, and its results kept per state.
type tokenSearch struct {
	tokens  [][]byte
	byFirst [256][]int32 // the ids of the tokens starting with each byte
	memo    map[string]searchResult
	key     []byte
}

func newTokenSearch(tokens [][]byte) *tokenSearch {
	s := &tokenSearch{tokens: tokens, memo: map[string]searchResult{}}
	for id, t := range tokens {
		if len(t) > 0 {
			s.byFirst[t[0]] = append(s.byFirst[t[0]], int32(id))
		}
	}
	return s
}

func (s *tokenSearch) keyOf(r Recognizer) string {
	s.key = r.(forker).appendKey(s.key[:0])
	return string(s.key)
}

// fewest returns the fewest tokens that complete a text from r (which it
// leaves unchanged), searching at most bound tokens deep.
func (s *tokenSearch) fewest(r Recognizer, bound int) (int, searchStatus) {
	if r.Done() {
		return 0, searchFound
	}
	k := s.keyOf(r)
	m, hit := s.memo[k]
	if !hit || !m.found && !m.ended && !m.gave && m.n < bound {
		m = s.search(r, bound)
		s.memo[k] = m
	}
	switch {
	case m.gave:
		return 0, searchUnknown
	case m.found && m.n <= bound:
		return m.n, searchFound
	}
	return 0, searchNone
}

func (s *tokenSearch) search(r Recognizer, bound int) searchResult {
	seen := map[string]bool{s.keyOf(r): true}
	level := []Recognizer{r}
	one := make([]byte, 1)
	for depth := 1; depth <= bound; depth++ {
		var next []Recognizer
		for _, st := range level {
			for c := range 256 {
				ids := s.byFirst[c]
				if len(ids) == 0 {
					continue
				}
				one[0] = byte(c)
				if _, ok := st.Try(one, false); !ok {
					continue
				}
				for _, id := range ids {
					t := s.tokens[id]
					if _, ok := st.Try(t, false); !ok {
						continue
					}
					f := st.(forker).fork()
					f.Feed(t)
					if f.Done() {
						return searchResult{n: depth, found: true}
					}
					k := s.keyOf(f)
					if seen[k] {
						continue
					}
					if m, hit := s.memo[k]; hit && m.ended {
						continue
					}
					if len(seen) >= maxSearchStates {
						return searchResult{gave: true}
					}
					seen[k] = true
					next = append(next, f)
				}
			}
		}
		if len(next) == 0 {
			return searchResult{n: bound, ended: true}
		}
		level = next
	}
	return searchResult{n: bound}
}
