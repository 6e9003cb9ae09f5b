package tokenizer

import (
	"strings"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// hfNormalizer rewrites text before pre-tokenization (tokenizer.json
// "normalizer").
type hfNormalizer interface {
	normalize(s string) string
}

// normUnicode applies a Unicode normalization form (NFC, NFKC, NFD, NFKD).
type normUnicode struct{ form norm.Form }

func (n normUnicode) normalize(s string) string { return n.form.String(s) }

// normLowercase lowercases every character.
type normLowercase struct{}

func (normLowercase) normalize(s string) string { return strings.ToLower(s) }

// normPrepend puts prefix in front of non-empty text (Llama 2's "▁").
type normPrepend struct{ prefix string }

func (n normPrepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prefix + s
}

// normReplace replaces every match of a literal string or a regex.
type normReplace struct {
	literal string
	re      *regexp2.Regexp
	content string
}

func (n normReplace) normalize(s string) string {
	if n.re == nil {
		if n.literal == "" {
			return s
		}
		return strings.ReplaceAll(s, n.literal, n.content)
	}
	out, err := n.re.Replace(s, n.content, -1, -1)
	if err != nil {
		panic(regexFailure(n.re, "normalizer", err))
	}
	return out
}

// normStrip removes leading and/or trailing whitespace.
type normStrip struct{ left, right bool }

func (n normStrip) normalize(s string) string {
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

func (q normSequence) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}
