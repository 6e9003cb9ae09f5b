package serve

import (
	"math"

	"github.com/aotlm/aotlm/internal/constrain"
)

// thinkGate runs the thinking part of a generation before its
// constraint ("think freely, then constrain"): while the model thinks,
// its tokens are free, up to a budget of thinking tokens after which the
// closing mark (</think> and a blank line) is forced; the answer that
// follows is kept to the constraint, which starts there with the tokens
// that are left. It is the Request.Logits hook of such a generation.
type thinkGate struct {
	tok    [][]byte // each id's bytes
	split  *thinkSplit
	fed    int // generated ids read
	think0 int // where the thinking began in generated (-1: not yet)
	start  int // where the answer begins in generated (-1: not yet)
	// budget is the most thinking tokens (0: no limit); close the ids
	// forced after it.
	budget int
	close  []int
	// newMask makes the answer's constraint for the tokens left (nil:
	// the answer is free); cons receives it, for the finish reason.
	newMask func(left int) *constrain.Mask
	left    int // tokens the generation may produce
	mask    *constrain.Mask
	cons    *constraints
}

// newThinkGate makes the gate of a generation whose prompt leaves the
// model inside its thinking (open) or not.
func (s *Server) newThinkGate(open bool, budget int, cons *constraints) *thinkGate {
	g := &thinkGate{tok: s.tokenBytes(), split: newThinkSplit(open), think0: -1, start: -1, budget: budget, cons: cons}
	if open {
		g.think0 = 0
	}
	if budget > 0 {
		g.close, _ = s.m.Encode(thinkClose+"\n\n", true)
	}
	return g
}

// Apply masks the logits of the next token; generated are the ids so
// far.
func (g *thinkGate) Apply(logits []float32, generated []int) {
	for ; g.fed < len(generated) && g.start < 0; g.fed++ {
		id := generated[g.fed]
		var b []byte
		if id >= 0 && id < len(g.tok) {
			b = g.tok[id]
		}
		g.split.feed(string(b))
		if g.split.in && g.think0 < 0 {
			g.think0 = g.fed
		}
		if g.split.begun && !g.split.in {
			// the thinking is over, or there was none
			g.start = g.fed + 1
			if g.think0 < 0 {
				g.start = 0
			}
			if g.newMask != nil {
				left := 0
				if g.left > 0 {
					left = max(1, g.left-g.start)
				}
				g.mask = g.newMask(left)
				g.cons.mask = g.mask
			}
		}
	}
	if g.start >= 0 {
		if g.mask != nil {
			g.mask.Apply(logits, generated[g.start:])
		}
		return
	}
	if g.budget <= 0 || g.think0 < 0 {
		return
	}
	if k := len(generated) - g.think0 - g.budget; k >= 0 && k < len(g.close) {
		force(logits, g.close[k])
	}
}

// force leaves id the only token that can be drawn.
func force(logits []float32, id int) {
	if id < 0 || id >= len(logits) {
		return
	}
	neg := float32(math.Inf(-1))
	for i := range logits {
		if i != id {
			logits[i] = neg
		}
	}
	logits[id] = 0
}
