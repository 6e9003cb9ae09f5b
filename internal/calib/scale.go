package calib

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
)

// Methods selects the scalings Scale applies.
type Methods struct {
	// SmoothAlpha > 0 applies SmoothQuant migration with that alpha.
	SmoothAlpha float64
	// AWQ searches activation-aware scales (after smoothing, if both).
	AWQ     bool
	AWQGrid int
}

// GroupReport says what happened to the linears that read one input.
type GroupReport struct {
	Weights []string `json:"weights"`
	// Into names where 1/s went: an RMSNorm gain or a linear's rows.
	Into    string  `json:"into,omitempty"`
	Skipped string  `json:"skipped,omitempty"`
	Alpha   float64 `json:"awq_alpha,omitempty"`
	// ErrRatio is AWQ's output error over plain rounding's on the sample.
	ErrRatio float64 `json:"awq_err_ratio,omitempty"`
}

// Scale applies the scalings of meth to m's weights, input by input,
// keeping m exactly equivalent in float (up to rounding), and updates the
// statistics to those of the scaled inputs. schemeOf gives the scheme each
// weight will be quantized with (AWQ measures its error with it).
func Scale(m *arch.Model, st *Stats, schemeOf func(name string) quant.Scheme, meth Methods) ([]GroupReport, error) {
	if meth.SmoothAlpha <= 0 && !meth.AWQ {
		return nil, nil
	}
	g := st.Graph
	consumers := make([][]int, len(g.Nodes))
	embed := map[string]bool{}
	uses := map[string]int{}
	for i, n := range g.Nodes {
		for _, in := range n.In {
			consumers[in] = append(consumers[in], i)
		}
		if n.Op == op.Embed {
			embed[n.Weight] = true
		}
		if n.Weight != "" {
			uses[n.Weight]++
		}
	}
	var reps []GroupReport
	for _, in := range st.Inputs {
		rep := GroupReport{Weights: in.Weights}
		fold, into, why := folder(g, m, in, consumers, embed, uses)
		if fold == nil {
			rep.Skipped = why
			reps = append(reps, rep)
			continue
		}
		rep.Into = into
		k := in.Cols
		ws := make([]quant.Weight, len(in.Weights))
		for i, name := range in.Weights {
			w := m.Weights[name]
			ws[i] = quant.Weight{W: w, Rows: len(w) / k, Scheme: schemeOf(name)}
		}
		apply := func(s []float32) {
			for _, w := range ws {
				for j := range w.W {
					w.W[j] *= s[j%k]
				}
			}
			fold(s)
			in.Scale(s)
		}
		if meth.SmoothAlpha > 0 {
			s, err := quant.SmoothScales(ws, k, in.MaxAbs, meth.SmoothAlpha)
			if err != nil {
				return nil, fmt.Errorf("calib: %v: %w", in.Weights, err)
			}
			apply(s)
		}
		if meth.AWQ {
			if hasF16(ws) {
				rep.Skipped = "kept in f16"
				reps = append(reps, rep)
				continue
			}
			r, err := quant.AWQScales(ws, k, in.MeanAbs(), in.Sample, quant.AWQOptions{Grid: meth.AWQGrid})
			if err != nil {
				return nil, fmt.Errorf("calib: %v: %w", in.Weights, err)
			}
			rep.Alpha = r.Alpha
			if r.BaseErr > 0 {
				rep.ErrRatio = r.Err / r.BaseErr
			}
			if r.Alpha > 0 {
				apply(r.Scales)
			}
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

func hasF16(ws []quant.Weight) bool {
	for _, w := range ws {
		if w.Scheme.Kind == quant.KindF16 {
			return true
		}
	}
	return false
}

// folder returns the function that divides the input's producer by s
// (channel j by s[j]), and its name; or nil and why it cannot.
func folder(g *graph.Graph, m *arch.Model, in *Input, consumers [][]int, embed map[string]bool, uses map[string]int) (func([]float32), string, string) {
	for _, c := range consumers[in.Node] {
		if g.Nodes[c].Op != op.Linear {
			return nil, "", fmt.Sprintf("its input also feeds a %v node", g.Nodes[c].Op)
		}
	}
	for _, w := range in.Weights {
		if embed[w] {
			return nil, "", "a weight is also the embedding table"
		}
		if uses[w] > 1 {
			return nil, "", "a weight is used twice"
		}
	}
	p := g.Nodes[in.Node]
	switch p.Op {
	case op.RMSNorm:
		if uses[p.Weight] > 1 {
			return nil, "", "the norm gain is shared"
		}
		gain, off := m.Weights[p.Weight], p.Offset
		return func(s []float32) {
			for j := range gain {
				gain[j] = (gain[j]+off)/s[j] - off
			}
		}, p.Weight, ""
	case op.Mul:
		for _, id := range p.In {
			l := g.Nodes[id]
			if l.Op != op.Linear || len(consumers[id]) != 1 || uses[l.Weight] > 1 || embed[l.Weight] {
				continue
			}
			w := m.Weights[l.Weight]
			var b []float32
			if l.Bias != "" {
				b = m.Weights[l.Bias]
			}
			k := len(w) / l.Cols
			return func(s []float32) {
				for r := range l.Cols {
					for j := r * k; j < (r+1)*k; j++ {
						w[j] /= s[r]
					}
					if b != nil {
						b[r] /= s[r]
					}
				}
			}, l.Weight, ""
		}
		return nil, "", "neither factor of the product is a linear of its own"
	}
	return nil, "", fmt.Sprintf("its producer is a %v node", p.Op)
}
