package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// TestHadamardRowMatchesReference: the engine's hadamard step (the SIMD
// butterfly of kernel.FWHT, then one scale) equals the plain butterfly of
// op.HadamardRows on random rows, for every block size from 1 to 256 and
// rows of one to several blocks, within 1e-6 of the row's largest
// magnitude times log2(P)+1 (float32 sums in another order), and applying
// it twice gives the row back (B is orthogonal and symmetric).
func TestHadamardRowMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for P := 1; P <= 256; P *= 2 {
		for _, blocks := range []int{1, 3} {
			n := P * blocks
			x := randFloats(r, n, 2)
			want := make([]float32, n)
			op.HadamardRows(want, x, P)
			got := make([]float32, n)
			hadamardRow(got, x, P)
			var amax float64
			for _, v := range x {
				amax = max(amax, math.Abs(float64(v)))
			}
			tol := 1e-6 * amax * (math.Log2(float64(P)) + 1) * math.Sqrt(float64(P))
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > tol {
					t.Fatalf("P %d, %d values: [%d] = %g, want %g", P, n, i, got[i], want[i])
				}
			}
			back := make([]float32, n)
			hadamardRow(back, got, P)
			for i := range x {
				if d := math.Abs(float64(back[i] - x[i])); d > 2*tol {
					t.Fatalf("P %d: applied twice, [%d] = %g, want %g", P, i, back[i], x[i])
				}
			}
		}
	}
}
