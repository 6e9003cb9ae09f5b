package plan

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// maxState bounds the recurrent state slots of a plan.
const maxState = 1 << 20

// validateState checks the count and sizes of the recurrent state slots.
func (p *Plan) validateState() error {
	if len(p.State) > maxState {
		return errf("state", "%d slots is more than %d", len(p.State), maxState)
	}
	for i, n := range p.State {
		if n < 1 || n > maxKV {
			return errf(fmt.Sprintf("state[%d]", i), "%d floats is outside [1, %d]", n, maxKV)
		}
	}
	return nil
}

// checkRecurrent checks a token_shift or wkv7 step: its slot exists and has
// the size the op needs, and its buffers are full passes of one width.
func (p *Plan) checkRecurrent(st *Step, in []Buffer, o Buffer) *Error {
	for i, b := range in {
		if b.Rows != p.Rows || b.Cols != o.Cols {
			return errf(fmt.Sprintf(".in[%d]", i), "%v of %dx%d writes %dx%d in a pass of %d rows",
				st.Op, b.Rows, b.Cols, o.Rows, o.Cols, p.Rows)
		}
	}
	if o.Rows != p.Rows {
		return errf(".out", "%v writes %d rows in a pass of %d", st.Op, o.Rows, p.Rows)
	}
	if st.Slot < 0 || st.Slot >= len(p.State) {
		return errf(".slot", "%d is outside the %d state slots", st.Slot, len(p.State))
	}
	want := int64(o.Cols)
	if st.Op == op.WKV7 {
		if st.HeadDim < 1 || o.Cols%st.HeadDim != 0 {
			return errf(".head_dim", "%d does not divide %d columns", st.HeadDim, o.Cols)
		}
		if !finite32(st.Eps) || st.Eps < 0 {
			return errf(".eps", "%v must be finite and >= 0", st.Eps)
		}
		want *= int64(st.HeadDim)
	}
	if int64(p.State[st.Slot]) != want {
		return errf(".slot", "state slot %d holds %d floats, %v of %d columns needs %d",
			st.Slot, p.State[st.Slot], st.Op, o.Cols, want)
	}
	return nil
}

// checkStateUse requires every state slot to belong to exactly one step.
func (p *Plan) checkStateUse() error {
	owner := make([]int, len(p.State))
	for i := range owner {
		owner[i] = -1
	}
	for s, st := range p.Steps {
		if !st.Op.Stateful() {
			continue
		}
		if owner[st.Slot] >= 0 {
			return errf(fmt.Sprintf("steps[%d].slot", s), "state slot %d is also used by step %d", st.Slot, owner[st.Slot])
		}
		owner[st.Slot] = s
	}
	for i, s := range owner {
		if s < 0 {
			return errf(fmt.Sprintf("state[%d]", i), "no step uses it")
		}
	}
	return nil
}
