package constrain

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxRepeat is the largest count a {m,n} repetition may name.
const MaxRepeat = 256

// gnode is a grammar expression before it is lowered into rules.
type gnode struct {
	kind     gkind
	set      runes    // gSet
	name     string   // gRef
	kids     []*gnode // gSeq, gAlt, gRep (one kid)
	min, max int      // gRep; max < 0: unbounded
	at       where
}

type gkind uint8

const (
	gSet gkind = iota
	gRef
	gSeq
	gAlt
	gRep
)

// srcPos is a line and column (from 1) of a grammar's text.
type srcPos struct{ line, col int }

func (p srcPos) at() string { return fmt.Sprintf("line %d, column %d", p.line, p.col) }

// ParseGBNF compiles a grammar in GBNF, llama.cpp's notation, with root
// as its start rule. The subset:
//
//	name ::= alternatives      a rule (names: letters, digits, - and _)
//	"text"                     a literal (escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH)
//	[a-z0-9_] [^"\\]           a character class, negated with ^
//	.                          any character
//	a b                        a sequence; a | b alternatives; ( ) grouping
//	x* x+ x? x{m} x{m,} x{m,n} repetitions (counts up to MaxRepeat)
//	# comment                  to the end of the line
//
// A rule may span lines; it ends where the next "name ::=" starts. A
// left-recursive rule, a rule that can never end, a reference to an
// undefined rule, a missing root and anything outside the subset are
// errors naming the line and column.
func ParseGBNF(src string) (*Grammar, error) {
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("grammar is not valid UTF-8")
	}
	p := &gbnfParser{src: src, line: 1, col: 1}
	defs := map[string]*gnode{}
	var order []string
	defAt := map[string]srcPos{}
	p.space()
	for !p.eof() {
		at := p.pos()
		name := p.name()
		if name == "" {
			return nil, p.errf("expected a rule name, found %s", p.peekDesc())
		}
		p.space()
		if !p.lit("::=") {
			return nil, p.errf("expected ::= after the rule name %s, found %s", name, p.peekDesc())
		}
		p.space()
		body, err := p.alts(false)
		if err != nil {
			return nil, err
		}
		if _, dup := defs[name]; dup {
			return nil, fmt.Errorf("grammar %s: rule %s is defined twice (first at %s)", at.at(), name, defAt[name].at())
		}
		defs[name], defAt[name] = body, at
		order = append(order, name)
	}
	if defs["root"] == nil {
		return nil, fmt.Errorf("grammar has no root rule: write root ::= ...")
	}
	b := &builder{}
	ids := map[string]int{}
	for _, n := range order {
		ids[n] = b.addRule("rule "+n, gramAt{defAt[n]})
	}
	l := &lowerer{b: b, ids: ids}
	for _, n := range order {
		alts, err := l.alts(defs[n])
		if err != nil {
			return nil, fmt.Errorf("grammar %w", err)
		}
		b.rules[ids[n]] = alts
	}
	g, err := b.build(ids["root"])
	if err != nil {
		return nil, fmt.Errorf("grammar %w", err)
	}
	return g, nil
}

// gramAt is a place in a GBNF text.
type gramAt struct{ p srcPos }

func (g gramAt) at() string { return g.p.at() }

type gbnfParser struct {
	src       string
	i         int
	line, col int
}

func (p *gbnfParser) eof() bool   { return p.i >= len(p.src) }
func (p *gbnfParser) pos() srcPos { return srcPos{p.line, p.col} }
func (p *gbnfParser) peek() byte  { return p.src[p.i] }
func (p *gbnfParser) advance()    { p.advanceRune() }

func (p *gbnfParser) advanceRune() rune {
	r, n := utf8.DecodeRuneInString(p.src[p.i:])
	p.i += n
	if r == '\n' {
		p.line, p.col = p.line+1, 1
	} else {
		p.col++
	}
	return r
}

func (p *gbnfParser) errf(format string, args ...any) error {
	return fmt.Errorf("grammar %s: %s", p.pos().at(), fmt.Sprintf(format, args...))
}

func (p *gbnfParser) peekDesc() string {
	if p.eof() {
		return "the end of the grammar"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.i:])
	return strconv.QuoteRune(r)
}

// space skips spaces, newlines and comments.
func (p *gbnfParser) space() {
	for !p.eof() {
		switch c := p.peek(); {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			p.advance()
		case c == '#':
			for !p.eof() && p.peek() != '\n' {
				p.advance()
			}
		default:
			return
		}
	}
}

func (p *gbnfParser) lit(s string) bool {
	if len(p.src)-p.i >= len(s) && p.src[p.i:p.i+len(s)] == s {
		for range s {
			p.advance()
		}
		return true
	}
	return false
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *gbnfParser) name() string {
	start := p.i
	for !p.eof() && isNameByte(p.peek()) {
		p.advance()
	}
	return p.src[start:p.i]
}

// ruleStart reports whether a new rule ("name ::=") starts here.
func (p *gbnfParser) ruleStart() bool {
	j := p.i
	for j < len(p.src) && isNameByte(p.src[j]) {
		j++
	}
	if j == p.i {
		return false
	}
	for j < len(p.src) && (p.src[j] == ' ' || p.src[j] == '\t' || p.src[j] == '\r' || p.src[j] == '\n') {
		j++
	}
	return len(p.src)-j >= 3 && p.src[j:j+3] == "::="
}

// alts parses alternatives up to the end of the rule (or the closing
// parenthesis when nested).
func (p *gbnfParser) alts(nested bool) (*gnode, error) {
	alt := &gnode{kind: gAlt, at: gramAt{p.pos()}}
	for {
		seq, err := p.seq(nested)
		if err != nil {
			return nil, err
		}
		alt.kids = append(alt.kids, seq)
		if p.eof() || p.peek() != '|' {
			break
		}
		p.advance()
		p.space()
	}
	if len(alt.kids) == 1 {
		return alt.kids[0], nil
	}
	return alt, nil
}

func (p *gbnfParser) seq(nested bool) (*gnode, error) {
	seq := &gnode{kind: gSeq, at: gramAt{p.pos()}}
	for !p.eof() {
		c := p.peek()
		if c == '|' || c == ')' && nested || !nested && p.ruleStart() {
			break
		}
		x, err := p.primary()
		if err != nil {
			return nil, err
		}
		p.space()
		for !p.eof() {
			at := gramAt{p.pos()}
			lo, hi := -1, -1
			brace := p.peek() == '{'
			switch p.peek() {
			case '*':
				lo, hi = 0, -1
			case '+':
				lo, hi = 1, -1
			case '?':
				lo, hi = 0, 1
			case '{':
				var err error
				if lo, hi, err = p.count(); err != nil {
					return nil, err
				}
			}
			if lo < 0 {
				break
			}
			if !brace {
				p.advance()
			}
			x = &gnode{kind: gRep, kids: []*gnode{x}, min: lo, max: hi, at: at}
			p.space()
		}
		seq.kids = append(seq.kids, x)
	}
	return seq, nil
}

// count parses {m}, {m,} or {m,n}.
func (p *gbnfParser) count() (int, int, error) {
	at := p.pos()
	close := -1
	for j := p.i; j < len(p.src); j++ {
		if p.src[j] == '}' {
			close = j
			break
		}
	}
	if close < 0 {
		return 0, 0, p.errf("unclosed {")
	}
	body := p.src[p.i+1 : close]
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxRepeat {
			return 0, fmt.Errorf("grammar %s: repetition count %q: want a number in [0, %d]", at.at(), s, MaxRepeat)
		}
		return n, nil
	}
	var lo, hi int
	var err error
	if a, b, ok := cut(body, ','); ok {
		if lo, err = num(trim(a)); err != nil {
			return 0, 0, err
		}
		hi = -1
		if trim(b) != "" {
			if hi, err = num(trim(b)); err != nil {
				return 0, 0, err
			}
		}
	} else {
		if lo, err = num(trim(body)); err != nil {
			return 0, 0, err
		}
		hi = lo
	}
	if hi >= 0 && hi < lo {
		return 0, 0, fmt.Errorf("grammar %s: repetition {%s} has its maximum below its minimum", at.at(), body)
	}
	for p.i <= close {
		p.advance()
	}
	return lo, hi, nil
}

func cut(s string, c byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func trim(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

func (p *gbnfParser) primary() (*gnode, error) {
	at := gramAt{p.pos()}
	switch c := p.peek(); {
	case c == '"':
		p.advance()
		seq := &gnode{kind: gSeq, at: at}
		for {
			if p.eof() || p.peek() == '\n' {
				return nil, fmt.Errorf("grammar %s: unterminated string literal", at.at())
			}
			if p.peek() == '"' {
				p.advance()
				break
			}
			r, err := p.char()
			if err != nil {
				return nil, err
			}
			seq.kids = append(seq.kids, &gnode{kind: gSet, set: runes{{r, r}}, at: at})
		}
		return seq, nil
	case c == '[':
		p.advance()
		neg := false
		if !p.eof() && p.peek() == '^' {
			p.advance()
			neg = true
		}
		var rs [][2]rune
		for {
			if p.eof() || p.peek() == '\n' {
				return nil, fmt.Errorf("grammar %s: unterminated character class", at.at())
			}
			if p.peek() == ']' {
				p.advance()
				break
			}
			lo, err := p.char()
			if err != nil {
				return nil, err
			}
			hi := lo
			if len(p.src)-p.i >= 2 && p.peek() == '-' && p.src[p.i+1] != ']' {
				p.advance()
				if hi, err = p.char(); err != nil {
					return nil, err
				}
				if hi < lo {
					return nil, fmt.Errorf("grammar %s: character range %q-%q is reversed", at.at(), lo, hi)
				}
			}
			rs = append(rs, [2]rune{lo, hi})
		}
		set := normRunes(rs)
		if neg {
			set = set.negate()
		}
		return &gnode{kind: gSet, set: set, at: at}, nil
	case c == '(':
		p.advance()
		p.space()
		x, err := p.alts(true)
		if err != nil {
			return nil, err
		}
		if p.eof() || p.peek() != ')' {
			return nil, fmt.Errorf("grammar %s: unclosed (", at.at())
		}
		p.advance()
		return x, nil
	case c == '.':
		p.advance()
		return &gnode{kind: gSet, set: anyRune, at: at}, nil
	case isNameByte(c):
		return &gnode{kind: gRef, name: p.name(), at: at}, nil
	}
	return nil, p.errf("unexpected %s (want a string, a [class], a rule name, ( or .)", p.peekDesc())
}

// char reads one character of a literal or class, with its escape.
func (p *gbnfParser) char() (rune, error) {
	at := p.pos()
	r := p.advanceRune()
	if r != '\\' {
		return r, nil
	}
	if p.eof() {
		return 0, fmt.Errorf("grammar %s: escape at the end of the grammar", at.at())
	}
	e := p.advanceRune()
	switch e {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '\'', '[', ']', '-', '^':
		return e, nil
	case 'x', 'u', 'U':
		n := map[rune]int{'x': 2, 'u': 4, 'U': 8}[e]
		if len(p.src)-p.i < n {
			return 0, fmt.Errorf("grammar %s: \\%c needs %d hex digits", at.at(), e, n)
		}
		v, err := strconv.ParseUint(p.src[p.i:p.i+n], 16, 32)
		if err != nil || v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
			return 0, fmt.Errorf("grammar %s: \\%c%s is not a character", at.at(), e, p.src[p.i:p.i+n])
		}
		for range n {
			p.advance()
		}
		return rune(v), nil
	}
	return 0, fmt.Errorf("grammar %s: unknown escape \\%c", at.at(), e)
}

// MaxGrammarItems bounds the size of a compiled grammar: the
// characters, references and repeated copies of all its rules.
const MaxGrammarItems = 1 << 16

// lowerer turns expressions into a builder's rules.
type lowerer struct {
	b     *builder
	ids   map[string]int
	items int // items made so far
}

// grow counts n more items, failing past MaxGrammarItems.
func (l *lowerer) grow(n int, at where) error {
	if l.items += n; l.items > MaxGrammarItems {
		return fmt.Errorf("%s: too large (over %d items once repetitions are written out)", at.at(), MaxGrammarItems)
	}
	return nil
}

func (l *lowerer) alts(n *gnode) ([][]item, error) {
	if n.kind != gAlt {
		seq, err := l.seq(n, nil)
		return [][]item{seq}, err
	}
	var out [][]item
	for _, k := range n.kids {
		seq, err := l.seq(k, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, seq)
	}
	return out, nil
}

// seq appends n's items to out.
func (l *lowerer) seq(n *gnode, out []item) ([]item, error) {
	if err := l.grow(1, n.at); err != nil {
		return nil, err
	}
	switch n.kind {
	case gSet:
		return append(out, l.b.addSet(n.set)), nil
	case gRef:
		id, ok := l.ids[n.name]
		if !ok {
			return nil, fmt.Errorf("%s: rule %s is not defined", n.at.at(), n.name)
		}
		return append(out, item{set: -1, rule: id}), nil
	case gSeq:
		for _, k := range n.kids {
			var err error
			if out, err = l.seq(k, out); err != nil {
				return nil, err
			}
		}
		return out, nil
	case gAlt:
		r := l.b.addRule("a group", n.at)
		alts, err := l.alts(n)
		if err != nil {
			return nil, err
		}
		l.b.rules[r] = alts
		return append(out, item{set: -1, rule: r}), nil
	}
	// gRep: the item repeated, as one set or rule
	x, err := l.seq(n.kids[0], nil)
	if err != nil {
		return nil, err
	}
	one := item{set: -1}
	if len(x) == 1 {
		one = x[0]
	} else {
		one.rule = l.b.addRule("a group", n.at)
		l.b.rules[one.rule] = [][]item{x}
	}
	if err := l.grow(n.min+max(n.max-n.min, 0)*2, n.at); err != nil {
		return nil, err
	}
	for range n.min {
		out = append(out, one)
	}
	const what = "a repetition (of something that may be empty, or too long)"
	switch {
	case n.max < 0:
		r := l.b.addRule(what, n.at)
		l.b.rules[r] = [][]item{{one, {set: -1, rule: r}}, {}}
		out = append(out, item{set: -1, rule: r})
	case n.max > n.min:
		prev := -1
		for range n.max - n.min {
			r := l.b.addRule(what, n.at)
			alt := []item{one}
			if prev >= 0 {
				alt = append(alt, item{set: -1, rule: prev})
			}
			l.b.rules[r] = [][]item{alt, {}}
			prev = r
		}
		out = append(out, item{set: -1, rule: prev})
	}
	return out, nil
}
