package engine

import "github.com/aotlm/aotlm/internal/op"

// The Gated DeltaNet steps (op/deltanet.go), run over a pass's valid rows
// with the session's state slots.

// deltaTemp is the scratch a gated_delta step needs.
func deltaTemp(d *op.DeltaDims) int { return d.Temp() }

// runDeltaNet runs a causal_conv or gated_delta step.
func (r *recState) runDeltaNet(st *step, out []float32, in [][]float32, rows, cols int) {
	switch st.Op {
	case op.CausalConv:
		op.CausalConvRows(out, in[0], st.ws[0], r.slots[st.Slot], rows, cols, st.HeadDim)
	case op.GatedDelta:
		op.GatedDeltaRows(out, in[0], in[1], in[2], st.ws[0], st.ws[1], r.slots[st.Slot], rows, *st.Delta, r.tmp)
	}
}
