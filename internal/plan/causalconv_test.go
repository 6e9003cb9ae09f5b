package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// causalConvPlan is a valid two-row plan: embed [2,4] -> causal_conv of
// kernel 3 (slot 0, 2 rows of 4 floats) -> last_row.
func causalConvPlan() *Plan {
	return &Plan{Version: Version, Rows: 2, Arena: 32, KV: KV{Ctx: 8}, State: []int{8},
		Buffers: []Buffer{{2, 4, 0}, {2, 4, 8}, {1, 4, 16}},
		Steps: []Step{
			{Op: op.Embed, Out: 0, Weights: []string{"e"}},
			{Op: op.CausalConv, In: []int{0}, Out: 1, Slot: 0, HeadDim: 3, Weights: []string{"w"}},
			{Op: op.SelectRows, In: []int{1}, Out: 2},
		},
		Output: 2}
}

// TestValidateShortConv checks the valid plan and weight shapes, and that
// a broken kernel, slot or weight is refused with an error naming it.
func TestValidateCausalConv(t *testing.T) {
	shapes := map[string][]int64{"e": {10, 4}, "w": {4, 3}}
	lookup := func(n string) ([]int64, bool) { s, ok := shapes[n]; return s, ok }
	p := causalConvPlan()
	if err := p.Validate(); err != nil {
		t.Fatalf("valid plan: %v", err)
	}
	if err := p.CheckWeights(lookup); err != nil {
		t.Fatalf("valid weights: %v", err)
	}
	for _, c := range []struct {
		name  string
		edit  func(p *Plan)
		field string
	}{
		{"kernel 1", func(p *Plan) { p.Steps[1].HeadDim = 1 }, "steps[1].head_dim"},
		{"slot for another kernel", func(p *Plan) { p.Steps[1].HeadDim = 4 }, "steps[1].slot"},
		{"no weight", func(p *Plan) { p.Steps[1].Weights = nil }, "steps[1].weights"},
		{"slot shared", func(p *Plan) { p.Steps[1].Slot = 1 }, "steps[1].slot"},
	} {
		p := causalConvPlan()
		c.edit(p)
		err := p.Validate()
		var pe *Error
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, c.field) {
			t.Errorf("%s: error %v, want one at %s", c.name, err, c.field)
		}
	}
	shapes["w"] = []int64{4, 1, 3}
	if err := p.CheckWeights(lookup); err == nil || !strings.Contains(err.Error(), "[4, 3]") {
		t.Errorf("a [4 1 3] kernel: %v, want an error asking for [4, 3]", err)
	}
}
