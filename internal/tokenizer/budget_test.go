package tokenizer

import (
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/limits"
)

// backtrackingJSON is a tokenizer.json whose normalizer or pre-tokenizer
// regex backtracks exponentially: `(a+)+$` on n "a"s and a "b" tries 2^n
// ways before failing (about 10^12 steps for n = 40).
func backtrackingJSON(normalizer bool) []byte {
	pre := `{"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": false}`
	norm := `null`
	if normalizer {
		pre = `null`
		norm = `{"type": "Replace", "pattern": {"Regex": "(a+)+$"}, "content": "x"}`
	}
	return []byte(`{"version": "1.0", "added_tokens": [], "normalizer": ` + norm + `, "pre_tokenizer": ` + pre + `,
	"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "x": 2, "aa": 3}, "merges": ["a a"]}}`)
}

// TestBacktrackingRegexStopsAtItsTimeLimit: a pathological pattern ends in a
// *limits.Error naming the pattern and RegexMatchTimeout, not in a hang.
// The test asserts the error, not the time (the limit is 2 s; without it
// the match takes hours).
func TestBacktrackingRegexStopsAtItsTimeLimit(t *testing.T) {
	text := strings.Repeat("a", 40) + "b"
	for _, normalizer := range []bool{false, true} {
		tok, err := ParseHF(backtrackingJSON(normalizer))
		if err != nil {
			t.Fatal(err)
		}
		if ids, err := EncodeChecked(tok, "ab", EncodeOptions{}); err != nil || len(ids) == 0 {
			t.Fatalf("normalizer %v: a short text: %v %v", normalizer, ids, err)
		}
		_, err = EncodeChecked(tok, text, EncodeOptions{})
		if !limits.IsLimit(err) || !strings.Contains(err.Error(), "RegexMatchTimeout") || !strings.Contains(err.Error(), "(a+)+$") {
			t.Errorf("normalizer %v: %v", normalizer, err)
		}
	}
}

// TestEncodeCheckedPassesOtherPanics: EncodeChecked turns only its own
// aborts into errors.
func TestEncodeCheckedPassesOtherPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v", r)
		}
	}()
	EncodeChecked(panicTokenizer{}, "x", EncodeOptions{})
}

type panicTokenizer struct{ Tokenizer }

func (panicTokenizer) Encode(string, EncodeOptions) []int { panic("boom") }
