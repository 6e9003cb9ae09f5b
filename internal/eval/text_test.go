package eval

import (
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// byteTok is a tokenizer with one id per byte and, if addBOS, BOS = 256.
type byteTok struct{ addBOS bool }

func (b byteTok) Encode(text string, o tokenizer.EncodeOptions) []int {
	var ids []int
	if o.AddSpecial && b.addBOS {
		ids = append(ids, 256)
	}
	for i := 0; i < len(text); i++ {
		ids = append(ids, int(text[i]))
	}
	return ids
}
func (byteTok) Decode([]int) string { return "" }
func (byteTok) Token(int) string    { return "" }
func (byteTok) VocabSize() int      { return 257 }
func (byteTok) BOS() int            { return 256 }
func (byteTok) EOS() int            { return -1 }

// TestPerplexityTextBOS: chunks start with BOS exactly when the tokenizer
// adds one (llama.cpp's add_bos), and the text is tokenized once, whole.
func TestPerplexityTextBOS(t *testing.T) {
	text := strings.Repeat("abcdefgh", 8) // 64 bytes
	for _, addBOS := range []bool{true, false} {
		s := &peakSession{V: 300}
		r, err := PerplexityText(s, byteTok{addBOS}, text, Options{Ctx: 16})
		if err != nil {
			t.Fatal(err)
		}
		ids := byteTok{addBOS}.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
		if r.Chunks != len(ids)/16 || len(s.calls) != r.Chunks {
			t.Fatalf("addBOS=%v: %d chunks, %d runs, want %d", addBOS, r.Chunks, len(s.calls), len(ids)/16)
		}
		for c, got := range s.calls {
			want := slices.Clone(ids[c*16 : (c+1)*16])
			if addBOS {
				want[0] = 256
			}
			if !slices.Equal(got, want) {
				t.Errorf("addBOS=%v chunk %d: ran %v, want %v", addBOS, c, got, want)
			}
		}
	}
}

func TestPerplexityTextErrors(t *testing.T) {
	s := &peakSession{V: 300}
	if _, err := PerplexityText(s, nil, "text", Options{Ctx: 4}); err == nil || !strings.Contains(err.Error(), "no tokenizer") {
		t.Errorf("nil tokenizer: %v", err)
	}
	if _, err := PerplexityText(s, byteTok{true}, "", Options{Ctx: 4}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty text: %v", err)
	}
	if _, err := PerplexityText(s, byteTok{true}, "short", Options{Ctx: 4}); err == nil || !strings.Contains(err.Error(), "needs at least 8") {
		t.Errorf("6 tokens at ctx 4: %v", err)
	}
}

// TestTokenizeTok512: the llama2.c tokenizer of stories260K adds BOS (id 1)
// and reads "<s>" in the text as plain text, as llama-perplexity's
// common_tokenize(ctx, text, add_special=true, parse_special=false) does.
func TestTokenizeTok512(t *testing.T) {
	tok, err := tokenizer.LoadLlama2C(testutil.Path(t, "llama2c/tok512-dratman/tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	ids, bos, err := Tokenize(tok, "Once upon a time <s>")
	if err != nil {
		t.Fatal(err)
	}
	if bos != 1 || len(ids) < 3 || ids[0] != 1 || slices.Contains(ids[1:], 1) {
		t.Errorf("ids %v bos %d: want BOS 1 first and nowhere else", ids, bos)
	}
}
