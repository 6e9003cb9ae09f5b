package tokenizer

import "unicode/utf8"

// Byte-level BPE vocabularies (GPT-2 and its descendants) store every byte
// as a printable character so that a token is valid text: the printable
// Latin-1 bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves, and the
// other 68 bytes map, in increasing order, to U+0100, U+0101, ... (so the
// space 0x20 becomes 'Ġ' U+0120 and '\n' becomes 'Ċ' U+010A).

var (
	// bpeByteRune[b] is the character that stands for byte b.
	bpeByteRune [256]rune
	// bpeRuneByte maps such a character back to its byte.
	bpeRuneByte map[rune]byte
)

func init() {
	bpeRuneByte = make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			bpeByteRune[b] = rune(b)
		} else {
			bpeByteRune[b] = rune(256 + n)
			n++
		}
		bpeRuneByte[bpeByteRune[b]] = byte(b)
	}
}

// bpeBytesToChars encodes raw bytes as byte-level characters.
func bpeBytesToChars(s string) string {
	out := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		out = utf8.AppendRune(out, bpeByteRune[s[i]])
	}
	return string(out)
}

// bpeCharsToBytes decodes byte-level characters back to raw bytes. ok is
// false when s holds a character outside the byte alphabet; such characters
// are copied through unchanged.
func bpeCharsToBytes(s string) (string, bool) {
	out := make([]byte, 0, len(s))
	ok := true
	for _, r := range s {
		if b, found := bpeRuneByte[r]; found {
			out = append(out, b)
		} else {
			ok = false
			out = utf8.AppendRune(out, r)
		}
	}
	return string(out), ok
}
