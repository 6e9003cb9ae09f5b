package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// streamContext bounds how many already-emitted ids a StreamDecoder keeps
// as decoding context.
const streamContext = 8

// streamMaxWindow bounds the window when ids stop producing text.
const streamMaxWindow = 256

// StreamDecoder turns ids arriving one at a time into text, returning only
// the newly completed part. It decodes a window of recent ids and returns
// decode(window+new) minus decode(window), so rules that depend on what
// came before (SentencePiece's leading-space stripping) hold exactly as for
// a single Decode of all ids. Bytes that may still become a UTF-8 character
// are held back; they become U+FFFD only once they can no longer be part of
// a valid character, or at Flush.
type StreamDecoder struct {
	tok     Tokenizer
	window  []int
	emitted int // bytes of Decode(window) already returned or dropped
}

// NewStreamDecoder returns a StreamDecoder over tok.
func NewStreamDecoder(tok Tokenizer) *StreamDecoder {
	return &StreamDecoder{tok: tok}
}

// Add appends id and returns the text it completes (possibly "").
func (d *StreamDecoder) Add(id int) string {
	if id < 0 || id >= d.tok.VocabSize() {
		return "" // Decode skips it too
	}
	d.window = append(d.window, id)
	text := d.tok.Decode(d.window)
	if len(text) < d.emitted {
		// A decoder rule rewrote earlier text; resynchronize.
		d.emitted = len(text)
		return ""
	}
	pending := text[d.emitted:]
	cut := completePrefix(pending)
	out := validText(pending[:cut])
	d.emitted += cut
	if cut == len(pending) {
		d.trim()
	}
	return out
}

// Flush returns any held-back bytes (invalid ones as U+FFFD) and resets
// the decoder.
func (d *StreamDecoder) Flush() string {
	text := d.tok.Decode(d.window)
	var out string
	if d.emitted < len(text) {
		out = validText(text[d.emitted:])
	}
	d.Reset()
	return out
}

// Reset forgets all ids without returning anything.
func (d *StreamDecoder) Reset() {
	d.window = d.window[:0]
	d.emitted = 0
}

// trim shortens the window, once all its text is out, to the shortest
// suffix (of at most streamContext ids) that still decodes to some text, so
// that the next id sees a non-empty left context.
func (d *StreamDecoder) trim() {
	n := len(d.window)
	if n <= streamContext {
		return
	}
	for j := n - 1; j >= n-streamContext; j-- {
		if t := d.tok.Decode(d.window[j:]); t != "" {
			d.window = append(d.window[:0], d.window[j:]...)
			d.emitted = len(t)
			return
		}
	}
	// No text lately (control tokens, say). Keep them all, since what came
	// before them may still decide a leading space; only a pathological run
	// of streamMaxWindow such ids drops the middle of the window.
	if n > streamMaxWindow {
		d.window = append(d.window[:streamContext], d.window[n-streamContext:]...)
		d.emitted = len(d.tok.Decode(d.window))
	}
}

// completePrefix returns the length of the longest prefix of s that does
// not end inside a UTF-8 sequence that more bytes could still complete.
func completePrefix(s string) int {
	i := len(s)
	for k := 0; k < utf8.UTFMax && i > 0; k++ {
		i--
		if !utf8.RuneStart(s[i]) {
			continue
		}
		if !utf8.FullRuneInString(s[i:]) {
			return i
		}
		break
	}
	return len(s)
}

// validText replaces each byte that is not part of a valid UTF-8 sequence
// with U+FFFD.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
