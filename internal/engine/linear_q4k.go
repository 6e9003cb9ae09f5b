package engine

import (
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// q4k weights (packed only, q4k-p): kernel.Q4 in its K4 form, ggml's
// Q4_K super-blocks read as they are by the 4-bit products.
func init() {
	registerBinding(&weightBinding{
		kind: plan.LayoutQ4K,
		packed: func(w *qweight, p plan.Parts, data []byte) error {
			return bindQ4(w, &kernel.Q4{N: w.N, K: w.K, Nib: data[:w.N*w.K/2], K4: data[p.Scales:p.Size]})
		},
	})
}
