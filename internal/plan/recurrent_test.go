package plan

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// recurrentPlan is a valid two-row plan: embed [2,4] -> token_shift (slot
// 0, 4 floats) -> wkv7 of 2 heads of 2 over five inputs (slot 1, 2*2*2
// floats) -> last_row.
func recurrentPlan() *Plan {
	return &Plan{Version: Version, Rows: 2, Arena: 32, KV: KV{Ctx: 8}, State: []int{4, 8},
		Buffers: []Buffer{{2, 4, 0}, {2, 4, 8}, {2, 4, 16}, {1, 4, 24}},
		Steps: []Step{
			{Op: op.Embed, Out: 0, Weights: []string{"e"}},
			{Op: op.TokenShift, In: []int{0}, Out: 1, Slot: 0},
			{Op: op.WKV7, In: []int{0, 1, 0, 1, 0}, Out: 2, Slot: 1, HeadDim: 2, Eps: 64e-5,
				Weights: []string{"kk", "ka", "rk", "gw", "gb"}},
			{Op: op.SelectRows, In: []int{2}, Out: 3},
		},
		Output: 3}
}

// TestValidateRecurrent checks that the valid plan passes, survives a JSON
// round trip, and that each broken state or recurrent-step field is
// refused with an error naming it.
func TestValidateRecurrent(t *testing.T) {
	p := recurrentPlan()
	if err := p.Validate(); err != nil {
		t.Fatalf("valid plan: %v", err)
	}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Decode(b)
	if err != nil || q.Steps[2].Slot != 1 || len(q.State) != 2 || q.Steps[1].Op != op.TokenShift {
		t.Fatalf("round trip: %v %+v", err, q)
	}
	for _, c := range []struct {
		name  string
		edit  func(p *Plan)
		field string
	}{
		{"slot out of range", func(p *Plan) { p.Steps[1].Slot = 2 }, "steps[1].slot"},
		{"negative slot", func(p *Plan) { p.Steps[2].Slot = -1 }, "steps[2].slot"},
		{"shift slot of the wrong size", func(p *Plan) { p.State[0] = 5 }, "steps[1].slot"},
		{"wkv7 slot of the wrong size", func(p *Plan) { p.State[1] = 16 }, "steps[2].slot"},
		{"slot shared", func(p *Plan) { p.State[1] = 4; p.Steps[2].Slot = 0; p.Steps[2].HeadDim = 1 }, "steps[2].slot"},
		{"slot unused", func(p *Plan) { p.State = append(p.State, 3) }, "state[2]"},
		{"empty slot", func(p *Plan) { p.State[0] = 0 }, "state[0]"},
		{"negative slot size", func(p *Plan) { p.State[1] = -8 }, "state[1]"},
		{"head dim not dividing", func(p *Plan) { p.Steps[2].HeadDim = 3 }, "steps[2].head_dim"},
		{"head dim zero", func(p *Plan) { p.Steps[2].HeadDim = 0 }, "steps[2].head_dim"},
		{"eps NaN", func(p *Plan) { p.Steps[2].Eps = float32(math.NaN()) }, "steps[2].eps"},
		{"wkv7 four inputs", func(p *Plan) { p.Steps[2].In = p.Steps[2].In[:4] }, "steps[2].in"},
		{"wkv7 four weights", func(p *Plan) { p.Steps[2].Weights = p.Steps[2].Weights[:4] }, "steps[2].weights"},
		{"shift of a last row", func(p *Plan) {
			p.Buffers[0].Rows = 1
		}, "steps[0].out"},
		{"shift output of another width", func(p *Plan) {
			p.Buffers[1] = Buffer{2, 2, 8}
			p.State[0] = 2
		}, "steps[1].in[0]"},
		{"wkv7 writes one row", func(p *Plan) {
			p.Buffers[2].Rows = 1
			p.Buffers[3] = Buffer{1, 4, 24}
		}, "steps[2]"},
	} {
		p := recurrentPlan()
		c.edit(p)
		err := p.Validate()
		var pe *Error
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, c.field) {
			t.Errorf("%s: error %v, want one at %s", c.name, err, c.field)
		}
	}
}
