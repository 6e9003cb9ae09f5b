package tokenizer

import (
	"fmt"
	"strings"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"

	"github.com/aotlm/aotlm/internal/limits"
)

// hfNormalizer rewrites text before pre-tokenization (tokenizer.json
// "normalizer"). A step whose result would be longer than limit bytes
// panics with an encodeAbort (EncodeChecked returns it as an error): a
// Replace normalizer, or a chain of them, can multiply the text's length.
type hfNormalizer interface {
	normalize(s string, limit int) string
}

// normalizedLimit is the most bytes normalizing text of n bytes may make:
// limits.MaxNormalizedGrowth times n, plus limits.MaxNormalizedSlack.
func normalizedLimit(n int) int {
	return limits.MaxNormalizedGrowth*n + limits.MaxNormalizedSlack
}

// normalizeLimitError is the abort of a normalizer whose result would
// exceed limit bytes.
func normalizeLimitError(what string, need, limit int) encodeAbort {
	return encodeAbort{&limits.Error{What: fmt.Sprintf("tokenizer: the %s normalizer's result (%s)", what, limits.Bytes(int64(need))),
		Limit: fmt.Sprintf("MaxNormalizedGrowth (%d times the text plus %s, here %s)", limits.MaxNormalizedGrowth,
			limits.Bytes(limits.MaxNormalizedSlack), limits.Bytes(int64(limit)))}}
}

// normUnicode applies a Unicode normalization form (NFC, NFKC, NFD, NFKD).
type normUnicode struct{ form norm.Form }

func (n normUnicode) normalize(s string, limit int) string {
	out := n.form.String(s) // at most 18 times s (Unicode's stability policy)
	if len(out) > limit {
		panic(normalizeLimitError("Unicode", len(out), limit))
	}
	return out
}

// normLowercase lowercases every character.
type normLowercase struct{}

func (normLowercase) normalize(s string, _ int) string { return strings.ToLower(s) }

// normPrepend puts prefix in front of non-empty text (Llama 2's "▁").
type normPrepend struct{ prefix string }

func (n normPrepend) normalize(s string, limit int) string {
	if s == "" {
		return s
	}
	if len(n.prefix)+len(s) > limit {
		panic(normalizeLimitError("Prepend", len(n.prefix)+len(s), limit))
	}
	return n.prefix + s
}

// normReplace replaces every match of a literal string or a regex.
type normReplace struct {
	literal string
	re      *regexp2.Regexp
	content string
}

// normalize checks the result's length before building it: exactly for a
// literal pattern, match by match for a regex (or, for a content with $
// substitutions, against the most every match could make).
func (n normReplace) normalize(s string, limit int) string {
	if n.re == nil {
		if n.literal == "" {
			return s
		}
		c := strings.Count(s, n.literal)
		if need := int64(len(s)) + int64(c)*int64(len(n.content)-len(n.literal)); need > int64(limit) {
			panic(normalizeLimitError("Replace", int(min(need, 1<<62)), limit))
		}
		return strings.ReplaceAll(s, n.literal, n.content)
	}
	if strings.Contains(n.content, "$") {
		// each match (at most one per byte and one at the end) may copy
		// the text once per $ of the content
		per := int64(len(n.content)) + int64(strings.Count(n.content, "$"))*int64(len(s))
		if need := int64(len(s)) + (int64(len(s))+1)*per; need > int64(limit) {
			panic(normalizeLimitError("Replace", int(min(need, 1<<62)), limit))
		}
		out, err := n.re.Replace(s, n.content, -1, -1)
		if err != nil {
			panic(regexFailure(n.re, "normalizer", err))
		}
		return out
	}
	size := len(s)
	out, err := n.re.ReplaceFunc(s, func(m regexp2.Match) string {
		size += len(n.content) - m.Length
		if size > limit {
			panic(normalizeLimitError("Replace", size, limit))
		}
		return n.content
	}, -1, -1)
	if err != nil {
		panic(regexFailure(n.re, "normalizer", err))
	}
	return out
}

// normStrip removes leading and/or trailing whitespace.
type normStrip struct{ left, right bool }

func (n normStrip) normalize(s string, _ int) string {
	if n.left {
		s = strings.TrimLeftFunc(s, hfIsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, hfIsSpace)
	}
	return s
}

// normSequence applies normalizers in order.
type normSequence []hfNormalizer

func (q normSequence) normalize(s string, limit int) string {
	for _, n := range q {
		s = n.normalize(s, limit)
	}
	return s
}
