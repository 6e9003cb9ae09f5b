package tokenizer

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"
)

// spmSpace is U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's escaped
// space.
const spmSpace = "\u2581"

// spmNormalizer applies a NormalizerSpec the way sentencepiece's
// normalizer.cc does: an optional precompiled character map (longest
// match wins), whitespace cleanup, the dummy prefix and space escaping.
type spmNormalizer struct {
	addDummyPrefix bool
	removeExtraWS  bool
	escapeWS       bool
	wsAsSuffix     bool
	charsmap       *spmCharsMap
	// user holds the user-defined symbols, which are never normalized.
	user *spmPrefixSet
}

// spmCharsMap is a compiled precompiled_charsmap: a darts-clone double-array
// trie over UTF-8 byte strings whose leaf values are offsets of
// NUL-terminated replacement strings in normalized.
//
//	blob: uint32le trie_size | trie (trie_size/4 uint32le units) | normalized
//
// A unit packs: bit 8 has_leaf, bits 0-7 label (bit 31 set on leaves),
// offset = (unit>>10) << ((unit & (1<<9)) >> 6); a leaf's value is its low
// 31 bits.
type spmCharsMap struct {
	units      []uint32
	normalized []byte
}

// parseSpmCharsMap decodes a precompiled_charsmap blob.
func parseSpmCharsMap(b []byte, field string) (*spmCharsMap, error) {
	if len(b) <= 4 {
		return nil, newSpmError(field, "blob of %d bytes is too short", len(b))
	}
	size := binary.LittleEndian.Uint32(b)
	if uint64(size) >= uint64(len(b)) || size%4 != 0 {
		return nil, newSpmError(field, "trie size %d does not fit the %d-byte blob", size, len(b))
	}
	trie := b[4 : 4+size]
	if len(trie) == 0 {
		return nil, newSpmError(field, "empty trie")
	}
	units := make([]uint32, len(trie)/4)
	for i := range units {
		units[i] = binary.LittleEndian.Uint32(trie[4*i:])
	}
	return &spmCharsMap{units: units, normalized: b[4+size:]}, nil
}

func dartsOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
func dartsLabel(u uint32) uint32  { return u & (1<<31 | 0xFF) }
func dartsHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func dartsValue(u uint32) uint32  { return u & (1<<31 - 1) }

// longest returns the replacement for the longest key that prefixes s and
// its length in s, or n == 0 when no key matches.
func (c *spmCharsMap) longest(s string) (repl string, n int) {
	units := c.units
	pos := dartsOffset(units[0])
	for i := 0; i < len(s); i++ {
		pos ^= uint32(s[i])
		if uint64(pos) >= uint64(len(units)) {
			break
		}
		u := units[pos]
		if dartsLabel(u) != uint32(s[i]) {
			break
		}
		pos ^= dartsOffset(u)
		if dartsHasLeaf(u) {
			if uint64(pos) >= uint64(len(units)) {
				break
			}
			v := dartsValue(units[pos])
			if uint64(v) >= uint64(len(c.normalized)) {
				continue
			}
			tail := c.normalized[v:]
			end := 0
			for end < len(tail) && tail[end] != 0 {
				end++
			}
			repl, n = string(tail[:end]), i+1
		}
	}
	return repl, n
}

// spmPrefixSet finds the longest of a set of strings that starts a text.
type spmPrefixSet struct {
	byFirst [256][]string // longest first
	n       int
}

func newSpmPrefixSet(words []string) *spmPrefixSet {
	if len(words) == 0 {
		return nil
	}
	p := &spmPrefixSet{}
	for _, w := range words {
		if w == "" {
			continue
		}
		l := p.byFirst[w[0]]
		i := 0
		for i < len(l) && len(l[i]) >= len(w) {
			i++
		}
		l = append(l, "")
		copy(l[i+1:], l[i:])
		l[i] = w
		p.byFirst[w[0]] = l
		p.n++
	}
	if p.n == 0 {
		return nil
	}
	return p
}

// match returns the length of the longest member that prefixes s, or 0.
func (p *spmPrefixSet) match(s string) int {
	if p == nil || s == "" {
		return 0
	}
	for _, w := range p.byFirst[s[0]] {
		if strings.HasPrefix(s, w) {
			return len(w)
		}
	}
	return 0
}

// prefix returns the normalized form of the first unit of s and how many
// bytes of s it consumed. A malformed UTF-8 byte becomes U+FFFD.
func (n *spmNormalizer) prefix(s string) (string, int) {
	if l := n.user.match(s); l > 0 {
		return s[:l], l
	}
	if n.charsmap != nil {
		if repl, l := n.charsmap.longest(s); l > 0 {
			return repl, l
		}
	}
	if s[0] < utf8.RuneSelf {
		return s[:1], 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size <= 1 {
		return "\uFFFD", 1
	}
	return s[:size], size
}

func (n *spmNormalizer) appendWS(dst []byte) []byte {
	if n.escapeWS {
		return append(dst, spmSpace...)
	}
	return append(dst, ' ')
}

// normalize appends the normalized form of s to dst.
func (n *spmNormalizer) normalize(dst []byte, s string) []byte {
	if n.removeExtraWS {
		for s != "" {
			p, l := n.prefix(s)
			if p != " " {
				break
			}
			s = s[l:]
		}
	}
	if s == "" {
		return dst
	}
	start := len(dst)
	if !n.wsAsSuffix && n.addDummyPrefix {
		dst = n.appendWS(dst)
	}
	prevSpace := n.removeExtraWS
	for s != "" {
		p, l := n.prefix(s)
		s = s[l:]
		if prevSpace {
			for p != "" && p[0] == ' ' {
				p = p[1:]
			}
		}
		if p != "" {
			for i := 0; i < len(p); i++ {
				if n.escapeWS && p[i] == ' ' {
					dst = append(dst, spmSpace...)
				} else {
					dst = append(dst, p[i])
				}
			}
			prevSpace = p[len(p)-1] == ' '
		}
		if !n.removeExtraWS {
			prevSpace = false
		}
	}
	if n.removeExtraWS {
		space := " "
		if n.escapeWS {
			space = spmSpace
		}
		for len(dst)-start >= len(space) && string(dst[len(dst)-len(space):]) == space {
			dst = dst[:len(dst)-len(space)]
		}
	}
	if n.wsAsSuffix && n.addDummyPrefix {
		dst = n.appendWS(dst)
	}
	return dst
}
