package engine

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// ropeTol is the error budget of the rope kernel against complex128
// rotation, relative to 1 + |value|.
const ropeTol = 1e-5

// TestRopeScaleKernel runs the kernel with magnitudes 0 (unscaled), 1 and
// longrope-like values on random inputs of both pairings, against
// s*e^{i*p*f} in complex128, and checks scale 1 is bit-identical to 0.
func TestRopeScaleKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 4))
	const E, rot, heads, T = 24, 18, 3, 4
	freqs := make([]float64, rot/2)
	for i := range freqs {
		freqs[i] = 1 / math.Pow(10000, float64(2*i)/rot) / (1 + 3*r.Float64())
	}
	x := make([]float32, T*heads*E)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	cos, sin := make([]float32, rot/2), make([]float32, rot/2)
	for _, half := range []bool{false, true} {
		for _, pos := range []int{0, 7, 300} {
			var unscaled []float32
			for _, s := range []float64{0, 1, 1.1902380714238083, 2.5} {
				got := append([]float32(nil), x...)
				rope(got, T, heads*E, pos, E, rot, half, freqs, s, cos, sin)
				m := s
				if m == 0 {
					m = 1
				}
				for tt := 0; tt < T; tt++ {
					for h := 0; h < heads; h++ {
						base := tt*heads*E + h*E
						for i := 0; i < rot/2; i++ {
							a, b := base+2*i, base+2*i+1
							if half {
								a, b = base+i, base+i+rot/2
							}
							z := complex(float64(x[a]), float64(x[b])) * cmplx.Exp(complex(0, float64(pos+tt)*freqs[i])) * complex(m, 0)
							if math.Abs(real(z)-float64(got[a])) > ropeTol*(1+math.Abs(real(z))) ||
								math.Abs(imag(z)-float64(got[b])) > ropeTol*(1+math.Abs(imag(z))) {
								t.Fatalf("half=%v pos=%d scale=%v: pair %d head %d row %d: got (%v,%v) want %v",
									half, pos, s, i, h, tt, got[a], got[b], z)
							}
						}
						for d := rot; d < E; d++ {
							if got[base+d] != x[base+d] {
								t.Fatalf("pass-through dim %d changed", d)
							}
						}
					}
				}
				switch s {
				case 0:
					unscaled = got
				case 1:
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(unscaled[i]) {
							t.Fatalf("half=%v pos=%d: scale 1 differs from unscaled at %d", half, pos, i)
						}
					}
				}
			}
		}
	}
}
