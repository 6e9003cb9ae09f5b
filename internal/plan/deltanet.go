package plan

import "fmt"

// checkDeltaNet checks a gated_delta step: full passes, the widths its
// sizes give, and a state slot of the size it needs (causal_conv steps go
// through checkRecurrent).
func (p *Plan) checkDeltaNet(st *Step, in []Buffer, o Buffer) *Error {
	for i, b := range in {
		if b.Rows != p.Rows {
			return errf(fmt.Sprintf(".in[%d]", i), "%v reads %d rows in a pass of %d", st.Op, b.Rows, p.Rows)
		}
	}
	if o.Rows != p.Rows {
		return errf(".out", "%v writes %d rows in a pass of %d", st.Op, o.Rows, p.Rows)
	}
	if st.Slot < 0 || st.Slot >= len(p.State) {
		return errf(".slot", "%d is outside the %d state slots", st.Slot, len(p.State))
	}
	d := st.Delta
	if d == nil {
		return errf(".delta", "missing")
	}
	if err := d.Check(); err != nil {
		return errf(".delta", "%v", err)
	}
	if in[0].Cols != d.In() || in[1].Cols != d.ValueHeads || in[2].Cols != d.ValueHeads || o.Cols != d.Out() {
		return errf(".in", "gated_delta %+v on inputs of %d, %d, %d columns writing %d", *d,
			in[0].Cols, in[1].Cols, in[2].Cols, o.Cols)
	}
	want := int64(d.State())
	if int64(p.State[st.Slot]) != want {
		return errf(".slot", "state slot %d holds %d floats, %v needs %d", st.Slot, p.State[st.Slot], st.Op, want)
	}
	return nil
}

// deltaNetWeight returns the shape a gated_delta weight (A or dt_bias)
// needs when sh is not it, else "".
func deltaNetWeight(st *Step, sh []int64) string {
	if st.Delta == nil || len(sh) != 1 || sh[0] != int64(st.Delta.ValueHeads) {
		n := 0
		if st.Delta != nil {
			n = st.Delta.ValueHeads
		}
		return fmt.Sprintf("[%d]", n)
	}
	return ""
}
