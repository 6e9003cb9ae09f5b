package engine

import (
	"unsafe"

	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// f16 weights (f16-rows, unpacked only) run on the float32 linear's row
// kernels (linearJob.run, kernel.DotRowsF16W) and widen exactly.
func init() {
	registerBinding(&weightBinding{
		kind: plan.LayoutF16,
		plain: func(w *qweight, _ plan.Parts, data []byte) {
			w.h = unsafe.Slice((*uint16)(unsafe.Pointer(&data[0])), w.N*w.K)
		},
		bindPlain: func(w *qweight) {
			w.rowOf = func(dst []float32, n int) {
				for k, v := range w.h[n*w.K : (n+1)*w.K] {
					dst[k] = tensor.F16ToF32(v)
				}
			}
		},
	})
}
