package onnxexport

import (
	"math"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/qdq"
)

// OutputRanges returns the [min, max] of every linear's output before its
// bias (x·Wᵀ) over the calibration sequence of qdq.Observe (ids nil: the
// greedy one), by weight name: the ranges of QDQ.Outputs.
func OutputRanges(m *arch.Model, ids []int, ctx int) (map[string]qdq.Range, error) {
	out := map[string]qdq.Range{}
	err := qdq.Observe(m, ids, ctx, func(n *graph.Node, slot int, x []float32, rows, cols int) {
		if n.Op != op.Linear || slot != 0 {
			return
		}
		w := m.Weights[n.Weight]
		N := n.Cols
		if len(w) != N*cols {
			return
		}
		r, ok := out[n.Weight]
		if !ok {
			r = qdq.Range{Min: float32(math.Inf(1)), Max: float32(math.Inf(-1))}
		}
		for t := 0; t < rows; t++ {
			xr := x[t*cols : (t+1)*cols]
			for j := 0; j < N; j++ {
				var s float32
				for k, v := range w[j*cols : (j+1)*cols] {
					s += v * xr[k]
				}
				r.Min, r.Max = min(r.Min, s), max(r.Max, s)
			}
		}
		out[n.Weight] = r
	})
	return out, err
}
