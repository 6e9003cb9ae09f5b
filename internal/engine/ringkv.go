package engine

import (
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// A cache layer whose every attention step sees only the last Window
// positions (a sliding-window layer: Gemma 3 and 4, Phi-3, any plan with
// Attn.Window) keeps a ring of R = Window + 2*rows slots per key/value
// head instead of one slot per position of the context, rows being the
// most rows one pass holds. Position q goes into ring slot q mod R and
// into its mirror R slots later, so the slots a row attends to, at most
// Window + rows - 1 consecutive positions, are one contiguous run from
// slot (first mod R): the attention kernels read a ring layer as they
// read a full one, and the memory of such a layer no longer grows with
// the context. The extra rows of the ring let a pass's rows overwrite
// nothing a row of the same pass reads (Window + rows - 1) and let a
// session rewind up to rows positions behind the furthest it wrote;
// further rewinds, which would need positions the ring dropped, fail
// (Session.Rewind), and callers start over. A layer keeps the full cache
// when the mirrored ring would not be smaller.

// kvRing is the ring length of each cache layer of p for a session of
// ctx positions and passes of at most rows rows (0: the layer keeps a
// slot per position), and the window each ring layer sees.
func kvRing(p *plan.Plan, ctx, rows int) (ring, window []int) {
	layers := p.KV.Layers
	ring, window = make([]int, layers), make([]int, layers)
	full := make([]bool, layers)
	for _, st := range p.Steps {
		a := st.Attn
		if a == nil || (st.Op != op.Attention && st.Op != op.SharedAttention) || a.Bidirectional || a.Layer >= layers {
			continue
		}
		if a.Window <= 0 {
			full[a.Layer] = true
			continue
		}
		window[a.Layer] = max(window[a.Layer], a.Window)
	}
	for l := range ring {
		if full[l] || window[l] == 0 {
			window[l] = 0
			continue
		}
		if r := window[l] + 2*rows; 2*r < ctx {
			ring[l] = r
		} else {
			window[l] = 0
		}
	}
	return ring, window
}

// KVSlots returns the slots per key/value head that each cache layer of
// a session of p takes for ctx positions when the artifact's largest
// pass holds rows rows: ctx, or twice the ring of a sliding-window layer
// (see kvRing).
func KVSlots(p *plan.Plan, ctx, rows int) []int {
	ring, _ := kvRing(p, ctx, rows)
	slots := make([]int, len(ring))
	for l, r := range ring {
		slots[l] = ctx
		if r > 0 {
			slots[l] = 2 * r
		}
	}
	return slots
}

// slotAt returns the cache slot of position q in a's layer: q, or q mod
// the ring.
func (a *attnArgs) slotAt(q int) int {
	if a.ring > 0 {
		return q % a.ring
	}
	return q
}

// ringKeeps reports whether every ring layer still holds the positions a
// row at position pos reads from the committed cache, given that the
// session wrote slots below s.wrote.
func (s *Session) ringKeeps(pos int) bool {
	for l, r := range s.ring {
		if r > 0 && max(0, pos-s.window[l]+1) < s.wrote-r {
			return false
		}
	}
	return true
}

// noteWritten records that the running pass wrote slots up to pos+n.
func (s *Session) noteWritten(n int) { s.wrote = max(s.wrote, s.pos+n) }
