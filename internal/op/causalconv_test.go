package op

import (
	"math/rand/v2"
	"testing"
)

// TestCausalConvRows checks the convolution against its definition over a
// zero-padded sequence, fed whole and in chunks that carry the state (in
// place, and from one state slice to another).
func TestCausalConvRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const T, C = 11, 5
	for _, L := range []int{2, 3, 4} {
		x := make([]float32, T*C)
		w := make([]float32, C*L)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		want := make([]float32, T*C)
		for tt := 0; tt < T; tt++ {
			for c := 0; c < C; c++ {
				var s float32
				for j := 0; j < L; j++ {
					if r := tt - (L - 1) + j; r >= 0 {
						s += w[c*L+j] * x[r*C+c]
					}
				}
				want[tt*C+c] = s
			}
		}
		for _, c := range []struct {
			chunk   int
			inPlace bool
		}{{T, true}, {1, true}, {2, true}, {3, true}, {1, false}, {2, false}} {
			chunk := c.chunk
			S, next := make([]float32, (L-1)*C), make([]float32, (L-1)*C)
			got := make([]float32, T*C)
			for lo := 0; lo < T; lo += chunk {
				hi := min(lo+chunk, T)
				if c.inPlace {
					CausalConvRows(got[lo*C:hi*C], x[lo*C:hi*C], w, S, S, hi-lo, C, L)
					continue
				}
				clear(next) // the output state must not depend on what it held
				CausalConvRows(got[lo*C:hi*C], x[lo*C:hi*C], w, S, next, hi-lo, C, L)
				S, next = next, S
			}
			for i := range want {
				if d := got[i] - want[i]; d > 1e-5 || d < -1e-5 {
					t.Fatalf("L %d, chunks of %d: value %d is %v, want %v", L, chunk, i, got[i], want[i])
				}
			}
			for i, v := range S {
				if v != x[(T-(L-1))*C+i] {
					t.Fatalf("L %d, chunks of %d: state %d is %v, want the last rows of x", L, chunk, i, v)
				}
			}
		}
	}
}
