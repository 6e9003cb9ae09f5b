package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// preTokenizer cuts text into the pieces the model encodes one by one
// (tokenizer.json "pre_tokenizer"). first reports that s starts the input.
type preTokenizer interface {
	preSplit(dst []string, s string, first bool) []string
}

// pretokBehavior says what happens to a delimiter match (tokenizer.json
// Split "behavior").
type pretokBehavior int

const (
	pretokRemoved pretokBehavior = iota
	pretokIsolated
	pretokMergedWithPrevious
	pretokMergedWithNext
	pretokContiguous
)

// pretokMatcher finds the delimiter spans [start,end) of s, in order.
type pretokMatcher interface {
	find(dst [][2]int, s string) [][2]int
}

// preSplit splits on a pattern with a behaviour; invert makes the pattern
// describe the pieces instead of the delimiters.
type preSplitter struct {
	m        pretokMatcher
	behavior pretokBehavior
	invert   bool
}

func (p preSplitter) preSplit(dst []string, s string, _ bool) []string {
	return pretokSplitBy(dst, s, p.m, p.behavior, p.invert)
}

// pretokSplitBy applies one Split step to s.
func pretokSplitBy(dst []string, s string, m pretokMatcher, behavior pretokBehavior, invert bool) []string {
	if s == "" {
		return dst
	}
	var spanBuf [16][2]int
	spans := m.find(spanBuf[:0], s)
	type part struct {
		start, end int
		match      bool
	}
	var partBuf [32]part
	parts := partBuf[:0]
	last := 0
	for _, sp := range spans {
		if sp[1] <= sp[0] {
			continue
		}
		if sp[0] > last {
			parts = append(parts, part{last, sp[0], false})
		}
		parts = append(parts, part{sp[0], sp[1], true})
		last = sp[1]
	}
	if last < len(s) {
		parts = append(parts, part{last, len(s), false})
	}
	if invert {
		for i := range parts {
			parts[i].match = !parts[i].match
		}
	}
	switch behavior {
	case pretokRemoved:
		for _, p := range parts {
			if !p.match {
				dst = append(dst, s[p.start:p.end])
			}
		}
	case pretokIsolated:
		for _, p := range parts {
			dst = append(dst, s[p.start:p.end])
		}
	case pretokContiguous:
		for i := 0; i < len(parts); {
			j := i + 1
			for parts[i].match && j < len(parts) && parts[j].match {
				j++
			}
			dst = append(dst, s[parts[i].start:parts[j-1].end])
			i = j
		}
	case pretokMergedWithPrevious:
		// every match ends the current piece
		start := 0
		for _, p := range parts {
			if p.match {
				dst = append(dst, s[start:p.end])
				start = p.end
			}
		}
		if start < len(s) {
			dst = append(dst, s[start:])
		}
	case pretokMergedWithNext:
		// every match starts a new piece
		start := 0
		for _, p := range parts {
			if p.match && p.start > start {
				dst = append(dst, s[start:p.start])
				start = p.start
			}
		}
		if start < len(s) {
			dst = append(dst, s[start:])
		}
	}
	return dst
}

// preByteLevel is the GPT-2 pre-tokenizer: optional prefix space, then the
// GPT-2 regex. The mapping of bytes to printable characters is done by the
// byte-level model itself, so pieces stay raw bytes here.
type preByteLevel struct {
	addPrefixSpace bool
	useRegex       bool
}

func (p preByteLevel) preSplit(dst []string, s string, _ bool) []string {
	if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	if !p.useRegex {
		return append(dst, s)
	}
	return pretokSplitBy(dst, s, pretokPattern(pretokGPT2), pretokIsolated, false)
}

// metaspaceScheme says where Metaspace prepends its replacement character.
type metaspaceScheme int

const (
	metaspaceAlways metaspaceScheme = iota
	metaspaceFirst
	metaspaceNever
)

// preMetaspace replaces spaces by the replacement character ("▁"),
// prepends one according to the scheme, and optionally splits before each.
type preMetaspace struct {
	replacement string
	scheme      metaspaceScheme
	split       bool
}

func (p preMetaspace) preSplit(dst []string, s string, first bool) []string {
	s = strings.ReplaceAll(s, " ", p.replacement)
	if !strings.HasPrefix(s, p.replacement) &&
		(p.scheme == metaspaceAlways || (p.scheme == metaspaceFirst && first)) {
		s = p.replacement + s
	}
	if !p.split {
		return append(dst, s)
	}
	return pretokSplitBy(dst, s, pretokLiteral(p.replacement), pretokMergedWithNext, false)
}

// pretokLiteral matches a fixed string.
type pretokLiteral string

func (l pretokLiteral) find(dst [][2]int, s string) [][2]int {
	if l == "" {
		return dst
	}
	for i := 0; ; {
		j := strings.Index(s[i:], string(l))
		if j < 0 {
			return dst
		}
		dst = append(dst, [2]int{i + j, i + j + len(l)})
		i += j + len(l)
	}
}

// pretokFunc matches runs of characters for which in holds (single
// characters when single is set).
type pretokFunc struct {
	in     func(rune) bool
	single bool
}

func (f pretokFunc) find(dst [][2]int, s string) [][2]int {
	start := -1
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if f.in(r) {
			if f.single {
				dst = append(dst, [2]int{i, i + size})
			} else if start < 0 {
				start = i
			}
		} else if start >= 0 {
			dst = append(dst, [2]int{start, i})
			start = -1
		}
		i += size
	}
	if start >= 0 {
		dst = append(dst, [2]int{start, len(s)})
	}
	return dst
}

// preDigits isolates digits, one by one or in runs.
type preDigits struct{ individual bool }

func (p preDigits) preSplit(dst []string, s string, _ bool) []string {
	return pretokSplitBy(dst, s, pretokFunc{in: unicode.IsNumber, single: p.individual}, pretokIsolated, false)
}

// preWhitespaceSplit splits on whitespace and drops it.
type preWhitespaceSplit struct{}

func (preWhitespaceSplit) preSplit(dst []string, s string, _ bool) []string {
	return pretokSplitBy(dst, s, pretokFunc{in: hfIsSpace}, pretokRemoved, false)
}

// preWhitespace keeps runs of word characters and runs of other
// non-space characters (the regex \w+|[^\w\s]+), dropping whitespace.
type preWhitespace struct{}

func (preWhitespace) preSplit(dst []string, s string, _ bool) []string {
	var words []string
	for _, w := range pretokSplitBy(nil, s, pretokFunc{in: hfIsSpace}, pretokRemoved, false) {
		words = pretokSplitBy(words[:0], w, pretokFunc{in: hfIsWordRune}, pretokIsolated, false)
		dst = append(dst, words...)
	}
	return dst
}

// prePunctuation isolates each punctuation character.
type prePunctuation struct{ behavior pretokBehavior }

func (p prePunctuation) preSplit(dst []string, s string, _ bool) []string {
	return pretokSplitBy(dst, s, pretokFunc{in: unicode.IsPunct, single: true}, p.behavior, false)
}

// preSequence applies pre-tokenizers in order, each to every piece.
type preSequence []preTokenizer

func (q preSequence) preSplit(dst []string, s string, first bool) []string {
	pieces := []string{s}
	for _, p := range q {
		var next []string
		for i, piece := range pieces {
			next = p.preSplit(next, piece, first && i == 0)
		}
		pieces = next
	}
	return append(dst, pieces...)
}

// hfIsSpace is Unicode White_Space.
func hfIsSpace(r rune) bool { return unicode.IsSpace(r) }
