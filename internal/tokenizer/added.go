package tokenizer

import (
	"sort"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token matched in the text before the model runs, as
// listed in tokenizer.json "added_tokens" or tokenizer_config.json
// "added_tokens_decoder".
type AddedToken struct {
	ID      int32
	Content string
	// Special tokens (BOS, EOS, chat markers) are matched only when
	// EncodeOptions.ParseSpecial is set and are skipped by Decode; other
	// added tokens are always matched and decode to their content.
	Special bool
	// Normalized tokens are matched in the normalized text, the others in
	// the raw text.
	Normalized bool
	// LStrip and RStrip make a match absorb the whitespace on its left or
	// right; SingleWord allows a match only between non-word characters.
	LStrip, RStrip, SingleWord bool
}

// addedVocab finds added tokens in text, leftmost then longest.
type addedVocab struct {
	byID      map[int32]AddedToken
	byContent map[string]AddedToken
	// first[c] lists the tokens starting with byte c, longest first; it
	// is rebuilt after add, and read without locks while encoding.
	first atomic.Pointer[[256][]AddedToken]
}

// add registers t, replacing an earlier token with the same id.
func (a *addedVocab) add(t AddedToken) {
	if t.Content == "" {
		return
	}
	if a.byID == nil {
		a.byID = map[int32]AddedToken{}
		a.byContent = map[string]AddedToken{}
	}
	if old, ok := a.byID[t.ID]; ok {
		delete(a.byContent, old.Content)
	}
	a.byID[t.ID] = t
	a.byContent[t.Content] = t
	a.first.Store(nil)
}

// index builds first and returns it.
func (a *addedVocab) index() *[256][]AddedToken {
	first := new([256][]AddedToken)
	for _, t := range a.byContent {
		c := t.Content[0]
		first[c] = append(first[c], t)
	}
	for _, l := range first {
		sort.Slice(l, func(i, j int) bool {
			if len(l[i].Content) != len(l[j].Content) {
				return len(l[i].Content) > len(l[j].Content)
			}
			return l[i].ID < l[j].ID
		})
	}
	a.first.Store(first)
	return first
}

func (a *addedVocab) list() []AddedToken {
	out := make([]AddedToken, 0, len(a.byID))
	for _, t := range a.byID {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// addedSeg is a piece of text (id < 0) or a matched added token.
type addedSeg struct {
	text  string
	start int // byte offset of text in the whole input (0 means "first")
	id    int
}

// split cuts s (found at offset base of the input) at the added tokens whose
// Normalized flag equals normalized; special tokens count only when
// parseSpecial is set.
func (a *addedVocab) split(dst []addedSeg, s string, base int, parseSpecial, normalized bool) []addedSeg {
	if len(a.byContent) == 0 {
		return append(dst, addedSeg{text: s, start: base, id: -1})
	}
	first := a.first.Load()
	if first == nil {
		first = a.index()
	}
	last := 0
	for i := 0; i < len(s); i++ {
		cands := first[s[i]]
		if cands == nil {
			continue
		}
		for _, t := range cands {
			if t.Normalized != normalized || (t.Special && !parseSpecial) {
				continue
			}
			if !strings.HasPrefix(s[i:], t.Content) {
				continue
			}
			start, end := i, i+len(t.Content)
			if t.SingleWord && (hfWordBefore(s, start) || hfWordAfter(s, end)) {
				continue
			}
			if t.LStrip {
				for start > last {
					r, size := utf8.DecodeLastRuneInString(s[last:start])
					if !unicode.IsSpace(r) {
						break
					}
					start -= size
				}
			}
			if t.RStrip {
				for end < len(s) {
					r, size := utf8.DecodeRuneInString(s[end:])
					if !unicode.IsSpace(r) {
						break
					}
					end += size
				}
			}
			if start > last {
				dst = append(dst, addedSeg{text: s[last:start], start: base + last, id: -1})
			}
			dst = append(dst, addedSeg{id: int(t.ID), start: base + start})
			last = end
			i = end - 1
			break
		}
	}
	if last < len(s) || len(dst) == 0 {
		dst = append(dst, addedSeg{text: s[last:], start: base + last, id: -1})
	}
	return dst
}

func hfIsWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func hfWordBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return hfIsWordRune(r)
}

func hfWordAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return hfIsWordRune(r)
}
