package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// streamAll feeds ids one at a time and checks that every chunk is valid
// UTF-8; it returns the chunks.
func streamAll(t *testing.T, tok Tokenizer, ids []int) []string {
	t.Helper()
	d := NewStreamDecoder(tok)
	var chunks []string
	for _, id := range ids {
		s := d.Add(id)
		if !utf8.ValidString(s) {
			t.Fatalf("chunk %q after id %d is not valid UTF-8", s, id)
		}
		chunks = append(chunks, s)
	}
	chunks = append(chunks, d.Flush())
	return chunks
}

func TestStreamDecoderMatchesDecode(t *testing.T) {
	ref := loadSpmReference(t)
	sp := loadSpm(t, "llama2c/tokenizer.model")
	l2c := loadLlama2C(t, "llama2c/tokenizer.bin", 32000)
	for name, tok := range map[string]Tokenizer{"model": sp, "bin": l2c} {
		n := 0
		for _, c := range ref.Cases["llama2-32000"] {
			if !utf8.ValidString(c.Decoded) {
				continue
			}
			ids := append([]int{tok.BOS()}, c.IDs...)
			if got, want := strings.Join(streamAll(t, tok, ids), ""), tok.Decode(ids); got != want {
				t.Errorf("%s: streamed %q, Decode %q", name, got, want)
			}
			n++
		}
		if n < 100 {
			t.Fatalf("%s: only %d cases", name, n)
		}
	}
}

// TestStreamDecoderSplitCharacter streams " this is 🦙.cpp", whose llama
// emoji is four byte-fallback tokens <0xF0><0x9F><0xA6><0x99> in the
// sentencepiece reference. The first "▁" alone decodes to nothing (it is
// the dummy prefix until more text follows).
func TestStreamDecoderSplitCharacter(t *testing.T) {
	sp := loadSpm(t, "llama2c/tokenizer.model")
	ids := []int{29871, 445, 338, 29871, 243, 162, 169, 156, 29889, 8223}
	for _, id := range ids[4:8] {
		if sp.Type(id) != PieceByte {
			t.Fatalf("id %d is not a byte piece", id)
		}
	}
	chunks := streamAll(t, sp, ids)
	want := []string{"", " this", " is", " ", "", "", "", "🦙", ".", "cpp", ""}
	if strings.Join(chunks, "|") != strings.Join(want, "|") {
		t.Errorf("chunks %q, want %q", chunks, want)
	}
	if got := strings.Join(chunks, ""); got != sp.Decode(ids) {
		t.Errorf("joined %q, Decode %q", got, sp.Decode(ids))
	}
}

func TestStreamDecoderInvalidBytes(t *testing.T) {
	sp := loadSpm(t, "llama2c/tokenizer.model")
	b := func(v byte) int { return int(sp.byteIDs[v]) }
	d := NewStreamDecoder(sp)
	// 0xF0 0x9F could still become a character: held back.
	if s := d.Add(b(0xF0)) + d.Add(b(0x9F)); s != "" {
		t.Fatalf("incomplete prefix emitted %q", s)
	}
	// "A" proves them invalid: one U+FFFD per byte, then "A".
	if s := d.Add(b('A')); s != "\uFFFD\uFFFDA" {
		t.Errorf("after invalidating byte got %q", s)
	}
	// A lone lead byte at the end comes out at Flush.
	if s := d.Add(b(0xE2)); s != "" {
		t.Errorf("lead byte emitted %q", s)
	}
	if s := d.Flush(); s != "\uFFFD" {
		t.Errorf("Flush = %q", s)
	}
	// A stray continuation byte is invalid at once.
	if s := d.Add(b(0x80)); s != "\uFFFD" {
		t.Errorf("continuation byte gave %q", s)
	}
}

// TestStreamDecoderLongWindow streams far more ids than the context window,
// with control tokens in between, and compares with one Decode.
func TestStreamDecoderLongWindow(t *testing.T) {
	sp := loadSpm(t, "llama2c/tokenizer.model")
	var ids []int
	for _, l := range warAndPeaceLines(t, 60) {
		ids = append(ids, sp.Encode(l, EncodeOptions{})...)
		ids = append(ids, sp.EOS(), sp.BOS())
	}
	if got, want := strings.Join(streamAll(t, sp, ids), ""), sp.Decode(ids); got != want {
		t.Errorf("streamed text differs from Decode:\n%q\n%q", got, want)
	}
}
