package tokenizer

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aotlm/aotlm/internal/testutil"
)

// fuzzSeedTexts are a few reference texts, kept small.
func fuzzSeedTexts(t testing.TB) []string {
	ref := loadSpmReference(t)
	var out []string
	for i, c := range ref.Cases["llama2-32000"] {
		if i%8 == 0 {
			out = append(out, c.Text)
		}
	}
	return append(out, "", " ", "\xff\xfe", "a\x00b", "<s>x</s>", "   a  b   ", "🦙🦙\t\n")
}

func FuzzEncode(f *testing.F) {
	big := loadSpm(f, "llama2c/tokenizer.model")
	small := loadSpm(f, "llama2c/tok512-dratman/tok512.model")
	l2c := loadLlama2C(f, "llama2c/tokenizer.bin", 32000)
	for _, s := range fuzzSeedTexts(f) {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, text string, special bool) {
		if len(text) > 4096 {
			return
		}
		opts := EncodeOptions{ParseSpecial: special}
		for name, tok := range map[string]Tokenizer{"32000": big, "tok512": small, "llama2c": l2c} {
			ids := tok.Encode(text, opts)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("%s: Encode(%q) gave id %d out of range", name, text, id)
				}
			}
			_ = tok.Decode(ids)
		}
		if !utf8.ValidString(text) || special {
			return
		}
		// Identity normalization and no whitespace cleanup: exact round trip.
		if got := big.Decode(big.Encode(text, opts)); got != text {
			t.Errorf("32000 round trip: %q -> %q", text, got)
		}
		// tok512 collapses space runs; other texts must come back as is.
		if !strings.Contains(text, " ") {
			if got := small.Decode(small.Encode(text, opts)); got != text {
				t.Errorf("tok512 round trip: %q -> %q", text, got)
			}
		}
	})
}

// FuzzDecode decodes arbitrary ids (two bytes each) with both tokenizers
// and checks that streaming them gives Decode's text with invalid bytes
// as U+FFFD.
func FuzzDecode(f *testing.F) {
	sp := loadSpm(f, "llama2c/tokenizer.model")
	l2c := loadLlama2C(f, "llama2c/tokenizer.bin", 32000)
	f.Add([]byte{0x1d, 0x74, 0xf3, 0x00, 0xa2, 0x00, 0xa9, 0x00, 0x9c, 0x00})
	f.Add([]byte{0x01, 0x00, 0x13, 0x00, 0x02, 0x00, 0xff, 0xff})
	// Text, nine skipped ids, then a piece with a leading space.
	f.Add([]byte("000\xef0\xef0\xef0\xef0\xef0\xef0\xef0\xef01"))
	// Text, nine EOS, then a piece with a leading space.
	f.Add([]byte("00\x02\x00\x02\x00\x02\x00\x02\x00\x02\x00\x02\x00\x02\x00\x02\x00\x02\x0001"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 2048 {
			return
		}
		ids := make([]int, len(raw)/2)
		for i := range ids {
			ids[i] = int(int16(binary.LittleEndian.Uint16(raw[2*i:])))
		}
		for name, tok := range map[string]Tokenizer{"spm": sp, "llama2c": l2c} {
			want := validText(tok.Decode(ids))
			d := NewStreamDecoder(tok)
			var b strings.Builder
			for _, id := range ids {
				s := d.Add(id)
				if !utf8.ValidString(s) {
					t.Fatalf("%s: invalid chunk %q", name, s)
				}
				b.WriteString(s)
			}
			b.WriteString(d.Flush())
			if b.String() != want {
				t.Fatalf("%s: streamed %q, want %q", name, b.String(), want)
			}
		}
	})
}

func FuzzParseSentencePiece(f *testing.F) {
	f.Add(testutil.ReadFile(f, "llama2c/tok512-dratman/tok512.model"))
	valid := spmModelBytes(append(basePieces(), testPiece{"a", -1, PieceNormal}, testPiece{"▁a", -1, PieceNormal}), ModelUnigram, false, true, true)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x12, 0x02, 0x18, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := ParseSentencePiece(data)
		if err != nil {
			return
		}
		for _, s := range []string{"a", " hello  world ", "\xff", "<s>"} {
			ids := sp.Encode(s, EncodeOptions{AddSpecial: true, ParseSpecial: true})
			for _, id := range ids {
				if id < 0 || id >= sp.VocabSize() {
					t.Fatalf("id %d out of range", id)
				}
			}
			_ = sp.Decode(ids)
		}
	})
}

func FuzzParseLlama2C(f *testing.F) {
	f.Add(testutil.ReadFile(f, "llama2c/tok512-dratman/tok512.bin")[:600], 40)
	f.Add(llama2cBytes(2, []string{"<unk>", "a", "b", "ab", " "}, []float32{0, -1, -1, 0, -2}), 5)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f}, 1)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n > 1<<16 {
			return
		}
		tok, err := ParseLlama2C(data, n)
		if err != nil {
			return
		}
		ids := tok.Encode(" ab\xffé", EncodeOptions{AddSpecial: true})
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
		_ = tok.Decode(append(ids, -5, 1<<20))
	})
}
