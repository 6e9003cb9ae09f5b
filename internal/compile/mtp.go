package compile

import (
	"fmt"
	"maps"
	"slices"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// MTPInput is a multi-token-prediction draft head compiled beside the
// model (plan.MTP): its graph for generation (arch.MTPGenerationGraph),
// reading token ids and rows of the target's hidden state, and its
// weights in float32. Weights it shares with the model (the embedding
// table and the classifier) are stored once, the model's.
type MTPInput struct {
	Graph   *graph.Graph
	Weights graph.Weights
}

// LowerMTP returns the plan of a draft head's graph for passes of n rows:
// its rows input becomes a rows step (the target's hidden rows), and the
// rows its classifier reads are kept as the plan's Hidden.
func LowerMTP(g *graph.Graph, n, ctx int) (*plan.Plan, error) {
	p, err := lowerRows(g, n, ctx)
	if err != nil {
		return nil, err
	}
	if err := keepHidden(p); err != nil {
		return nil, fmt.Errorf("compile: the draft head: %w", err)
	}
	return p, nil
}

// keepHidden marks the rows p's classifier reads as its Hidden and lays
// the arena out again with them kept to the end of the pass. The
// classifier is the output linear, reading the select_rows step that
// picks among those rows.
func keepHidden(p *plan.Plan) error {
	var out, sel *plan.Step
	for i := range p.Steps {
		if p.Steps[i].Out == p.Output {
			out = &p.Steps[i]
		}
	}
	if out == nil || out.Op != op.Linear {
		return fmt.Errorf("the output is not a classifier (linear) step")
	}
	for i := range p.Steps {
		if p.Steps[i].Out == out.In[0] {
			sel = &p.Steps[i]
		}
	}
	if sel == nil || sel.Op != op.SelectRows {
		return fmt.Errorf("the classifier does not read a select_rows step")
	}
	h := sel.In[0]
	p.Hidden = &h
	if err := Assign(p); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("plan for AR length %d with hidden rows: %w", p.Rows, err)
	}
	return nil
}

// lowerMTP lowers the draft head for every AR length of lens, marks the
// hidden rows of the model's plans, and returns the head's plans, its
// manifest section and the weight shapes of both.
func lowerMTP(t *MTPInput, textPlans []*plan.Plan, lens []int, ctx int, shapes map[string][]int) ([]*plan.Plan, *plan.MTP, map[string][]int, error) {
	if t.Graph == nil {
		return nil, nil, nil, fmt.Errorf("compile: the draft head has no graph")
	}
	if _, err := graph.NewInterpreter(t.Graph, t.Weights, 1); err != nil {
		return nil, nil, nil, fmt.Errorf("compile: the draft head: %w", err)
	}
	for _, p := range textPlans {
		if err := keepHidden(p); err != nil {
			return nil, nil, nil, fmt.Errorf("compile: the model's plan for AR length %d: %w", p.Rows, err)
		}
	}
	shapes = maps.Clone(shapes)
	for n, s := range t.Graph.Weights {
		if have, ok := shapes[n]; ok {
			if !slices.Equal(have, s) {
				return nil, nil, nil, fmt.Errorf("compile: the draft head's weight %q has shape %v, the model's %v", n, s, have)
			}
			continue
		}
		shapes[n] = s
	}
	var plans []*plan.Plan
	m := &plan.MTP{}
	for _, n := range lens {
		p, err := LowerMTP(t.Graph, n, ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		plans = append(plans, p)
		m.Plans = append(m.Plans, plan.PlanRef{ARLen: n, Blob: plan.MTPBlobName(n)})
	}
	return plans, m, shapes, nil
}

// mtpSource serves the draft head's own weights and, for the rest, the
// model's.
type mtpSource struct {
	text WeightSource
	own  graph.Weights // the head's weights the model does not have
}

func (s mtpSource) Weight(name string) (Weight, error) {
	if v, ok := s.own[name]; ok {
		return Weight{Values: v}, nil
	}
	return s.text.Weight(name)
}
