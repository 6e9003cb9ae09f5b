package tokenizer

import "unicode"

// The pre-tokenizer regexes of the common families are matched by hand:
// each splitter below is the regex it is named after, alternative by
// alternative, with regexp2's leftmost-first, greedy, backtracking
// semantics worked out. Every character of the text starts a match of these
// regexes (letters, digits, spaces and everything else each have an
// alternative), so the matches tile the text and a splitter only needs the
// end of the match that starts at a given offset. The tests compare every
// splitter with regexp2 on the fixtures, on a whole novel, on every Unicode
// character and under fuzzing.

// pretokScan is a hand-written splitter: next returns the end (> i) of the
// match that starts at s[i], for i < len(s).
type pretokScan struct {
	name string
	next func(t pcTable, s string, i int) int
}

func (p pretokScan) find(dst [][2]int, s string) [][2]int {
	t := newPCTable()
	for i := 0; i < len(s); {
		j := p.next(t, s, i)
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

// walk calls fn with every match of s in order.
func (p pretokScan) walk(s string, fn func(string)) {
	t := newPCTable()
	for i := 0; i < len(s); {
		j := p.next(t, s, i)
		fn(s[i:j])
		i = j
	}
}

// fastSplitter returns a hand-written matcher equivalent to pattern, or nil
// when pattern is not one of the known ones (byte for byte).
func fastSplitter(pattern string) pretokMatcher {
	switch pattern {
	case pretokGPT2:
		return pretokScan{"gpt-2", scanGPT2}
	case pretokLlama3:
		return pretokScan{"llama3", scanLlama3}
	case pretokQwen2:
		return pretokScan{"qwen2", scanQwen2}
	case pretokGPT4o:
		return pretokScan{"gpt-4o", scanGPT4o}
	case pretokDigit:
		return pretokFunc{in: unicode.IsNumber, single: true}
	case `\p{N}+`:
		return pretokFunc{in: unicode.IsNumber}
	}
	return nil
}

// scanGPT2 matches
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func scanGPT2(t pcTable, s string, i int) int {
	if n := pretokContraction(s, i, false); n > 0 {
		return i + n
	}
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1 // " ?" then a non-space; without the space s[i] is \s
	}
	c, size := t.at(s, j)
	switch {
	case c&pcL != 0:
		return t.run(s, j+size, pcL, -1)
	case c&pcN != 0:
		return t.run(s, j+size, pcN, -1)
	case c&pcS == 0:
		return t.runOther(s, j+size)
	}
	return t.spaces(s, i, false)
}

// scanLlama3 matches
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func scanLlama3(t pcTable, s string, i int) int { return scanLlamaDigits(t, s, i, 3) }

// scanQwen2 matches scanLlama3's regex with \p{N} in place of \p{N}{1,3}.
func scanQwen2(t pcTable, s string, i int) int { return scanLlamaDigits(t, s, i, 1) }

func scanLlamaDigits(t pcTable, s string, i, digits int) int {
	if n := pretokContraction(s, i, true); n > 0 {
		return i + n
	}
	c, size := t.at(s, i)
	if c&pcL != 0 {
		return t.run(s, i+size, pcL, -1)
	}
	if c&pcN != 0 {
		return t.run(s, i+size, pcN, digits-1)
	}
	if pcPrefix(c) && i+size < len(s) {
		if c1, size1 := t.at(s, i+size); c1&pcL != 0 {
			return t.run(s, i+size+size1, pcL, -1)
		}
	}
	if e, ok := t.punct(s, i, c, size, false); ok {
		return e
	}
	return t.spaces(s, i, true)
}

// punct matches " ?[^\s\p{L}\p{N}]+[\r\n]*" at i, whose character has class
// c and length size; slash adds '/' to the trailing class.
func (t pcTable) punct(s string, i int, c uint8, size int, slash bool) (int, bool) {
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
		c, size = t.at(s, j)
	}
	if !pcOther(c) {
		return 0, false
	}
	e := t.runOther(s, j+size)
	for e < len(s) && (s[e] == '\r' || s[e] == '\n' || (slash && s[e] == '/')) {
		e++
	}
	return e, true
}

// scanGPT4o matches o200k's regex (GPT-4o, Phi-4):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Call the two letter classes U and W (they share Lm, Lo and M).
func scanGPT4o(t pcTable, s string, i int) int {
	c, size := t.at(s, i)
	// The optional prefix is tried first taken, then not taken.
	prefix := pcPrefix(c) && i+size < len(s)
	if prefix {
		if e, ok := scanUW(t, s, i+size); ok {
			return e
		}
	}
	if c&(pcU|pcW) != 0 {
		if e, ok := scanUW(t, s, i); ok {
			return e
		}
	}
	if prefix {
		if e, ok := scanUpper(t, s, i+size); ok {
			return e
		}
	}
	if c&pcU != 0 {
		e, _ := scanUpper(t, s, i) // cannot fail: s[i] is in U
		return e
	}
	if c&pcN != 0 {
		return t.run(s, i+size, pcN, 2)
	}
	if e, ok := t.punct(s, i, c, size, true); ok {
		return e
	}
	return t.spaces(s, i, true)
}

// scanUW matches U*W+ then an optional contraction at i. U* is greedy and
// gives characters back one by one until W+ can match: W+ then either
// starts right after the whole U run or, failing that, is the last W
// character inside it.
func scanUW(t pcTable, s string, i int) (int, bool) {
	e, lastW := i, -1
	for e < len(s) {
		c, size := t.at(s, e)
		if c&pcU == 0 {
			break
		}
		e += size
		if c&pcW != 0 {
			lastW = e
		}
	}
	if e < len(s) {
		if c, size := t.at(s, e); c&pcW != 0 {
			lastW = t.run(s, e+size, pcW, -1)
		}
	}
	if lastW < 0 {
		return 0, false
	}
	return lastW + pretokContraction(s, lastW, true), true
}

// scanUpper matches U+W* then an optional contraction at i.
// It fails only when s[i] is not in U.
func scanUpper(t pcTable, s string, i int) (int, bool) {
	e := t.run(s, i, pcU, -1)
	if e == i {
		return 0, false
	}
	e = t.run(s, e, pcW, -1)
	return e + pretokContraction(s, e, true), true
}
