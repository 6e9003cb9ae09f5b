package engine

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// convRewind is how many positions back a session of a model whose only
// state is causal convolutions (LFM2's short convolutions) can rewind:
// what a chat turn that re-renders its last tokens, or a dropped or partly
// committed pass, needs. Each position kept costs one input row per
// convolution.
const convRewind = 64

// convHistory keeps the rows that went into each causal_conv step at the
// last positions, so that the convolution states (the last K-1 rows) can
// be put back at an earlier position: a recurrent state that rewinds.
type convHistory struct {
	keep   int         // R: positions kept; 0 when the model cannot rewind
	hist   int         // the most state rows of a slot (K-1)
	kernel []int       // per state slot: the causal_conv's K
	ring   [][]float32 // per state slot: R rows, the row of position p at p mod R
	at     int         // position of the first row of the running pass
	end    int         // rows of positions [max(0, end-R), end) are held
}

// newConvHistory sizes the history for p's state slots when every one of
// them belongs to a causal_conv step, and leaves it empty otherwise (a
// model with other state rewinds only to its state cache's boundaries).
func newConvHistory(p *plan.Plan, ctx int) convHistory {
	h := convHistoryShape(p, ctx)
	for i, n := range p.State {
		if h.keep > 0 {
			h.ring = append(h.ring, make([]float32, h.keep*(n/(h.kernel[i]-1))))
		}
	}
	return h
}

// convWindowSize returns the floats the history of a session of p with a
// context of ctx positions holds (0 when it keeps none).
func convWindowSize(p *plan.Plan, ctx int) int64 {
	h := convHistoryShape(p, ctx)
	if h.keep == 0 {
		return 0
	}
	var n int64
	for i, v := range p.State {
		n += int64(h.keep) * int64(v/(h.kernel[i]-1))
	}
	return n
}

// convHistoryShape is newConvHistory without the rows.
func convHistoryShape(p *plan.Plan, ctx int) convHistory {
	kernel := make([]int, len(p.State))
	for _, st := range p.Steps {
		if st.Op.Stateful() {
			if st.Op != op.CausalConv {
				return convHistory{}
			}
			kernel[st.Slot] = st.HeadDim
		}
	}
	hist := 0
	for _, K := range kernel {
		if K < 2 {
			return convHistory{} // a slot of no causal_conv: the plan is refused elsewhere
		}
		hist = max(hist, K-1)
	}
	if hist == 0 {
		return convHistory{}
	}
	return convHistory{keep: min(convRewind, ctx) + hist, hist: hist, kernel: kernel}
}

// record keeps the rows x [rows, cols] a causal_conv step of slot reads
// in the running pass. Every pass records, so the history never holds
// rows past the last pass.
func (h *convHistory) record(slot int, x []float32, rows, cols int) {
	if h.keep == 0 {
		return
	}
	ring := h.ring[slot]
	for t := range rows {
		r := (h.at + t) % h.keep
		copy(ring[r*cols:(r+1)*cols], x[t*cols:(t+1)*cols])
	}
	h.end = h.at + rows
}

// rewind sets every state slot to the convolution state at position pos
// (the K-1 rows before it, zero before position 0), and reports whether
// the history holds them; on false nothing changes.
func (h *convHistory) rewind(slots [][]float32, pos int) bool {
	if h.keep == 0 || pos > h.end {
		return false
	}
	for i := range slots {
		if lo := max(pos-(h.kernel[i]-1), 0); lo < h.end-h.keep {
			return false
		}
	}
	for i, S := range slots {
		H := h.kernel[i] - 1
		cols := len(S) / H
		for j := range H {
			dst := S[j*cols : (j+1)*cols]
			p := pos - H + j
			if p < 0 {
				clear(dst)
				continue
			}
			r := p % h.keep
			copy(dst, h.ring[i][r*cols:(r+1)*cols])
		}
	}
	h.end = pos
	return true
}

// limit says how far back a rewind may go, for errors.
func (h *convHistory) limit() string {
	if h.keep == 0 {
		return "only to 0"
	}
	return fmt.Sprintf("at most %d positions back, or to 0", h.keep-h.hist)
}
