package engine

import (
	"unsafe"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// q6k weights (packed only, q6k-p): kernel.Q6's 6-bit products, which
// read the int8 activations alone (no 4- or 8-bit records).
func init() {
	registerBinding(&weightBinding{
		kind: plan.LayoutQ6K,
		packed: func(w *qweight, p plan.Parts, data []byte) error {
			sub := data[p.Sub:p.Scales]
			q := &kernel.Q6{N: w.N, K: w.K, Nib: data[:p.Codes], Hi: data[p.Codes:p.Sub],
				Sub: unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(sub))), len(sub)), D: floats(data[p.Scales:p.Size])}
			if err := q.Check(); err != nil {
				return err
			}
			w.matMul, w.rowOf = q.MatMul, q.Row
			return nil
		},
	})
}
