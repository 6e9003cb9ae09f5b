package engine

import (
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// lpbq weights: packed (lpbq-bB-p) on kernel.Q4's 4-bit products with
// block codes, unpacked (lpbq-bB) dequantized in the loop,
// w[n][k] = float32(int32(q[n][k]) * int32(codes[n][k/B])) * S[n].
func init() {
	registerBinding(&weightBinding{
		kind: plan.LayoutLPBQ,
		packed: func(w *qweight, p plan.Parts, data []byte) error {
			return bindQ4(w, &kernel.Q4{N: w.N, K: w.K, Nib: data[:w.N*w.K/2],
				Codes:  data[p.Codes : p.Codes+int64(w.N*w.K/kernel.QK)],
				Scales: floats(data[p.Scales : p.Scales+4*p.NScales])})
		},
		plain: viewBlockParts,
		bindPlain: func(w *qweight) {
			w.runPlain = runLPBQPlain
			w.rowOf = func(dst []float32, n int) {
				s := w.scales[n]
				for k, v := range w.q[n*w.K : (n+1)*w.K] {
					dst[k] = float32(int32(v)*int32(w.codes[n*w.nb+k/w.block])) * s
				}
			}
		},
	})
}

// runLPBQPlain is linearJob.run over an unpacked lpbq weight, each
// weight dequantized in the loop as runW8Plain does.
func runLPBQPlain(l *linearJob, j0, j1 int) {
	w, K, N := l.qw, l.K, l.N
	for t := 0; t < l.T; t++ {
		xr := l.x[t*K : (t+1)*K]
		for j := j0; j < j1; j++ {
			qr := w.q[j*K : (j+1)*K]
			var s float32
			sc := w.scales[j]
			for b := 0; b < w.nb; b++ {
				code := int32(w.codes[j*w.nb+b])
				k1 := min((b+1)*w.block, K)
				for k := b * w.block; k < k1; k++ {
					s += float32(float32(int32(qr[k])*code)*sc) * xr[k]
				}
			}
			if l.b != nil {
				s += l.b[j]
			}
			l.dst[t*N+j] = s
		}
	}
}
