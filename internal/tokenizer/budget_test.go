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

// TestBPEWithoutMergesIsRefused: a BPE vocabulary with multi-character
// tokens but no merges would tokenize one character per token; it is
// refused naming the merges, in tokenizer.json and GGUF form.
func TestBPEWithoutMergesIsRefused(t *testing.T) {
	_, err := ParseHF([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": []}}`))
	if err == nil || !strings.Contains(err.Error(), "model.merges") || !strings.Contains(err.Error(), `"ab"`) {
		t.Errorf("tokenizer.json: %v", err)
	}
	if _, err := ParseHF([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}`)); err != nil {
		t.Errorf("with its merge: %v", err)
	}
	if _, err := ParseHF([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}}`)); err != nil {
		t.Errorf("single characters need no merges: %v", err)
	}
	_, err = FromGGUF(map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
		"tokenizer.ggml.tokens": []any{"a", "b", "ab"}, "tokenizer.ggml.token_type": []any{int64(1), int64(1), int64(1)}})
	if err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.merges") {
		t.Errorf("gguf: %v", err)
	}
}
