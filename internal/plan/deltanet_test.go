package plan_test

import (
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// qwen35Plan lowers a small Qwen3.5 graph (DeltaNet layers and a gated
// attention layer) for passes of 4 rows.
func qwen35Plan(t *testing.T) *plan.Plan {
	p, _ := qwen35PlanShapes(t)
	return p
}

// qwen35PlanShapes is qwen35Plan with the shapes of the graph's weights.
func qwen35PlanShapes(t *testing.T) (*plan.Plan, map[string][]int) {
	t.Helper()
	c := arch.Config{Family: "qwen35", Hidden: 32, FFN: 48, Layers: 4, Heads: 2, KVHeads: 1, HeadDim: 16,
		Vocab: 50, Context: 64, NormEps: 1e-6, RopeTheta: 1e7, RotaryDim: 4, Source: "gguf",
		DeltaNet: &arch.DeltaNetConfig{KeyHeads: 1, ValueHeads: 2, KeyDim: 8, ValueDim: 8, ConvKernel: 4,
			FullLayers: []int{3}, AttnGate: true}}
	g, err := arch.Build(&c, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := compile.Lower(g, 4, 16)
	if err != nil {
		t.Fatal(err)
	}
	return p, g.Weights
}

// stepOf returns the index of the first step of op o.
func stepOf(t *testing.T, p *plan.Plan, o op.Op, grouped bool) int {
	for i, st := range p.Steps {
		if st.Op == o && (!grouped || st.Group > 0) {
			return i
		}
	}
	t.Fatalf("no %v step", o)
	return -1
}

// TestDeltaNetStepsRefused breaks the causal_conv, gated_delta and grouped
// columns steps of a lowered Qwen3.5 plan one way at a time and checks
// that validation names the broken part.
func TestDeltaNetStepsRefused(t *testing.T) {
	if err := qwen35Plan(t).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		mut        func(t *testing.T, p *plan.Plan)
	}{
		{"conv kernel", "head_dim", func(t *testing.T, p *plan.Plan) { p.Steps[stepOf(t, p, op.CausalConv, false)].HeadDim = 1 }},
		{"conv state", ".slot", func(t *testing.T, p *plan.Plan) { p.Steps[stepOf(t, p, op.CausalConv, false)].HeadDim = 3 }},
		{"delta sizes missing", ".delta", func(t *testing.T, p *plan.Plan) { p.Steps[stepOf(t, p, op.GatedDelta, false)].Delta = nil }},
		{"delta heads", ".delta", func(t *testing.T, p *plan.Plan) {
			d := *p.Steps[stepOf(t, p, op.GatedDelta, false)].Delta
			d.ValueHeads = 0
			p.Steps[stepOf(t, p, op.GatedDelta, false)].Delta = &d
		}},
		{"delta widths", ".in", func(t *testing.T, p *plan.Plan) {
			d := *p.Steps[stepOf(t, p, op.GatedDelta, false)].Delta
			d.KeyDim = 4
			p.Steps[stepOf(t, p, op.GatedDelta, false)].Delta = &d
		}},
		{"shared slot", ".slot", func(t *testing.T, p *plan.Plan) {
			p.Steps[stepOf(t, p, op.GatedDelta, false)].Slot = p.Steps[stepOf(t, p, op.CausalConv, false)].Slot
		}},
		{"column group", ".lo", func(t *testing.T, p *plan.Plan) { p.Steps[stepOf(t, p, op.Columns, true)].Group = 24 }},
	} {
		p := qwen35Plan(t)
		c.mut(t, p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// TestDeltaNetWeightsRefused checks the shapes CheckWeights wants of the
// conv kernel and the gated_delta gates.
func TestDeltaNetWeightsRefused(t *testing.T) {
	p, shapes := qwen35PlanShapes(t)
	shape := func(bad string) func(string) ([]int64, bool) {
		return func(name string) ([]int64, bool) {
			s, ok := shapes[name]
			if name == bad {
				return []int64{7}, true
			}
			out := make([]int64, len(s))
			for i, d := range s {
				out[i] = int64(d)
			}
			return out, ok
		}
	}
	if err := p.CheckWeights(shape("")); err != nil {
		t.Fatal(err)
	}
	conv := p.Steps[stepOf(t, p, op.CausalConv, false)].Weights[0]
	gate := p.Steps[stepOf(t, p, op.GatedDelta, false)].Weights[0]
	for _, bad := range []string{conv, gate} {
		if err := p.CheckWeights(shape(bad)); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s of shape [7]: got %v", bad, err)
		}
	}
}
