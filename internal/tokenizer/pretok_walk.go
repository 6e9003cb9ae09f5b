package tokenizer

import "strings"

// preWalker is a preTokenizer that hands its pieces to fn one at a time
// instead of collecting them, so encoding a long text does not build a
// slice of all its pre-tokens. The pieces are those of preSplit.
type preWalker interface {
	preWalk(s string, first bool, fn func(piece string))
}

// preWalk calls fn with the pieces of s in order.
func preWalk(p preTokenizer, s string, first bool, fn func(string)) {
	if w, ok := p.(preWalker); ok {
		w.preWalk(s, first, fn)
		return
	}
	var buf [32]string
	for _, piece := range p.preSplit(buf[:0], s, first) {
		fn(piece)
	}
}

func (p preSplitter) preWalk(s string, first bool, fn func(string)) {
	if sc, ok := p.m.(pretokScan); ok && p.behavior == pretokIsolated && !p.invert {
		sc.walk(s, fn) // the matches tile s: they are the pieces
		return
	}
	var buf [32]string
	for _, piece := range p.preSplit(buf[:0], s, first) {
		fn(piece)
	}
}

func (p preByteLevel) preWalk(s string, _ bool, fn func(string)) {
	if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	if !p.useRegex {
		fn(s)
		return
	}
	preSplitter{m: pretokPattern(pretokGPT2), behavior: pretokIsolated}.preWalk(s, false, fn)
}

// preWalk runs the steps as a pipeline: each piece of step k goes through
// step k+1 before the next piece of step k is made. A piece is "first" for
// step k when it is the first piece step k receives, as in preSplit.
func (q preSequence) preWalk(s string, first bool, fn func(string)) {
	if len(q) == 0 {
		fn(s)
		return
	}
	seen := make([]bool, len(q))
	emit := make([]func(string), len(q))
	for k := range q {
		k := k
		if k == len(q)-1 {
			emit[k] = fn
			continue
		}
		emit[k] = func(piece string) {
			f := first && !seen[k+1]
			seen[k+1] = true
			preWalk(q[k+1], piece, f, emit[k+1])
		}
	}
	seen[0] = true
	preWalk(q[0], s, first, emit[0])
}
