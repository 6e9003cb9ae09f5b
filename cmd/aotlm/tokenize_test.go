package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestTokenizeCommand runs `aotlm tokenize --no-parse-special --json` on
// llama.cpp's reference encodings (reference/bpe-encodings.json, made with
// parse_special=false and no BOS) through a tokenizer folder and through the
// vocab-only GGUF of the same vocabulary.
func TestTokenizeCommand(t *testing.T) {
	var ref struct {
		Cases map[string][]struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "reference/bpe-encodings.json"), &ref); err != nil {
		t.Fatal(err)
	}
	sources := map[string][]string{
		"qwen2":     {testutil.Path(t, "tokenizers/qwen2.5"), testutil.Path(t, "tokenizer-fixtures/rebuilt-vocab-qwen2.gguf")},
		"llama-bpe": {testutil.Path(t, "tokenizers/llama3.2"), testutil.Path(t, "tokenizer-fixtures/rebuilt-vocab-llama-bpe.gguf")},
	}
	for vocab, paths := range sources {
		cases := ref.Cases[vocab]
		if len(cases) == 0 {
			t.Fatalf("no %s cases", vocab)
		}
		for _, p := range paths {
			for _, c := range cases[:min(3, len(cases))] {
				code, out, errs := runCLI(t, "tokenize", "-m", p, "--no-parse-special", "--json", "--", c.Text)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", p, code, errs)
				}
				var got struct {
					IDs    []int    `json:"ids"`
					Tokens []string `json:"tokens"`
				}
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.IDs, c.IDs) || len(got.Tokens) != len(got.IDs) {
					t.Errorf("%s %q:\n got %v\nwant %v", p, c.Text, got.IDs, c.IDs)
				}
			}
		}
	}
	// with --bos a SentencePiece vocabulary puts <s> first
	tok := testutil.Path(t, "llama2c/tokenizer.model")
	code, out, _ := runCLI(t, "tokenize", "-m", tok, "--bos", "--json", "--", "I believe the meaning of life is")
	var got struct{ IDs []int }
	json.Unmarshal([]byte(out), &got)
	// llama2.c's own test.c lists these ids for this prompt
	if want := []int{1, 306, 4658, 278, 6593, 310, 2834, 338}; code != 0 || !slices.Equal(got.IDs, want) {
		t.Errorf("--bos: %v, want %v", got.IDs, want)
	}
}
