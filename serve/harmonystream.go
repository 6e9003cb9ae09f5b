package serve

import (
	"strings"
	"unicode"
)

// harmonyEnds are the marks that end a gpt-oss message's body.
var harmonyEnds = []string{"<|end|>", "<|call|>", "<|return|>", harmonyStart}

// harmonyStream streams a gpt-oss reply as it comes: the analysis
// channel's text as thinking, the other messages' text as the answer
// (calls are held: they come with the whole reply). What it gives is
// always a prefix of what the whole reply reads as (harmonyAnalysis,
// toolParser.parse): a message is placed once its header is complete,
// marks cut across chunks are held, and so is whitespace that may end
// the thinking or the answer.
type harmonyStream struct {
	text  string
	names map[string]bool // the tools a call may name
	sentR string          // thinking given so far
	sentC string          // answer given so far
	stuck bool            // the reply left the known shape: the rest comes at the end
}

// add takes the next chunk and returns the thinking and answer text now
// known.
func (h *harmonyStream) add(chunk string) (reasoning, content string) {
	h.text += chunk
	if h.stuck {
		return "", ""
	}
	r, c, ok := harmonyStable(h.text, h.names)
	if !ok {
		h.stuck = true
		return "", ""
	}
	return h.give(r, c)
}

// give returns what r and c add to what was given (their leading
// whitespace aside, which the stream never gives), or nothing for a part
// that no longer extends it.
func (h *harmonyStream) give(r, c string) (reasoning, content string) {
	if rest, ok := strings.CutPrefix(strings.TrimLeftFunc(r, unicode.IsSpace), h.sentR); ok {
		reasoning, h.sentR = rest, h.sentR+rest
	}
	if rest, ok := strings.CutPrefix(strings.TrimLeftFunc(c, unicode.IsSpace), h.sentC); ok {
		content, h.sentC = rest, h.sentC+rest
	}
	return reasoning, content
}

// end returns what the whole reply's thinking and answer add to what was
// streamed ("" for a part the stream went another way on: only when a
// mark opens no call of a known tool, an unknown name or arguments that
// are no JSON, so that the whole reply becomes text).
func (h *harmonyStream) end(reasoning, content string) (string, string) {
	return h.give(reasoning, content)
}

// harmonyStable reads the part of a gpt-oss reply that later text cannot
// change: the thinking (analysis messages, each trimmed, joined by new
// lines, as harmonyAnalysis) and the answer (text before the first mark
// and the other messages' bodies, trimmed, as toolParser.harmony and
// parse), the last message's body without a mark it may end with, and
// both without trailing whitespace. ok is false once a call names no
// known tool (the whole reply is then text).
func harmonyStable(text string, names map[string]bool) (reasoning, content string, ok bool) {
	var r, c strings.Builder
	t := text
	i, _ := firstOpen(t)
	if i < 0 {
		if mayBeHeader(t) {
			return "", "", true // a header's recipient, unless no mark follows
		}
		t = t[:len(t)-partialOpen(t)]
		return "", strings.TrimSpace(t), true
	}
	if !harmonyHeaded(t[:i]) {
		c.WriteString(t[:i])
	}
	t = t[i:]
	for {
		j := strings.Index(t, harmonyMessage)
		if j < 0 {
			break // a header still coming
		}
		header, body := t[:j], t[j+len(harmonyMessage):]
		end := -1
		for _, m := range harmonyEnds {
			if k := strings.Index(body, m); k >= 0 && (end < 0 || k < end) {
				end = k
			}
		}
		rest := ""
		if end >= 0 {
			body, rest = body[:end], body[end:]
		} else {
			hold := 0
			for _, m := range harmonyEnds {
				hold = max(hold, partialSuffix(body, m))
			}
			body = body[:len(body)-hold]
		}
		if _, name, found := strings.Cut(header, harmonyFunction); found {
			if k := strings.IndexAny(name, " <"); k >= 0 {
				name = name[:k]
			}
			if !names[strings.TrimSpace(name)] {
				return "", "", false
			}
		} else {
			channel, analysis := "", false
			if _, ch, found := strings.Cut(header, harmonyChannel); found {
				analysis = strings.HasPrefix(ch, "analysis")
				channel, _, _ = strings.Cut(ch, " ")
				channel, _, _ = strings.Cut(channel, "<")
			}
			if analysis {
				if r.Len() > 0 {
					r.WriteString("\n")
				}
				r.WriteString(strings.TrimSpace(body))
			}
			if channel != "analysis" {
				c.WriteString(body)
			}
		}
		if end < 0 {
			break
		}
		t = rest
	}
	return strings.TrimRightFunc(r.String(), unicode.IsSpace), strings.TrimSpace(c.String()), true
}

// mayBeHeader reports whether text before any mark may still turn out to
// be the rest of the header the prompt opened (harmonyHeaded once a mark
// follows): it starts with the recipient, or is a beginning of it.
func mayBeHeader(s string) bool {
	s = strings.TrimLeft(s, " \t\r\n")
	return strings.HasPrefix(s, harmonyRecipient) || strings.HasPrefix(harmonyRecipient, s)
}
