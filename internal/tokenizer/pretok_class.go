package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes of the hand-written pre-tokenizer splitters, as bits.
// They follow regexp2, which the splitters must agree with: \p{..} classes
// are Go's unicode tables, \s is unicode.IsSpace, and a byte that is not
// valid UTF-8 is one U+FFFD character (as pretokRegex feeds it), which
// belongs to none of the classes.
const (
	pcL  uint8 = 1 << iota // \p{L}
	pcN                    // \p{N}
	pcS                    // \s
	pcNL                   // \r or \n
	pcU                    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	pcW                    // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
)

// pcOther is the class [^\s\p{L}\p{N}] (punctuation, symbols, marks...):
// none of pcL, pcN, pcS is set.
func pcOther(c uint8) bool { return c&(pcL|pcN|pcS) == 0 }

// pcPrefix is the class [^\r\n\p{L}\p{N}].
func pcPrefix(c uint8) bool { return c&(pcL|pcN|pcNL) == 0 }

// pretokRuneClass computes the class bits of r from the unicode tables.
func pretokRuneClass(r rune) uint8 {
	var c uint8
	if unicode.Is(unicode.L, r) {
		c |= pcL
	}
	if unicode.Is(unicode.N, r) {
		c |= pcN
	}
	if unicode.IsSpace(r) {
		c |= pcS
	}
	if r == '\r' || r == '\n' {
		c |= pcNL
	}
	lm, lo, m := unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r), unicode.Is(unicode.M, r)
	if unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r) || lm || lo || m {
		c |= pcU
	}
	if unicode.Is(unicode.Ll, r) || lm || lo || m {
		c |= pcW
	}
	return c
}

// pcASCII holds the classes of the ASCII characters; pcBMP, built on first
// use, those of the Basic Multilingual Plane.
var (
	pcASCII = func() (t [utf8.RuneSelf]uint8) {
		for r := range t {
			t[r] = pretokRuneClass(rune(r))
		}
		return t
	}()
	pcBMP = sync.OnceValue(func() *[1 << 16]uint8 {
		t := new([1 << 16]uint8)
		for r := range t {
			t[r] = pretokRuneClass(rune(r))
		}
		return t
	})
)

// pcTable gives the classes of the characters of a string.
type pcTable struct{ bmp *[1 << 16]uint8 }

func newPCTable() pcTable { return pcTable{bmp: pcBMP()} }

// at returns the class of the character at s[i] and its length in bytes
// (1 for a byte that is not valid UTF-8). i must be < len(s).
func (t pcTable) at(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return pcASCII[c], 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	if r < 1<<16 {
		return t.bmp[r], size
	}
	return pretokRuneClass(r), size
}

// run returns the end of the run of characters from i whose class has a
// bit of mask set, stopping after max characters (max < 0: no limit).
func (t pcTable) run(s string, i int, mask uint8, max int) int {
	for i < len(s) && max != 0 {
		c, size := t.at(s, i)
		if c&mask == 0 {
			break
		}
		i += size
		max--
	}
	return i
}

// runOther returns the end of the run of [^\s\p{L}\p{N}] characters from
// i.
func (t pcTable) runOther(s string, i int) int {
	for i < len(s) {
		c, size := t.at(s, i)
		if !pcOther(c) {
			break
		}
		i += size
	}
	return i
}

// pretokContraction returns the length in bytes of the English contraction
// ('s 't 're 've 'm 'll 'd) at s[i:], or 0. With fold, letters match in
// either case, as regexp2's (?i:...) does: it lowers each text character
// with unicode.ToLower.
func pretokContraction(s string, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	j := i + 1
	next := func() rune {
		if j >= len(s) {
			return -1
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		j += size
		if fold {
			r = unicode.ToLower(r)
		}
		return r
	}
	switch next() {
	case 's', 't', 'm', 'd':
		return j - i
	case 'r', 'v':
		if next() == 'e' {
			return j - i
		}
	case 'l':
		if next() == 'l' {
			return j - i
		}
	}
	return 0
}

// pretokSpaces matches the whitespace alternatives shared by the patterns,
// at i where a \s character starts: with nl, \s*[\r\n]+ first; then
// \s+(?!\S) and \s+.
func (t pcTable) spaces(s string, i int, nl bool) int {
	e, lastNL, last := i, -1, i
	for e < len(s) {
		c, size := t.at(s, e)
		if c&pcS == 0 {
			break
		}
		if c&pcNL != 0 {
			lastNL = e
		}
		last = e
		e += size
	}
	switch {
	case nl && lastNL >= 0:
		return lastNL + 1 // \r and \n are one byte
	case e == len(s) || last == i:
		return e
	}
	return last // leave the last space to the word that follows
}
