package engine

import "github.com/aotlm/aotlm/internal/op"

// ssmScan runs an ssm_scan step over the pass's valid rows, carrying the
// [H, P, N] state of its slot: one call scans every row of the pass in
// order. Its inputs are x [rows, cols], dt [rows, H], B and C [rows, G*N];
// ws holds A, D and dt_bias.
func (r *recState) ssmScan(st *step, out []float32, in [][]float32, rows, cols int) {
	S := r.slots[st.Slot]
	H := len(st.ws[0])
	N := len(S) / cols
	G := len(in[2]) / max(rows, 1) / N
	op.SSMScanRows(out, in[0], in[1], in[2], in[3], st.ws[0], st.ws[1], st.ws[2], S, rows, H, st.HeadDim, G, N)
}

// addConvBiasRows adds b to each of the rows of out.
func addConvBiasRows(out, b []float32, rows int) {
	C := len(b)
	for t := range rows {
		o := out[t*C : (t+1)*C]
		for c, v := range b {
			o[c] += v
		}
	}
}
