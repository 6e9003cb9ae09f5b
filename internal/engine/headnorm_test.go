package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// headNormTol is the error budget of headRMSNorm against the float64
// reference, relative to 1 + |value|.
const headNormTol = 1e-5

// refHeadRMSNorm is the plain definition in float64: each E-wide head of
// each row of x [T, heads*E] divided by its root mean square (plus eps),
// times (w[e] + offset).
func refHeadRMSNorm(x, w []float32, T, heads, E int, eps, offset float64) []float64 {
	out := make([]float64, len(x))
	for t := 0; t < T; t++ {
		for h := 0; h < heads; h++ {
			base := t*heads*E + h*E
			var ss float64
			for e := 0; e < E; e++ {
				ss += float64(x[base+e]) * float64(x[base+e])
			}
			inv := 1 / math.Sqrt(ss/float64(E)+eps)
			for e := 0; e < E; e++ {
				out[base+e] = float64(x[base+e]) * inv * (float64(w[e]) + offset)
			}
		}
	}
	return out
}

// TestHeadRMSNormKernel runs the kernel on random inputs of many shapes
// (rows 1..5, 1..4 heads, head sizes 2..64, offsets 0 and 1, large and
// tiny magnitudes) against refHeadRMSNorm.
func TestHeadRMSNormKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 9))
	for _, E := range []int{2, 8, 16, 24, 32, 64} {
		for heads := 1; heads <= 4; heads++ {
			for T := 1; T <= 5; T++ {
				for _, offset := range []float32{0, 1} {
					scale := float32(math.Pow(10, float64(r.IntN(7)-3)))
					x := make([]float32, T*heads*E)
					for i := range x {
						x[i] = float32(r.NormFloat64()) * scale
					}
					w := make([]float32, E)
					for i := range w {
						w[i] = float32(r.NormFloat64())
					}
					const eps = 1e-6
					// guard band: the kernel must not write past its output
					dst := make([]float32, len(x)+4)
					for i := range dst {
						dst[i] = 7
					}
					headRMSNorm(dst[:len(x)], x, w, E, eps, offset)
					want := refHeadRMSNorm(x, w, T, heads, E, eps, float64(offset))
					for i, v := range want {
						if d := math.Abs(float64(dst[i]) - v); d > headNormTol*(1+math.Abs(v)) {
							t.Fatalf("E=%d heads=%d T=%d offset=%v: index %d got %v want %v", E, heads, T, offset, i, dst[i], v)
						}
					}
					for _, g := range dst[len(x):] {
						if g != 7 {
							t.Fatalf("E=%d heads=%d T=%d: guard band overwritten", E, heads, T)
						}
					}
				}
			}
		}
	}
}
