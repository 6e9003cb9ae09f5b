package engine

import (
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// lpbq5 weights (packed only, lpbq5-p): kernel.Q5's 5-bit products,
// which read the int8 activations alone. An lpbq5 weight too narrow to
// pack is stored lpbq-b32 and bound as lpbq.
func init() {
	registerBinding(&weightBinding{
		kind: plan.LayoutLPBQ5,
		packed: func(w *qweight, p plan.Parts, data []byte) error {
			q := &kernel.Q5{N: w.N, K: w.K, Nib: data[:p.Sub], Hi: data[p.Sub:p.Codes],
				Codes: data[p.Codes : p.Codes+int64(w.N*w.K/kernel.QK)], Scales: floats(data[p.Scales:p.Size])}
			if err := q.Check(); err != nil {
				return err
			}
			w.matMul, w.rowOf = q.MatMul, q.Row
			return nil
		},
	})
}
