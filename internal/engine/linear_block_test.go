package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkLinearRows is a float32 linear of a vision encoder's shape
// (1024 rows of 768 or 3072 by 768 or 3072 weights) on one thread, with
// the input taken in cache-sized blocks of rows and whole.
func BenchmarkLinearRows(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, sh := range []struct{ T, K, N int }{{1024, 768, 768}, {1024, 768, 3072}, {1024, 3072, 768}, {32, 2048, 2048}} {
		x, w := make([]float32, sh.T*sh.K), make([]float32, sh.N*sh.K)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		dst := make([]float32, sh.T*sh.N)
		for _, block := range []int{linearBlockBytes, 1 << 40} {
			name := fmt.Sprintf("%dx%dx%d/blocks", sh.T, sh.K, sh.N)
			if block > linearBlockBytes {
				name = fmt.Sprintf("%dx%dx%d/whole", sh.T, sh.K, sh.N)
			}
			b.Run(name, func(b *testing.B) {
				old := linearBlockBytes
				linearBlockBytes = block
				defer func() { linearBlockBytes = old }()
				l := linearJob{dst: dst, x: x, w: w, T: sh.T, K: sh.K, N: sh.N}
				for range b.N {
					l.run(0, 0, sh.N)
				}
				b.ReportMetric(2*float64(sh.T*sh.K*sh.N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
