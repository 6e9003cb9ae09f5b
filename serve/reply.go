package serve

import (
	"context"
	"strings"

	"github.com/aotlm/aotlm"
)

// Reasoning models write their thinking between these marks (Qwen3,
// SmolLM3, DeepSeek-R1 and the templates that follow them).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkSplit splits a streamed reply into its thinking and its answer.
// The thinking is what comes between <think> and </think> at the start
// of the reply, or from the start up to </think> when the prompt ends
// with <think> (the template opened it). Marks cut across chunks are
// held back until they are known.
type thinkSplit struct {
	in      bool   // inside the thinking
	begun   bool   // past where an opening mark may appear
	trim    bool   // drop the whitespace that follows </think>
	pending string // text not yet placed
	// the thinking is given without its leading and trailing
	// whitespace: said tells whether some was given, space holds the
	// whitespace given only if more thinking follows
	said  bool
	space string
}

// newThinkSplit starts a split for a prompt: open tells whether the
// prompt leaves the model inside the thinking.
func newThinkSplit(open bool) *thinkSplit {
	return &thinkSplit{in: open, begun: open}
}

// feed takes the next chunk of the reply and returns the thinking and
// the answer text that are now known.
func (t *thinkSplit) feed(s string) (reasoning, content string) {
	r, c := t.place(s)
	return t.trimmed(r), c
}

// asciiSpace is the whitespace trimmed around the thinking and after
// </think>: ASCII only, so that a chunk ending inside a multi-byte
// character is trimmed as the whole reply is.
const asciiSpace = " \t\r\n"

// trimmed gives the thinking r without the thinking's leading and
// trailing whitespace.
func (t *thinkSplit) trimmed(r string) string {
	if !t.said {
		if r = strings.TrimLeft(r, asciiSpace); r == "" {
			return ""
		}
		t.said = true
	}
	r = t.space + r
	out := strings.TrimRight(r, asciiSpace)
	t.space = r[len(out):]
	if !t.in {
		t.space = "" // the thinking is over
	}
	return out
}

// place splits the next chunk.
func (t *thinkSplit) place(s string) (reasoning, content string) {
	t.pending += s
	var r, c strings.Builder
	for t.pending != "" {
		switch {
		case !t.begun:
			rest := strings.TrimLeft(t.pending, " \t\r\n")
			if after, ok := strings.CutPrefix(rest, thinkOpen); ok {
				t.in, t.begun, t.pending = true, true, after
				continue
			}
			if strings.HasPrefix(thinkOpen, rest) {
				return r.String(), c.String() // maybe the opening mark
			}
			t.begun = true
		case t.in:
			if i := strings.Index(t.pending, thinkClose); i >= 0 {
				r.WriteString(t.pending[:i])
				t.in, t.trim, t.pending = false, true, t.pending[i+len(thinkClose):]
				continue
			}
			keep := partialSuffix(t.pending, thinkClose)
			r.WriteString(t.pending[:len(t.pending)-keep])
			t.pending = t.pending[len(t.pending)-keep:]
			return r.String(), c.String()
		default:
			if t.trim {
				t.pending = strings.TrimLeft(t.pending, " \t\r\n")
				if t.pending == "" {
					return r.String(), c.String()
				}
				t.trim = false
			}
			c.WriteString(t.pending)
			t.pending = ""
		}
	}
	return r.String(), c.String()
}

// flush returns what is held back at the end of the reply.
func (t *thinkSplit) flush() (reasoning, content string) {
	p := t.pending
	t.pending = ""
	if t.in {
		t.in = false
		return t.trimmed(p), ""
	}
	if t.trim {
		p = strings.TrimLeft(p, " \t\r\n")
	}
	return "", p
}

// partialSuffix is the length of the longest suffix of s that is a
// proper prefix of mark.
func partialSuffix(s, mark string) int {
	for n := min(len(s), len(mark)-1); n > 0; n-- {
		if strings.HasSuffix(s, mark[:n]) {
			return n
		}
	}
	return 0
}

// splitThinking splits a whole reply (see thinkSplit).
func splitThinking(text string, open bool) (reasoning, content string) {
	t := newThinkSplit(open)
	r, c := t.feed(text)
	r2, c2 := t.flush()
	return r + r2, c + c2
}

// reply is one chat generation's answer in its parts.
type reply struct {
	res       *aotlm.Result
	reasoning string
	content   string
	calls     []toolCall
	// finish is "stop", "length" or "tool_calls" (OpenAI's names).
	finish string
}

// generateReply runs a chat job on sl and splits the reply into its
// thinking, its text and its tool calls. With onDelta, the thinking and
// the text stream as they come; with tools, text that may be a call is
// held back until it is known not to be one: a reply that may open with
// a call, and everything from a <tool_call> mark on. Tool calls are only
// in the returned reply; the text streamed is the text of the reply.
func (s *Server) generateReply(ctx context.Context, sl *slot, j job, cons *constraints, onDelta func(reasoning, content string) error) (*reply, error) {
	rp := &reply{}
	var split *thinkSplit
	if cons.think {
		split = newThinkSplit(cons.thinkOpen)
	}
	text := &textStream{tools: cons.tools}
	var hs *harmonyStream // a gpt-oss reply, streamed by its channels
	if onDelta != nil && cons.tools != nil && cons.tools.format == formatHarmony && split == nil {
		hs = &harmonyStream{names: cons.tools.names}
	}
	emit := func(r, c string) error {
		rp.reasoning += r
		rp.content += c
		if hs != nil {
			text.text += c
			if r, c = hs.add(c); r == "" && c == "" {
				return nil
			}
			return onDelta(r, c)
		}
		if onDelta == nil {
			text.text += c
			return nil
		}
		if c = text.add(c); r == "" && c == "" {
			return nil
		}
		return onDelta(r, c)
	}
	res, err := s.run(ctx, sl, j, func(t aotlm.Token) error {
		if split == nil {
			return emit("", t.Text)
		}
		return emit(split.feed(t.Text))
	})
	if err != nil {
		return nil, err
	}
	if split != nil {
		if err := emit(split.flush()); err != nil {
			return nil, err
		}
	}
	rp.res = res
	rp.reasoning = strings.TrimSpace(rp.reasoning)
	rp.finish = cons.finish(res)
	content, calls, tail := text.end()
	rp.content = content // the reply's text without call markup
	if len(calls) > 0 {
		rp.calls, rp.finish = calls, "tool_calls"
	}
	analysis := ""
	if cons.tools != nil && rp.reasoning == "" {
		// gpt-oss's analysis channel is its thinking
		analysis = harmonyAnalysis(text.text)
		rp.reasoning = analysis
	}
	if hs != nil {
		// the stream gave a prefix of each part: the rest follows
		analysis, tail = hs.end(rp.reasoning, content)
	}
	if onDelta != nil && (tail != "" || analysis != "") {
		if err := onDelta(analysis, tail); err != nil {
			return nil, err
		}
	}
	return rp, nil
}

// finish is the finish_reason of a generation under the constraints: a
// constrained reply that stopped before its format was complete (the
// token limit left no room for a valid one) ends with "length", never
// with an empty "stop"; one whose last token, at the limit, completed
// its format ends with "stop", as only the end of the reply could follow.
func (c *constraints) finish(res *aotlm.Result) string {
	f := finishReason(res.StopReason)
	switch {
	case f == "stop" && c.mask != nil && !c.mask.Done():
		return "length"
	case res.StopReason == aotlm.StopLength && c.mask != nil && len(res.IDs) > 0 && c.mask.DoneWith(res.IDs[len(res.IDs)-1]):
		return "stop"
	}
	return f
}

// textStream holds back the text of a streamed reply that may be a tool
// call: a reply that may open with a call, and everything from a
// <tool_call> mark on.
type textStream struct {
	tools  *toolParser // nil: no tools, nothing is held
	text   string      // the reply's text so far
	sent   int         // bytes of text let through
	inCall bool        // a call mark was seen
}

// add takes the next text and returns what is now known not to be part
// of a call.
func (t *textStream) add(c string) string {
	t.text += c
	pending := t.text[t.sent:]
	switch {
	case t.tools == nil:
	case t.inCall, t.sent == 0 && t.tools.maybeCall(pending):
		return ""
	default:
		if i, _ := firstOpen(pending); i >= 0 {
			t.inCall = true
			pending = pending[:i]
		} else {
			pending = pending[:len(pending)-partialOpen(pending)]
		}
	}
	t.sent += len(pending)
	return pending
}

// end reads the whole reply: its text and its calls, and the text still
// to stream (when there are calls, or markup was dropped, what of the
// reply's text follows the text let through; the held text otherwise).
func (t *textStream) end() (content string, calls []toolCall, tail string) {
	if t.tools != nil {
		if content, calls := t.tools.parse(t.text); len(calls) > 0 || content != t.text {
			if sent := strings.TrimLeft(t.text[:t.sent], " \t\r\n"); strings.HasPrefix(content, sent) {
				tail = content[len(sent):]
			}
			return content, calls, tail
		}
	}
	return t.text, nil, t.text[t.sent:]
}
