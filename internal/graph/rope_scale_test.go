package graph

import (
	"math"
	"math/cmplx"
	"math/rand"
	"testing"
)

// TestRoPEScale checks a scaled rope against rotation by s*e^{i*p*f} in
// complex128 within 1e-5 (relative to 1+|value|), that dimensions past
// RotDim are not scaled, and that Scale 1 is bit-identical to Scale 0.
func TestRoPEScale(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const E, rot, heads, T, pos = 24, 18, 2, 3, 41
	freqs := make([]float64, rot/2)
	for i := range freqs {
		freqs[i] = 1 / math.Pow(10000, float64(2*i)/rot) / (1 + 3*r.Float64())
	}
	x := randSlice(r, T*heads*E)
	for _, style := range []RopeStyle{RopeInterleaved, RopeHalf} {
		for _, s := range []float64{1.1902380714238083, 0.5, 3} {
			got := append([]float32(nil), x...)
			rope(got, T, heads*E, pos, &Rope{Style: style, HeadDim: E, RotDim: rot, InvFreq: freqs, Scale: s})
			for tt := 0; tt < T; tt++ {
				for h := 0; h < heads; h++ {
					base := tt*heads*E + h*E
					for i := 0; i < rot/2; i++ {
						a, b := base+2*i, base+2*i+1
						if style == RopeHalf {
							a, b = base+i, base+i+rot/2
						}
						z := complex(float64(x[a]), float64(x[b])) * cmplx.Exp(complex(0, float64(pos+tt)*freqs[i])) * complex(s, 0)
						if math.Abs(real(z)-float64(got[a])) > 1e-5*(1+math.Abs(real(z))) ||
							math.Abs(imag(z)-float64(got[b])) > 1e-5*(1+math.Abs(imag(z))) {
							t.Fatalf("%v scale %v: pair %d of head %d row %d: got (%v,%v) want %v", style, s, i, h, tt, got[a], got[b], z)
						}
					}
					for d := rot; d < E; d++ {
						if got[base+d] != x[base+d] {
							t.Fatalf("%v scale %v: pass-through dim %d changed", style, s, d)
						}
					}
				}
			}
		}
		zero := append([]float32(nil), x...)
		one := append([]float32(nil), x...)
		rope(zero, T, heads*E, pos, &Rope{Style: style, HeadDim: E, RotDim: rot, InvFreq: freqs})
		rope(one, T, heads*E, pos, &Rope{Style: style, HeadDim: E, RotDim: rot, InvFreq: freqs, Scale: 1})
		for i := range zero {
			if math.Float32bits(zero[i]) != math.Float32bits(one[i]) {
				t.Fatalf("%v: scale 1 differs from unscaled at %d", style, i)
			}
		}
	}
}
