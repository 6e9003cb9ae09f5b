package constrain

import (
	"fmt"
	"regexp/syntax"
	"unicode"
)

// regexAt names a regular expression as the place of an error.
type regexAt struct{}

func (regexAt) at() string { return "in the expression" }

// CompileRegex compiles a regular expression (Go's RE2 syntax, as
// package regexp reads it) into a Grammar whose strings are those the
// expression matches as a whole: the output is anchored at both ends,
// so ^ and $ (or \A and \z) may only open and close it. Word boundaries
// (\b, \B), anchors elsewhere and a repetition of something that may
// match the empty string (such as (a*)*) are refused.
func CompileRegex(expr string) (*Grammar, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("regex: %w", err)
	}
	re = re.Simplify()
	// anchors at the ends say what the whole-output match means anyway
	isStart := func(r *syntax.Regexp) bool { return r.Op == syntax.OpBeginText || r.Op == syntax.OpBeginLine }
	isEnd := func(r *syntax.Regexp) bool { return r.Op == syntax.OpEndText || r.Op == syntax.OpEndLine }
	var top *gnode
	switch {
	case isStart(re) || isEnd(re):
		top = &gnode{kind: gSeq, at: regexAt{}}
	case re.Op == syntax.OpConcat:
		subs := re.Sub
		for len(subs) > 0 && isStart(subs[0]) {
			subs = subs[1:]
		}
		for len(subs) > 0 && isEnd(subs[len(subs)-1]) {
			subs = subs[:len(subs)-1]
		}
		top = &gnode{kind: gSeq, at: regexAt{}}
		for _, s := range subs {
			k, err := regexNode(s)
			if err != nil {
				return nil, err
			}
			top.kids = append(top.kids, k)
		}
	default:
		if top, err = regexNode(re); err != nil {
			return nil, err
		}
	}
	b := &builder{}
	root := b.addRule("the expression", regexAt{})
	l := &lowerer{b: b}
	alts, err := l.alts(top)
	if err != nil {
		return nil, fmt.Errorf("regex: %w", err)
	}
	b.rules[root] = alts
	g, err := b.build(root)
	if err != nil {
		return nil, fmt.Errorf("regex %w", err)
	}
	return g, nil
}

func regexNode(re *syntax.Regexp) (*gnode, error) {
	at := regexAt{}
	switch re.Op {
	case syntax.OpNoMatch:
		return &gnode{kind: gSet, set: runes{}, at: at}, nil
	case syntax.OpEmptyMatch:
		return &gnode{kind: gSeq, at: at}, nil
	case syntax.OpLiteral:
		seq := &gnode{kind: gSeq, at: at}
		for _, r := range re.Rune {
			set := runes{{r, r}}
			if re.Flags&syntax.FoldCase != 0 {
				rs := [][2]rune{{r, r}}
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					rs = append(rs, [2]rune{f, f})
				}
				set = normRunes(rs)
			}
			seq.kids = append(seq.kids, &gnode{kind: gSet, set: set, at: at})
		}
		return seq, nil
	case syntax.OpCharClass:
		var rs [][2]rune
		for i := 0; i+1 < len(re.Rune); i += 2 {
			rs = append(rs, [2]rune{re.Rune[i], re.Rune[i+1]})
		}
		return &gnode{kind: gSet, set: normRunes(rs), at: at}, nil
	case syntax.OpAnyCharNotNL:
		return &gnode{kind: gSet, set: runes{{'\n', '\n'}}.negate(), at: at}, nil
	case syntax.OpAnyChar:
		return &gnode{kind: gSet, set: anyRune, at: at}, nil
	case syntax.OpCapture:
		return regexNode(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		k, err := regexNode(re.Sub[0])
		if err != nil {
			return nil, err
		}
		n := &gnode{kind: gRep, kids: []*gnode{k}, at: at}
		switch re.Op {
		case syntax.OpStar:
			n.min, n.max = 0, -1
		case syntax.OpPlus:
			n.min, n.max = 1, -1
		case syntax.OpQuest:
			n.min, n.max = 0, 1
		default:
			n.min, n.max = re.Min, re.Max
		}
		return n, nil
	case syntax.OpConcat, syntax.OpAlternate:
		n := &gnode{kind: gSeq, at: at}
		if re.Op == syntax.OpAlternate {
			n.kind = gAlt
		}
		for _, s := range re.Sub {
			k, err := regexNode(s)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, k)
		}
		return n, nil
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return nil, fmt.Errorf("regex: the anchor %s may only open or close the expression (the whole output is matched)", re)
	}
	return nil, fmt.Errorf("regex: %s is not supported as an output constraint", re)
}
