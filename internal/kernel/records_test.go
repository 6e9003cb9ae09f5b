package kernel

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQuantizeRowsRecords checks that activations quantized in row ranges
// with records laid out once (Begin, QuantizeRows) equal Quantize's, and
// that every product reads them to exactly the result it computes when it
// lays the rows out itself: same kernel, same arithmetic, tolerance 0.
func TestQuantizeRowsRecords(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, K := range []int{32, 64, 96, 160, 576, 1056} {
		for _, T := range []int{1, 3, 17, 70} {
			whole, x := randQ8(r, T, K)
			parts := NewQ8(T, K)
			parts.Begin(T, true, true)
			for _, cut := range [][2]int{{0, T / 3}, {T / 3, T / 2}, {T / 2, T}} {
				parts.QuantizeRows(x, cut[0], cut[1])
			}
			if parts.T != T || !slices.Equal(parts.Q, whole.Q) || !slices.Equal(parts.D, whole.D) || !slices.Equal(parts.Sum, whole.Sum) {
				t.Fatalf("K=%d T=%d: QuantizeRows differs from Quantize", K, T)
			}
			N := 13
			for _, lpbq := range []bool{true, false} {
				w := randQ4(r, N, K, lpbq, false)
				want, got := make([]float32, T*N), make([]float32, T*N)
				w.MatMul(want, N, whole, 0, N)
				w.MatMul(got, N, parts, 0, N)
				if !slices.Equal(got, want) {
					t.Fatalf("K=%d T=%d lpbq=%v: 4-bit product from records differs", K, T, lpbq)
				}
			}
			w8 := randW8(r, N, K)
			want, got := make([]float32, T*N), make([]float32, T*N)
			w8.MatMul(want, N, whole, 0, N)
			w8.MatMul(got, N, parts, 2, N)
			w8.MatMul(got, N, parts, 0, 2)
			if !slices.Equal(got, want) {
				t.Fatalf("K=%d T=%d: 8-bit product from records differs", K, T)
			}
			// Quantize drops the records: the next products read the
			// new values.
			y := randFloats(r, T*K, 2)
			parts.Quantize(y, T)
			whole.Quantize(y, T)
			w8.MatMul(want, N, whole, 0, N)
			w8.MatMul(got, N, parts, 0, N)
			if !slices.Equal(got, want) {
				t.Fatalf("K=%d T=%d: product after Quantize read stale records", K, T)
			}
		}
	}
}
