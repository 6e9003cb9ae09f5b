package tokenizer_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// The rebuilt vocab-only GGUF files (see the test data's PROVENANCE.md)
// reproduce llama.cpp's own qwen2 and llama-bpe fixtures; they are read
// with the gguf package and tokenized through FromGGUF.
func TestLlamaCppFixturesGGUF(t *testing.T) {
	for _, tc := range []struct{ fixture, file string }{
		{"ggml-vocab-qwen2.gguf", "tokenizer-fixtures/rebuilt-vocab-qwen2.gguf"},
		{"ggml-vocab-llama-bpe.gguf", "tokenizer-fixtures/rebuilt-vocab-llama-bpe.gguf"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			f, err := gguf.Open(testutil.Path(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tok, err := tokenizer.FromGGUF(f.Metadata())
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tok.(*tokenizer.BPE); !ok {
				t.Fatalf("FromGGUF gave %T, want *BPE", tok)
			}
			inp := string(testutil.ReadFile(t, "tokenizer-fixtures/"+tc.fixture+".inp"))
			out := string(testutil.ReadFile(t, "tokenizer-fixtures/"+tc.fixture+".out"))
			texts := strings.Split(inp, "\n__ggml_vocab_test__\n")
			texts = texts[:len(texts)-1]
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(texts) != 46 || len(lines) != 46 {
				t.Fatalf("%d inputs, %d outputs, want 46", len(texts), len(lines))
			}
			for i, text := range texts {
				var want []int
				for _, s := range strings.Fields(lines[i]) {
					id, _ := strconv.Atoi(s)
					want = append(want, id)
				}
				if got := tok.Encode(text, tokenizer.EncodeOptions{}); !slices.Equal(got, want) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, text, got, want)
				}
			}
			// llama.cpp adds BOS for llama-bpe (128000) and none for qwen2.
			withBOS := tok.Encode("Hello", tokenizer.EncodeOptions{AddSpecial: true})
			plain := tok.Encode("Hello", tokenizer.EncodeOptions{})
			if strings.Contains(tc.fixture, "llama-bpe") {
				if tok.BOS() != 128000 || len(withBOS) != len(plain)+1 || withBOS[0] != 128000 {
					t.Errorf("llama-bpe BOS: BOS()=%d, AddSpecial gives %v", tok.BOS(), withBOS)
				}
			} else if !slices.Equal(withBOS, plain) {
				t.Errorf("qwen2 AddSpecial changed the ids: %v vs %v", withBOS, plain)
			}
		})
	}
}
