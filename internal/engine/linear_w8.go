package engine

import (
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// w8 weights: packed (w8-rows-p) on kernel.W8's 8-bit products, unpacked
// (w8-rows) dequantized in the loop, w[n][k] = float32(q[n][k]) * s[n].
func init() {
	registerBinding(&weightBinding{
		kind: plan.LayoutW8,
		packed: func(w *qweight, p plan.Parts, data []byte) error {
			q := &kernel.W8{N: w.N, K: w.K, U: data[:w.N*w.K], Scales: floats(data[p.Scales : p.Scales+4*p.NScales])}
			if err := q.Check(); err != nil {
				return err
			}
			w.matMul, w.rowOf, w.forW8 = q.MatMul, q.Row, true
			return nil
		},
		plain: viewBlockParts,
		bindPlain: func(w *qweight) {
			w.runPlain = runW8Plain
			w.rowOf = func(dst []float32, n int) {
				s := w.scales[n]
				for k, v := range w.q[n*w.K : (n+1)*w.K] {
					dst[k] = float32(v) * s
				}
			}
		},
	})
}

// runW8Plain is linearJob.run over an unpacked w8 weight: each weight is
// dequantized in the loop by the rule of its row (explicit float32
// conversions keep it from fusing with the accumulation), so the sums
// equal those of the float32 kernel over the dequantized matrix, in the
// same k order.
func runW8Plain(l *linearJob, j0, j1 int) {
	w, K, N := l.qw, l.K, l.N
	for t := 0; t < l.T; t++ {
		xr := l.x[t*K : (t+1)*K]
		for j := j0; j < j1; j++ {
			qr := w.q[j*K : (j+1)*K]
			var s float32
			sc := w.scales[j]
			for k, xv := range xr {
				s += float32(float32(qr[k])*sc) * xv
			}
			if l.b != nil {
				s += l.b[j]
			}
			l.dst[t*N+j] = s
		}
	}
}
