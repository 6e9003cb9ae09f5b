package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// ssmScanPlan is a valid two-row plan: embed [2,16] -> columns x (2 heads
// of 4), dt (2), B and C (one group of state 2) -> ssm_scan (slot 0,
// 2*4*2 floats) -> last_row.
func ssmScanPlan() *Plan {
	return &Plan{Version: Version, Rows: 2, Arena: 84, KV: KV{Ctx: 8}, State: []int{16},
		Buffers: []Buffer{{2, 16, 0}, {2, 8, 32}, {2, 2, 48}, {2, 2, 52}, {2, 2, 56}, {2, 8, 60}, {1, 8, 76}},
		Steps: []Step{
			{Op: op.Embed, Out: 0, Weights: []string{"e"}},
			{Op: op.Columns, In: []int{0}, Out: 1, Lo: 0, Hi: 8},
			{Op: op.Columns, In: []int{0}, Out: 2, Lo: 8, Hi: 10},
			{Op: op.Columns, In: []int{0}, Out: 3, Lo: 10, Hi: 12},
			{Op: op.Columns, In: []int{0}, Out: 4, Lo: 12, Hi: 14},
			{Op: op.SSMScan, In: []int{1, 2, 3, 4}, Out: 5, Slot: 0, HeadDim: 4, Weights: []string{"a", "d", "dtb"}},
			{Op: op.SelectRows, In: []int{5}, Out: 6},
		},
		Output: 6}
}

// TestValidateSSMScan checks the valid plan and weight shapes, and that a
// broken head size, slot, input or weight is refused with an error naming
// it.
func TestValidateSSMScan(t *testing.T) {
	shapes := map[string][]int64{"e": {10, 16}, "a": {2}, "d": {2}, "dtb": {2}}
	lookup := func(n string) ([]int64, bool) { s, ok := shapes[n]; return s, ok }
	p := ssmScanPlan()
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
		{"head size 3", func(p *Plan) { p.Steps[5].HeadDim = 3 }, "steps[5].head_dim"},
		{"slot of another size", func(p *Plan) { p.State[0] = 12 }, "steps[5].slot"},
		{"C narrower than B", func(p *Plan) { p.Steps[5].In[3] = 1 }, "steps[5].in[3]"},
		{"two weights", func(p *Plan) { p.Steps[5].Weights = p.Steps[5].Weights[:2] }, "steps[5].weights"},
		{"slot shared", func(p *Plan) { p.Steps[5].Slot = 1 }, "steps[5].slot"},
	} {
		p := ssmScanPlan()
		c.edit(p)
		err := p.Validate()
		var pe *Error
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, c.field) {
			t.Errorf("%s: error %v, want one at %s", c.name, err, c.field)
		}
	}
	shapes["a"] = []int64{2, 1}
	if err := p.CheckWeights(lookup); err == nil || !strings.Contains(err.Error(), "[2]") {
		t.Errorf("a [2 1] A: %v, want an error asking for [2]", err)
	}
}

// TestCausalConvBias checks that a causal_conv step takes an optional
// bias of one value per column, and refuses one of another shape.
func TestCausalConvBias(t *testing.T) {
	shapes := map[string][]int64{"e": {10, 4}, "w": {4, 3}, "b": {4}}
	lookup := func(n string) ([]int64, bool) { s, ok := shapes[n]; return s, ok }
	p := causalConvPlan()
	p.Steps[1].Weights = []string{"w", "b"}
	if err := p.Validate(); err != nil {
		t.Fatalf("with a bias: %v", err)
	}
	if err := p.CheckWeights(lookup); err != nil {
		t.Fatalf("with a bias: %v", err)
	}
	shapes["b"] = []int64{3}
	if err := p.CheckWeights(lookup); err == nil || !strings.Contains(err.Error(), "[4]") {
		t.Errorf("a bias of 3: %v, want an error asking for [4]", err)
	}
	p.Steps[1].Weights = []string{"w", "b", "c"}
	if err := p.Validate(); err == nil {
		t.Error("three weights: accepted")
	}
}
