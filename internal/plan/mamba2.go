package plan

import (
	"fmt"
)

// checkSSMScan checks an ssm_scan step (x, dt, B, C; its HeadDim is the
// head size P): dt has one column per head of P, B and C agree, the
// inputs are full passes, and its slot holds the [H, P, N] state of
// whole groups of N.
func (p *Plan) checkSSMScan(st *Step, in []Buffer, o Buffer) *Error {
	x, dt, b, c := in[0], in[1], in[2], in[3]
	for i, buf := range in {
		if buf.Rows != p.Rows {
			return errf(fmt.Sprintf(".in[%d]", i), "%v input of %d rows in a pass of %d", st.Op, buf.Rows, p.Rows)
		}
	}
	if o.Rows != p.Rows || o.Cols != x.Cols {
		return errf(".out", "%v of %d columns writes %dx%d in a pass of %d rows", st.Op, x.Cols, o.Rows, o.Cols, p.Rows)
	}
	if st.HeadDim < 1 || int64(dt.Cols)*int64(st.HeadDim) != int64(x.Cols) {
		return errf(".head_dim", "%d heads of %d do not make %d columns", dt.Cols, st.HeadDim, x.Cols)
	}
	if b.Cols != c.Cols {
		return errf(".in[3]", "B of %d and C of %d columns", b.Cols, c.Cols)
	}
	if st.Slot < 0 || st.Slot >= len(p.State) {
		return errf(".slot", "%d is outside the %d state slots", st.Slot, len(p.State))
	}
	n := p.State[st.Slot] / x.Cols
	if n < 1 || n*x.Cols != p.State[st.Slot] || b.Cols%n != 0 || dt.Cols%(b.Cols/n) != 0 {
		return errf(".slot", "state slot %d of %d floats is no [%d heads, %d, N] state for B of %d columns",
			st.Slot, p.State[st.Slot], dt.Cols, st.HeadDim, b.Cols)
	}
	return nil
}
