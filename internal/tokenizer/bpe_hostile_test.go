package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *FormatError", err)
	}
	if !strings.Contains(fe.Field, field) {
		t.Errorf("field %q does not name %q (%v)", fe.Field, field, err)
	}
}

func TestGPT2Hostile(t *testing.T) {
	for _, tc := range []struct{ name, vocab, merges, field string }{
		{"truncated vocab", `{"a":0,"b"`, "", ""},
		{"negative id", `{"a":-3}`, "", `"a"`},
		{"id past limit", `{"a":4294967296}`, "", `"a"`},
		{"two tokens one id", `{"a":1,"b":1}`, "", ""},
		{"merge of unknown", `{"a":0,"b":1}`, "#version: 0.2\na b\n", "line 2"},
		{"merge one part", `{"a":0}`, "a\n", "line 1"},
		{"merge trailing space", `{"a":0}`, "a \n", "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseGPT2([]byte(tc.vocab), []byte(tc.merges), "vocab.json", "merges.txt")
			wantField(t, err, tc.field)
		})
	}
}

func TestTiktokenHostile(t *testing.T) {
	for _, tc := range []struct{ name, data, field string }{
		{"no rank", "IQ==\n", "line 1"},
		{"bad base64", "!!! 0\n", "line 1"},
		{"negative rank", "IQ== -1\n", "line 1"},
		{"huge rank", "IQ== 99999999999\n", "line 1"},
		{"duplicate token", "IQ== 0\nIQ== 1\n", "line 2"},
		{"duplicate rank", "IQ== 0\nIg== 0\n", "line 2"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTiktoken([]byte(tc.data), "tokenizer.model")
			wantField(t, err, tc.field)
		})
	}
}

func TestGGUFBPEHostile(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"tokenizer.ggml.model":      "gpt2",
			"tokenizer.ggml.pre":        "qwen2",
			"tokenizer.ggml.tokens":     []any{"a", "b", "ab"},
			"tokenizer.ggml.merges":     []any{"a b"},
			"tokenizer.ggml.token_type": []any{int64(1), int64(1), int64(1)},
		}
	}
	if b, err := NewGGUFBPE(base()); err != nil {
		t.Fatal(err)
	} else if got := b.Encode("ab", EncodeOptions{}); len(got) != 1 || got[0] != 2 {
		t.Fatalf("Encode(ab) = %v, want [2]", got)
	}
	for _, tc := range []struct {
		name  string
		edit  func(m map[string]any)
		field string
	}{
		{"no tokens", func(m map[string]any) { delete(m, "tokenizer.ggml.tokens") }, "tokenizer.ggml.tokens"},
		{"token not string", func(m map[string]any) { m["tokenizer.ggml.tokens"] = []any{"a", int64(3)} }, "tokenizer.ggml.tokens"},
		{"types short", func(m map[string]any) { m["tokenizer.ggml.token_type"] = []any{int64(1)} }, "tokenizer.ggml.token_type"},
		{"bad merge", func(m map[string]any) { m["tokenizer.ggml.merges"] = []any{"a c"} }, "tokenizer.ggml.merges[0]"},
		{"merge not string", func(m map[string]any) { m["tokenizer.ggml.merges"] = []any{1.5} }, "tokenizer.ggml.merges"},
		{"bos out of range", func(m map[string]any) { m["tokenizer.ggml.bos_token_id"] = uint64(99) }, "tokenizer.ggml.bos_token_id"},
		{"pre not string", func(m map[string]any) { m["tokenizer.ggml.pre"] = int64(1) }, "tokenizer.ggml.pre"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			_, err := NewGGUFBPE(m)
			wantField(t, err, tc.field)
		})
	}
	m := base()
	m["tokenizer.ggml.pre"] = "no-such-pre"
	_, err := NewGGUFBPE(m)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no-such-pre") {
		t.Errorf("unknown pre: %v", err)
	}
}

func TestLoadDirErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadDir(dir); err == nil {
		t.Error("empty directory loaded")
	}
	os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(`{"a":0}`), 0o644)
	os.WriteFile(filepath.Join(dir, "merges.txt"), []byte("#version: 0.2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"added_tokens_decoder":{"x":{"content":"<s>"}}}`), 0o644)
	_, err := LoadDir(dir)
	wantField(t, err, "added_tokens_decoder")
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"bos_token":[1]}`), 0o644)
	_, err = Load(filepath.Join(dir, "vocab.json"))
	wantField(t, err, "bos_token")
}
