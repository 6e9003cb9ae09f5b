package tokenizer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// ggufSeed returns the tokenizer.* metadata of a GGUF file as JSON (the
// form compile stores), keeping at most n tokens and the merges among them
// so that a fuzz execution stays cheap.
func ggufSeed(f *testing.F, rel string, n int) []byte {
	meta, err := readGGUFMeta(testutil.ReadFile(f, rel))
	if err != nil {
		f.Fatal(err)
	}
	out := map[string]any{}
	kept := map[string]bool{}
	for k, v := range meta {
		if !strings.HasPrefix(k, "tokenizer.") || k == "tokenizer.chat_template" {
			continue
		}
		if a, ok := v.([]any); ok && k != "tokenizer.ggml.merges" && len(a) > n {
			v = a[:n]
		}
		out[k] = v
	}
	if toks, ok := out["tokenizer.ggml.tokens"].([]any); ok {
		for _, t := range toks {
			if s, ok := t.(string); ok {
				kept[s] = true
			}
		}
	}
	if merges, ok := out["tokenizer.ggml.merges"].([]any); ok {
		var keep []any
		for _, m := range merges {
			l, r, _ := strings.Cut(m.(string), " ")
			if kept[l] && kept[r] && kept[l+r] {
				keep = append(keep, m)
			}
		}
		out["tokenizer.ggml.merges"] = keep
	}
	for _, k := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id"} {
		if id, ok := out[k].(uint64); ok && id >= uint64(n) {
			delete(out, k)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzFromGGUF builds tokenizers from arbitrary tokenizer.* metadata (as a
// GGUF file or an artifact's "gguf-metadata" blob holds it): no panic, and
// a tokenizer that builds encodes and decodes text with ids in range.
func FuzzFromGGUF(f *testing.F) {
	f.Add(ggufSeed(f, "models/stories260K/stories260K.gguf", 512), "Once upon a time")
	f.Add(ggufSeed(f, "tokenizer-fixtures/rebuilt-vocab-qwen2.gguf", 400), "Hello world 123 <|im_end|>")
	f.Add([]byte(`{"tokenizer.ggml.model":"gpt2","tokenizer.ggml.tokens":["a","b","ab"],"tokenizer.ggml.merges":["a b"],"tokenizer.ggml.pre":"qwen2"}`), "abab")
	f.Add([]byte(`{"tokenizer.ggml.model":"llama","tokenizer.ggml.tokens":["<unk>","▁a"],"tokenizer.ggml.scores":[0,-1],"tokenizer.ggml.token_type":[2,1]}`), "a a")
	f.Add([]byte(`{"tokenizer.ggml.model":"bert"}`), "x")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var meta map[string]any
		if dec.Decode(&meta) != nil {
			return
		}
		tok, err := FromGGUF(jsonNumbers(meta).(map[string]any))
		if err != nil {
			return
		}
		ids, err := EncodeChecked(tok, text, EncodeOptions{AddSpecial: true, ParseSpecial: true})
		if err != nil {
			return
		}
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d outside the vocabulary of %d", id, tok.VocabSize())
			}
		}
		_ = tok.Decode(ids)
	})
}
