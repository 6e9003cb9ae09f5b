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

// nestedJSON is a tokenizer.json whose component kind (normalizer,
// pre_tokenizer, decoder or post_processor) is a Sequence nested depth
// deep around one leaf.
func nestedJSON(kind string, depth int) []byte {
	list := map[string]string{"normalizer": "normalizers", "pre_tokenizer": "pretokenizers",
		"decoder": "decoders", "post_processor": "processors"}[kind]
	leaf := map[string]string{"normalizer": `{"type": "Lowercase"}`, "pre_tokenizer": `{"type": "Whitespace"}`,
		"decoder": `{"type": "Fuse"}`, "post_processor": `{"type": "ByteLevel"}`}[kind]
	c := strings.Repeat(`{"type": "Sequence", "`+list+`": [`, depth) + leaf + strings.Repeat(`]}`, depth)
	return []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "` + kind + `": ` + c + `}`)
}

// TestNestedSequencesAreBounded: a Sequence nested thousands deep in any
// component is refused naming MaxTokenizerNesting (unbounded, each level
// re-read the levels under it and named its field with all the levels
// above: a 3 MB file cost gigabytes); the nesting of published tokenizers
// loads.
func TestNestedSequencesAreBounded(t *testing.T) {
	for _, kind := range []string{"normalizer", "pre_tokenizer", "decoder", "post_processor"} {
		for _, depth := range []int{limits.MaxTokenizerNesting + 1, 1000, 4900} {
			_, err := ParseHF(nestedJSON(kind, depth))
			if !limits.IsLimit(err) || !strings.Contains(err.Error(), "MaxTokenizerNesting") || !strings.Contains(err.Error(), kind) {
				t.Errorf("%s nested %d deep: %v", kind, depth, err)
			}
			if err != nil && len(err.Error()) > 400 {
				t.Errorf("%s nested %d deep: an error of %d bytes", kind, depth, len(err.Error()))
			}
		}
		if _, err := ParseHF(nestedJSON(kind, 3)); err != nil {
			t.Errorf("%s nested 3 deep: %v", kind, err)
		}
	}
}

// replaceJSON is a tokenizer.json with the given normalizer.
func replaceJSON(normalizer string) []byte {
	return []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}, "merges": []}, "normalizer": ` + normalizer + `}`)
}

// TestReplaceNormalizerGrowthIsBounded: Replace normalizers that multiply
// the text (a literal or a regex pattern, an empty-matching regex, a chain
// of them) end in an error naming MaxNormalizedGrowth before building the
// text; replacements of published tokenizers (a space for "▁") encode.
func TestReplaceNormalizerGrowthIsBounded(t *testing.T) {
	big := strings.Repeat("c", 1000)
	step := func(pattern, content string) string {
		return `{"type": "Replace", "pattern": ` + pattern + `, "content": "` + content + `"}`
	}
	for name, norm := range map[string]string{
		"literal":        step(`{"String": "a"}`, big),
		"regex":          step(`{"Regex": "[ab]"}`, big),
		"empty match":    step(`{"Regex": "x*"}`, "cc"+big),
		"substitution":   step(`{"Regex": "(a+)"}`, "$1$1$1$1$1$1$1$1$1$1"),
		"chain":          `{"type": "Sequence", "normalizers": [` + strings.Repeat(step(`{"String": "a"}`, "aaa")+",", 12) + `{"type": "Lowercase"}]}`,
		"prepend chain":  `{"type": "Sequence", "normalizers": [` + strings.Repeat(`{"type": "Prepend", "prepend": "`+big+`"},`, 100) + `{"type": "Lowercase"}]}`,
		"nfkc then grow": `{"type": "Sequence", "normalizers": [{"type": "NFKC"}, ` + step(`{"String": "b"}`, strings.Repeat("b", 20)) + `]}`,
	} {
		tok, err := ParseHF(replaceJSON(norm))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = EncodeChecked(tok, strings.Repeat("ab", 5000), EncodeOptions{})
		if !limits.IsLimit(err) || !strings.Contains(err.Error(), "MaxNormalizedGrowth") {
			t.Errorf("%s: %v", name, err)
		}
	}
	tok, err := ParseHF(replaceJSON(`{"type": "Sequence", "normalizers": [` + step(`{"String": "b"}`, "ccc") + `, ` + step(`{"Regex": "a"}`, "c") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := EncodeChecked(tok, strings.Repeat("ab", 5000), EncodeOptions{})
	if err != nil || len(ids) != 20000 {
		t.Errorf("a replacement within the limit: %d ids, %v", len(ids), err)
	}
}

// TestDecoderGrowthIsBounded: a decoder chain whose Replace steps make a
// token more than MaxDecoderGrowth times longer is refused when the
// tokenizer loads; the "▁" to space replacement of published tokenizers
// loads.
func TestDecoderGrowthIsBounded(t *testing.T) {
	rep := func(pattern, content string) string {
		return `{"type": "Replace", "pattern": {"String": "` + pattern + `"}, "content": "` + content + `"}`
	}
	load := func(dec string) error {
		_, err := ParseHF([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "decoder": ` + dec + `}`))
		return err
	}
	for name, dec := range map[string]string{
		"one replace": rep("a", strings.Repeat("b", 1000)),
		"chain":       `{"type": "Sequence", "decoders": [` + rep("a", "aaa") + `, ` + rep("a", "aaa") + `, ` + rep("a", "aaa") + `]}`,
		"nested":      `{"type": "Sequence", "decoders": [{"type": "Sequence", "decoders": [` + rep("a", "aaaaa") + `]}, ` + rep("a", "aaaaa") + `]}`,
	} {
		if err := load(dec); !limits.IsLimit(err) || !strings.Contains(err.Error(), "MaxDecoderGrowth") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := load(`{"type": "Sequence", "decoders": [` + rep("▁", " ") + `, {"type": "ByteFallback"}, {"type": "Fuse"}]}`); err != nil {
		t.Errorf("published decoder: %v", err)
	}
}

// TestMetaspaceReplacementIsOneCharacter: a Metaspace pre-tokenizer or
// decoder whose replacement is longer than one character (which would
// multiply the text by its length at every space) is refused naming the
// field; "▁" and another single character load.
func TestMetaspaceReplacementIsOneCharacter(t *testing.T) {
	for _, kind := range []string{"pre_tokenizer", "decoder"} {
		load := func(rep string) error {
			_, err := ParseHF([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "` + kind +
				`": {"type": "Metaspace", "replacement": "` + rep + `", "prepend_scheme": "always"}}`))
			return err
		}
		for _, bad := range []string{strings.Repeat("x", 100000), "▁▁"} {
			if err := load(bad); err == nil || !strings.Contains(err.Error(), kind+".replacement") || len(err.Error()) > 300 {
				t.Errorf("%s replacement of %d bytes: %.300v", kind, len(bad), err)
			}
		}
		for _, ok := range []string{"▁", "_"} {
			if err := load(ok); err != nil {
				t.Errorf("%s replacement %q: %v", kind, ok, err)
			}
		}
	}
}
