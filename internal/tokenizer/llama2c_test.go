package tokenizer

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

func loadLlama2C(t testing.TB, rel string, n int) *Llama2C {
	t.Helper()
	tok, err := LoadLlama2C(testutil.Path(t, rel), n)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestLlama2CMatchesSentencePiece compares tokenizer.bin with the
// sentencepiece library's encodings of tokenizer.model. Comparison rule:
// both sides without BOS; llama2.c always emits the " " dummy-prefix token
// and merges it like sentencepiece's add_dummy_prefix "▁", and the Llama 2
// model does no whitespace cleanup, so for every non-empty text the ids
// must be identical. The decode of those ids must equal the reference text.
func TestLlama2CMatchesSentencePiece(t *testing.T) {
	ref := loadSpmReference(t)
	tok := loadLlama2C(t, "llama2c/tokenizer.bin", 32000)
	cases := ref.Cases["llama2-32000"]
	if len(cases) == 0 {
		t.Fatal("no llama2-32000 cases")
	}
	n := 0
	for _, c := range cases {
		if c.Text == "" {
			continue
		}
		n++
		if got := tok.Encode(c.Text, EncodeOptions{}); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if got := tok.Decode(c.IDs); got != c.Decoded {
			t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
		}
	}
	t.Logf("%d cases compared", n)
	// PROVENANCE's llama2.c test.c expectation, with BOS.
	want := []int{1, 306, 4658, 278, 6593, 310, 2834, 338}
	if got := tok.Encode("I believe the meaning of life is", EncodeOptions{AddSpecial: true}); !slices.Equal(got, want) {
		t.Errorf("with BOS: got %v, want %v", got, want)
	}
	if got := tok.Decode(want); got != "I believe the meaning of life is" {
		t.Errorf("Decode after BOS = %q", got)
	}
	if tok.BOS() != 1 || tok.EOS() != 2 || tok.VocabSize() != 32000 || tok.Token(1) != "\n<s>\n" {
		t.Errorf("bos %d eos %d vocab %d token(1) %q", tok.BOS(), tok.EOS(), tok.VocabSize(), tok.Token(1))
	}
}

// TestLlama2CTok512 checks tok512.bin against tok512.model on the reference
// texts that sentencepiece's whitespace cleanup leaves unchanged (llama2.c
// does no cleanup).
func TestLlama2CTok512(t *testing.T) {
	ref := loadSpmReference(t)
	tok := loadLlama2C(t, "llama2c/tok512-dratman/tok512.bin", 512)
	n := 0
	for _, c := range ref.Cases["tok512"] {
		if c.Text == "" || collapseSpaces(c.Text) != c.Text {
			continue
		}
		n++
		if got := tok.Encode(c.Text, EncodeOptions{}); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
	if n < 100 {
		t.Fatalf("only %d comparable cases", n)
	}
	t.Logf("%d cases compared", n)
}

// llama2cBytes serializes a tokenizer.bin.
func llama2cBytes(maxLen int32, pieces []string, scores []float32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(maxLen))
	for i, p := range pieces {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scores[i]))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

func TestParseLlama2CHostile(t *testing.T) {
	good := llama2cBytes(3, []string{"<unk>", "\n<s>\n", "\n</s>\n", "ab"}, []float32{0, 0, 0, -1})
	if _, err := ParseLlama2C(good, 4); err != nil {
		t.Fatalf("valid file: %v", err)
	}
	negLen := slices.Clone(good)
	binary.LittleEndian.PutUint32(negLen[4+4:], 0xFFFFFFFF)
	hugeLen := slices.Clone(good)
	binary.LittleEndian.PutUint32(hugeLen[4+4:], 1<<30)
	negMax := slices.Clone(good)
	binary.LittleEndian.PutUint32(negMax, 0x80000000)
	for _, tc := range []struct {
		name  string
		data  []byte
		vocab int
		want  string
	}{
		{"empty", nil, 4, "max_token_length"},
		{"negative max length", negMax, 4, "max_token_length"},
		{"truncated", good[:len(good)-1], 4, "len"},
		{"vocab larger than file", good, 1 << 40, "vocab size"},
		{"zero vocab", good, 0, "vocab size"},
		{"negative length", negLen, 4, "len"},
		{"length past end", hugeLen, 4, "len"},
		{"cut in token header", good[:4+8+5+3], 2, "score/len"},
	} {
		_, err := ParseLlama2C(tc.data, tc.vocab)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
