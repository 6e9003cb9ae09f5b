package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// sharedPlan is a valid two-row plan: embed [2,4] -> attention writing
// cache layer 0 -> shared_attention reading it -> scale by a one-value
// weight.
func sharedPlan() *Plan {
	a := Attn{Layer: 0, Heads: 2, KVHeads: 1, HeadDim: 2, Scale: 1, Window: 4}
	b := a
	return &Plan{Version: Version, Rows: 2, Arena: 32, KV: KV{Layers: 1, Cols: 2, Ctx: 8},
		Buffers: []Buffer{{2, 4, 0}, {2, 2, 8}, {2, 4, 12}, {2, 4, 20}, {2, 4, 0}},
		Steps: []Step{
			{Op: op.Embed, Out: 0, Weights: []string{"e"}},
			{Op: op.Columns, In: []int{0}, Out: 1, Lo: 0, Hi: 2},
			{Op: op.Attention, In: []int{0, 1, 1}, Out: 2, Attn: &a},
			{Op: op.SharedAttention, In: []int{2}, Out: 3, Attn: &b},
			{Op: op.Scale, In: []int{3}, Out: 4, Scale: 1, Weights: []string{"s"}},
		},
		Output: 4}
}

// TestValidateSharedAttention checks the valid plan and weights, and that
// a shared_attention step reading a layer no earlier step writes, or
// reading it with other head sizes, and a scale weight of more than one
// value are refused with an error naming the field.
func TestValidateSharedAttention(t *testing.T) {
	shapes := map[string][]int64{"e": {10, 4}, "s": {1}}
	lookup := func(n string) ([]int64, bool) { s, ok := shapes[n]; return s, ok }
	p := sharedPlan()
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
		{"another head size", func(p *Plan) { p.Steps[3].Attn.HeadDim, p.Steps[3].Attn.Heads = 4, 1 }, "steps[3].attn"},
		{"a layer out of range", func(p *Plan) { p.Steps[3].Attn.Layer = 1 }, "steps[3].attn.layer"},
		{"bidirectional", func(p *Plan) { p.Steps[3].Attn.Bidirectional = true }, "steps[3].attn"},
		{"two inputs", func(p *Plan) { p.Steps[3].In = []int{2, 2} }, "steps[3].in"},
		{"q of the wrong width", func(p *Plan) { p.Steps[3].Attn.Heads = 1 }, "steps[3].in"},
		{"no writer before it", func(p *Plan) {
			p.Steps[2], p.Steps[3] = p.Steps[3], p.Steps[2]
			p.Steps[2].In, p.Steps[2].Out = []int{0}, 2
			p.Steps[3].In, p.Steps[3].Out = []int{2, 1, 1}, 3
		}, "steps[2].attn.layer"},
	} {
		p := sharedPlan()
		c.edit(p)
		err := p.Validate()
		var pe *Error
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, c.field) {
			t.Errorf("%s: error %v, want one at %s", c.name, err, c.field)
		}
	}
	shapes["s"] = []int64{4}
	if err := p.CheckWeights(lookup); err == nil || !strings.Contains(err.Error(), "[1]") {
		t.Errorf("a scale weight of 4 values: %v, want an error asking for [1]", err)
	}
}
