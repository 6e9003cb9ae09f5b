package qdq

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
)

// Session runs a model through the graph interpreter and returns every
// row's logits, with the simulation of a Sim applied (none when nil).
type Session struct {
	in    *graph.Interpreter
	st    *graph.State
	vocab int
}

// NewSession builds the all-logits graph of m for ctx positions.
func NewSession(m *arch.Model, ctx, threads int, sim *Sim) (*Session, error) {
	if ctx < 1 || ctx > m.Config.Context {
		return nil, fmt.Errorf("qdq: context %d is outside 1..%d", ctx, m.Config.Context)
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	weights := m.Weights
	if sim != nil && len(sim.Outliers) > 0 {
		if g, err = graph.SplitOutliers(g, sim.Outliers); err != nil {
			return nil, fmt.Errorf("qdq: %w", err)
		}
		weights = make(graph.Weights, len(m.Weights)+len(sim.Outliers))
		for k, v := range m.Weights {
			weights[k] = v
		}
		for name, idx := range sim.Outliers {
			shape := g.Weights[name]
			if len(weights[name]) != shape[0]*shape[1] {
				return nil, fmt.Errorf("qdq: weight %s has %d values, not %v", name, len(weights[name]), shape)
			}
			weights[name], weights[name+graph.OutlierSuffix] = graph.TakeOutliers(weights[name], shape[0], shape[1], idx)
		}
	}
	in, err := graph.NewInterpreter(g, weights, threads)
	if err != nil {
		return nil, err
	}
	if sim != nil {
		if err := sim.check(g); err != nil {
			return nil, err
		}
		in.SetInputHook(sim.hook)
	}
	return &Session{in: in, st: in.NewState(ctx), vocab: g.Nodes[g.Output].Cols}, nil
}

// Reset empties the cache.
func (s *Session) Reset() { s.st.Reset() }

// Context returns the positions the session holds.
func (s *Session) Context() int { return s.st.Ctx }

// Logits runs ids at the next positions and returns one row of logits per id.
func (s *Session) Logits(ids []int) ([][]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("qdq: no tokens")
	}
	out, rows, err := s.in.Run(s.st, ids)
	if err != nil {
		return nil, err
	}
	if rows != len(ids) {
		return nil, fmt.Errorf("qdq: %d rows of logits for %d tokens", rows, len(ids))
	}
	cols := len(out) / rows
	res := make([][]float32, rows)
	for i := range res {
		res[i] = out[i*cols : (i+1)*cols : (i+1)*cols]
	}
	return res, nil
}
