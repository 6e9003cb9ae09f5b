//go:build !purego

package kernel

import (
	"math/rand/v2"
	"testing"
)

// TestW8Amd64Edges runs the amd64 8-bit products where their Go sides
// branch: Q = -128 (which AVX2's sign trick cannot take, so it falls back
// to the generic version), a long K whose records span several token
// blocks, and an odd block count with a row range inside N.
func TestW8Amd64Edges(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, o := range supported(t) {
		if o.W8MatMul == nil {
			continue
		}
		for _, c := range []struct {
			N, K, T, n0, n1 int
			min128          bool
		}{
			{5, 3 * QK, 3, 0, 5, true},
			{9, 256 * QK, 70, 2, 9, false},
			{13, 7 * QK, 1, 1, 12, false},
			{6, 9 * QK, 5, 0, 6, true},
		} {
			x, xf := randQ8(r, c.T, c.K)
			if c.min128 {
				for i := 0; i < len(x.Q); i += 7 {
					x.Sum[i/QK] += -128 - int32(x.Q[i])
					x.Q[i] = -128
				}
			}
			w := randW8(r, c.N, c.K)
			abs := func(n int) []float32 {
				v := make([]float32, c.K)
				w.Row(v, n)
				for i := range v {
					v[i] = abs32(v[i])
				}
				return v
			}
			checkMatMul(t, o.Name+" w8 edge", c.N, c.K, c.T, c.n0, c.n1, abs, x, xf,
				func(d []float32, l int, x *Q8, a, b int) { w8MatMulGeneric(d, l, w, x, a, b) },
				func(d []float32, l int, x *Q8, a, b int) { o.W8MatMul(d, l, w, x, a, b) })
		}
	}
}
