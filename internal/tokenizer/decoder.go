package tokenizer

import (
	"strings"
)

// decToken is one token on its way through the decoders. Verbatim tokens
// (added tokens) pass through the byte-level decoders untouched.
type decToken struct {
	text     string
	verbatim bool
}

// hfDecoder turns token strings back into text (tokenizer.json "decoder").
// Each step maps the token list to a new one; the result is their
// concatenation.
type hfDecoder interface {
	decode(toks []decToken) []decToken
}

// decByteLevel maps byte-level characters back to bytes.
type decByteLevel struct{}

func (decByteLevel) decode(toks []decToken) []decToken {
	for i, t := range toks {
		if !t.verbatim {
			toks[i].text, _ = bpeCharsToBytes(t.text)
		}
	}
	return toks
}

// decByteFallback turns "<0xXX>" tokens into their byte.
type decByteFallback struct{}

func (decByteFallback) decode(toks []decToken) []decToken {
	for i, t := range toks {
		if t.verbatim {
			continue
		}
		if c, ok := hfParseByteToken(t.text); ok {
			toks[i].text = string([]byte{c})
		}
	}
	return toks
}

// hfParseByteToken reads "<0xXX>".
func hfParseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hfHexVal(s[3])
	lo, ok2 := hfHexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hfHexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// decFuse joins all tokens into one.
type decFuse struct{}

func (decFuse) decode(toks []decToken) []decToken {
	if len(toks) < 2 {
		return toks
	}
	var sb strings.Builder
	for _, t := range toks {
		sb.WriteString(t.text)
	}
	return []decToken{{text: sb.String()}}
}

// decStrip removes up to start leading and stop trailing copies of content
// from every token.
type decStrip struct {
	content     string
	start, stop int
}

func (d decStrip) decode(toks []decToken) []decToken {
	if d.content == "" {
		return toks
	}
	for i, t := range toks {
		s := t.text
		for n := 0; n < d.start && strings.HasPrefix(s, d.content); n++ {
			s = s[len(d.content):]
		}
		for n := 0; n < d.stop && strings.HasSuffix(s, d.content); n++ {
			s = s[:len(s)-len(d.content)]
		}
		toks[i].text = s
	}
	return toks
}

// decReplace replaces a literal pattern in every model token.
type decReplace struct{ pattern, content string }

func (d decReplace) decode(toks []decToken) []decToken {
	if d.pattern == "" {
		return toks
	}
	for i, t := range toks {
		if !t.verbatim {
			toks[i].text = strings.ReplaceAll(t.text, d.pattern, d.content)
		}
	}
	return toks
}

// decMetaspace turns the replacement character back into spaces and drops
// the space the pre-tokenizer prepended to the first token.
type decMetaspace struct {
	replacement string
	stripFirst  bool
}

func (d decMetaspace) decode(toks []decToken) []decToken {
	for i, t := range toks {
		if t.verbatim {
			continue
		}
		s := strings.ReplaceAll(t.text, d.replacement, " ")
		if i == 0 && d.stripFirst {
			s = strings.TrimPrefix(s, " ")
		}
		toks[i].text = s
	}
	return toks
}

// decSequence applies decoders in order.
type decSequence []hfDecoder

func (q decSequence) decode(toks []decToken) []decToken {
	for _, d := range q {
		toks = d.decode(toks)
	}
	return toks
}
