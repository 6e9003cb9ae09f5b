package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/op"
)

// recState is a session's recurrent state: one slot per plan state slot,
// carried across passes (token_shift's previous row, wkv7's [H, E, E]
// matrices, ssm_scan's [H, P, N] ones), and the wkv7 scratch. A pass
// reads prev and writes slots: two sets of the snapshots (snapshot.go), or
// the same set.
type recState struct {
	conv  convHistory // causal_conv inputs by position, for rewinding inside a pass
	slots [][]float32
	prev  [][]float32
	tmp   []float32
	snap  snapshots // the state cache: the state at the last pass boundaries
	// deltaTask runs gated_delta steps on the pool (deltanet.go), with up
	// to threads workers.
	deltaTask deltaTask
	// ssmTask runs ssm_scan steps on the pool (mamba2.go).
	ssmTask ssmTask
	pool    *pool
	threads int
}

func newRecState(sizes []int, tmp int) recState {
	r := recState{tmp: make([]float32, tmp)}
	for _, n := range sizes {
		r.slots = append(r.slots, make([]float32, n))
	}
	r.prev = r.slots
	r.snap = snapshots{sets: [][][]float32{r.slots}, pos: []int{0}}
	return r
}

// run executes one of the ops isRecurrent accepts over the valid rows
// of its buffers: out and in are [rows, cols] (padding rows excluded, so
// they never reach the state).
func (r *recState) run(st *step, out []float32, in [][]float32, rows, cols int) {
	x := in[0]
	if st.Op == op.CausalConv {
		r.conv.record(st.Slot, x, rows, cols)
	}
	switch st.Op {
	case op.LayerNorm:
		op.LayerNormRows(out, x, st.ws[0], st.ws[1], cols, st.Eps)
	case op.TokenShift:
		op.TokenShiftRows(out, x, r.slots[st.Slot], rows, cols)
	case op.Mix:
		y, m := in[1], st.ws[0]
		for t := 0; t < rows; t++ {
			o := t * cols
			for c := 0; c < cols; c++ {
				out[o+c] = x[o+c] + (y[o+c]-x[o+c])*m[c]
			}
		}
	case op.Sub:
		y := in[1]
		for j := range out {
			out[j] = x[j] - y[j]
		}
	case op.Sigmoid:
		for j := range out {
			out[j] = op.SigmoidOf(x[j])
		}
	case op.Tanh:
		for j := range out {
			out[j] = float32(math.Tanh(float64(x[j])))
		}
	case op.ReLU:
		for j := range out {
			out[j] = max(x[j], 0)
		}
	case op.WKV7:
		op.WKV7Rows(out, in[0], in[1], in[2], in[3], in[4], r.prev[st.Slot], r.slots[st.Slot], [5][]float32(st.ws), rows, cols, st.HeadDim, st.Eps, r.tmp)
	case op.CausalConv:
		op.CausalConvRows(out, x, st.ws[0], r.prev[st.Slot], r.slots[st.Slot], rows, cols, st.HeadDim)
		if len(st.ws) > 1 {
			addConvBiasRows(out, st.ws[1], rows)
		}
	case op.SSMScan:
		r.ssmScan(st, out, in, rows, cols)
	default:
		r.runDeltaNet(st, out, in, rows, cols)
	}
}
