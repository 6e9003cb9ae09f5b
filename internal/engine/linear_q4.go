package engine

import (
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// q4 weights: packed (q4-gG-sym-p, q4-gG-asym-p) on kernel.Q4's 4-bit
// products, unpacked dequantized in the loop,
// w[n][k] = (float32(q[n][k]) - z[n][k/G]) * s[n][k/G] (z = 0 when sym).
func init() {
	registerBinding(&weightBinding{
		kind: plan.LayoutQ4,
		packed: func(w *qweight, p plan.Parts, data []byte) error {
			q := &kernel.Q4{N: w.N, K: w.K, Nib: data[:w.N*w.K/2], Scales: floats(data[p.Scales : p.Scales+4*p.NScales])}
			if p.Zeros >= 0 {
				q.Zeros = floats(data[p.Zeros : p.Zeros+4*p.NScales])
			}
			return bindQ4(w, q)
		},
		plain: viewBlockParts,
		bindPlain: func(w *qweight) {
			w.runPlain = runQ4Plain
			w.rowOf = func(dst []float32, n int) {
				for k, v := range w.q[n*w.K : (n+1)*w.K] {
					g := n*w.nb + k/w.block
					var z float32
					if w.zeros != nil {
						z = w.zeros[g]
					}
					dst[k] = (float32(v) - z) * w.scales[g]
				}
			}
		},
	})
}

// runQ4Plain is linearJob.run over an unpacked q4 weight, each weight
// dequantized in the loop as runW8Plain does.
func runQ4Plain(l *linearJob, j0, j1 int) {
	w, K, N := l.qw, l.K, l.N
	for t := 0; t < l.T; t++ {
		xr := l.x[t*K : (t+1)*K]
		for j := j0; j < j1; j++ {
			qr := w.q[j*K : (j+1)*K]
			var s float32
			for b := 0; b < w.nb; b++ {
				g := j*w.nb + b
				sc := w.scales[g]
				var z float32
				if w.zeros != nil {
					z = w.zeros[g]
				}
				k1 := min((b+1)*w.block, K)
				for k := b * w.block; k < k1; k++ {
					s += float32((float32(qr[k])-z)*sc) * xr[k]
				}
			}
			if l.b != nil {
				s += l.b[j]
			}
			l.dst[t*N+j] = s
		}
	}
}
