package chat

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// rewriteConditionals turns every conditional expression nested inside
// brackets, `(X if C else Y)`, into `((C) and [X] or [Y])[0]`, which gonja
// parses. gonja accepts `X if C else Y` only at the top level of `{{ ... }}`
// and `{% set ... %}`; Gemma 3 and Qwen 3.8 templates use it inside
// parentheses. The replacement keeps Jinja's meaning: `and`/`or` return an
// operand and short-circuit, a one-element list is always true, so exactly
// one of X and Y is evaluated. `X if C` without else yields undefined
// (the value of a name no template defines).
//
// Text outside the rewritten items is copied unchanged, so line numbers in
// later error messages still match the original source (columns on a
// rewritten line may shift). A source the lexer rejects (or panics on: gonja's
// lexer can index past a multi-byte character), or with unbalanced
// brackets inside a tag, is left for the parser to report.
func rewriteConditionals(src string, cfg *config.Config) (out string) {
	if !strings.Contains(src, "if") {
		return src
	}
	defer func() {
		if recover() != nil {
			out = src
		}
	}()
	stream := tokens.LexAll(src, cfg)
	var toks []*tokens.Token
	for !stream.End() {
		toks = append(toks, stream.Next())
	}
	if stream.IsError() {
		return src
	}
	match, ok := matchBrackets(toks)
	if !ok {
		return src
	}
	r := &rewriter{src: src, toks: toks, match: match}
	return r.span(0, len(toks), 0, len(src))
}

// matchBrackets pairs every opening bracket token with its closing one,
// tag by tag. It reports false on any imbalance.
func matchBrackets(toks []*tokens.Token) (map[int]int, bool) {
	match := map[int]int{}
	var stack []int
	for i, t := range toks {
		switch t.Type {
		case tokens.VariableBegin, tokens.BlockBegin, tokens.VariableEnd, tokens.BlockEnd:
			if len(stack) != 0 {
				return nil, false
			}
		case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
			stack = append(stack, i)
		case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
			if len(stack) == 0 || !pairs(toks[stack[len(stack)-1]].Type, t.Type) {
				return nil, false
			}
			match[stack[len(stack)-1]] = i
			stack = stack[:len(stack)-1]
		}
	}
	return match, len(stack) == 0
}

func pairs(open, close tokens.Type) bool {
	switch open {
	case tokens.LeftParenthesis:
		return close == tokens.RightParenthesis
	case tokens.LeftBracket:
		return close == tokens.RightBracket
	default:
		return close == tokens.RightBrace
	}
}

// rewriter holds the lexed source. Token i covers source bytes starting at
// toks[i].Pos; brackets, commas and colons are one byte long.
type rewriter struct {
	src   string
	toks  []*tokens.Token
	match map[int]int // opening bracket index -> closing bracket index
}

// span returns source bytes [start, end), which hold tokens [lo, hi), with
// every bracket group inside rewritten.
func (r *rewriter) span(lo, hi, start, end int) string {
	var b strings.Builder
	cur := start
	for i := lo; i < hi; i++ {
		closing, ok := r.match[i]
		if !ok || closing >= hi {
			continue
		}
		b.WriteString(r.src[cur : r.toks[i].Pos+1])
		b.WriteString(r.group(i, closing))
		cur = r.toks[closing].Pos
		i = closing - 1
	}
	b.WriteString(r.src[cur:end])
	return b.String()
}

// group rewrites the inside of the bracket pair (open, closing), item by
// item; items are separated by commas and colons at the group's own depth.
func (r *rewriter) group(open, closing int) string {
	var b strings.Builder
	itemLo, itemStart := open+1, r.toks[open].Pos+1
	for i := open + 1; i <= closing; i++ {
		if c, ok := r.match[i]; ok {
			i = c
			continue
		}
		t := r.toks[i].Type
		if i != closing && t != tokens.Comma && t != tokens.Colon {
			continue
		}
		b.WriteString(r.item(itemLo, i, itemStart, r.toks[i].Pos))
		if i != closing {
			b.WriteString(r.src[r.toks[i].Pos : r.toks[i].Pos+1])
			itemLo, itemStart = i+1, r.toks[i].Pos+1
		}
	}
	return b.String()
}

// topName returns the index of the first token in [lo, hi) outside nested
// brackets that is the name want, or -1.
func (r *rewriter) topName(lo, hi int, want string) int {
	for i := lo; i < hi; i++ {
		if c, ok := r.match[i]; ok {
			i = c
			continue
		}
		if t := r.toks[i]; t.Type == tokens.Name && t.Val == want {
			return i
		}
	}
	return -1
}

// item rewrites one expression of a bracket group, tokens [lo, hi) over
// source bytes [start, end).
func (r *rewriter) item(lo, hi, start, end int) string {
	prefix := ""
	if hi-lo >= 2 && r.toks[lo].Type == tokens.Name && r.toks[lo+1].Type == tokens.Assign {
		// keyword argument name=value: only the value can be a conditional
		p := r.toks[lo+1].Pos + 1
		prefix, start, lo = r.src[start:p], p, lo+2
	}
	cond := r.topName(lo, hi, "if")
	if cond <= lo {
		return prefix + r.span(lo, hi, start, end)
	}
	alt := r.topName(cond+1, hi, "else")
	if alt < 0 {
		alt = hi
	}
	if alt == cond+1 || alt == hi-1 || r.topName(cond+1, alt, "if") >= 0 {
		// empty condition or branch, or `X if C1 if C2`: not Jinja, so
		// leave it for the parser to report
		return prefix + r.span(lo, hi, start, end)
	}
	condEnd, altText := end, undefinedName
	if alt < hi {
		condEnd = r.toks[alt].Pos
		altText = r.item(alt+1, hi, r.toks[alt].Pos+len("else"), end)
	}
	x := r.span(lo, cond, start, r.toks[cond].Pos)
	c := r.span(cond+1, alt, r.toks[cond].Pos+len("if"), condEnd)
	return prefix + "((" + c + ") and [" + x + "] or [" + altText + "])[0]"
}

// undefinedName is a variable no template sets: its value is undefined.
const undefinedName = "__chat_undefined__"
