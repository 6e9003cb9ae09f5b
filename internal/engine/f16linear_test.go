package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// TestF16Linear: a linear over binary16 weights (layout f16-rows)
// matches the in-order float32 reference over the widened weights within
// 1e-5 of Σ|w*x| + |b| per output (float32 sums in the row kernel's
// order), every column split, with and without bias; qweight.row widens
// the rows exactly.
func TestF16Linear(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, shape := range [][3]int{{1, 1, 1}, {1, 64, 40}, {3, 7, 5}, {5, 172, 9}, {16, 96, 33}, {300, 33, 3}} {
		T, K, N := shape[0], shape[1], shape[2]
		w32, x, b := randFloats(r, N*K, 0.5), randFloats(r, T*K, 2), randFloats(r, N, 1)
		h, w := make([]uint16, N*K), make([]float32, N*K)
		for i, v := range w32 {
			h[i] = tensor.F32ToF16(v)
			w[i] = tensor.F16ToF32(h[i])
		}
		qw := &qweight{kind: plan.LayoutF16, N: N, K: K, h: h}
		weightBindings[plan.LayoutF16].bindPlain(qw)
		for _, bias := range [][]float32{nil, b} {
			want := make([]float32, T*N)
			linearInOrder(want, x, w, bias, T, K, N)
			got := make([]float32, T*N)
			job := linearJob{dst: got, x: x, qw: qw, b: bias, T: T, K: K, N: N}
			for j := 0; j < N; j += 4 {
				job.run(0, j, min(j+4, N))
			}
			for tt := range T {
				for j := range N {
					var mag float64
					for k := range K {
						mag += math.Abs(float64(w[j*K+k] * x[tt*K+k]))
					}
					if bias != nil {
						mag += math.Abs(float64(bias[j]))
					}
					if d := math.Abs(float64(got[tt*N+j] - want[tt*N+j])); !(d <= 1e-5*mag) || mag == 0 {
						t.Fatalf("[%d,%d]x%d: dst[%d][%d] = %g, want %g", N, K, T, tt, j, got[tt*N+j], want[tt*N+j])
					}
				}
			}
		}
		row := make([]float32, K)
		for n := range N {
			qw.row(row, n)
			for k, v := range row {
				if v != w[n*K+k] {
					t.Fatalf("row %d [%d] = %g, want %g", n, k, v, w[n*K+k])
				}
			}
		}
	}
}
