package quant

import (
	"math"
	"math/rand/v2"
)

// gaussian returns n values from N(0, sigma^2) with a fixed seed.
func gaussian(seed uint64, n int, sigma float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * sigma)
	}
	return w
}

// withOutliers scales a fraction frac of w (chosen with seed) by factor, the
// heavy tail real linear weights show.
func withOutliers(w []float32, seed uint64, frac, factor float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := append([]float32(nil), w...)
	for i := range out {
		if rng.Float64() < frac {
			out[i] *= float32(factor)
		}
	}
	return out
}

// relTol is the float32 rounding slack allowed on top of a derived error
// bound: a few ulps of the values involved.
const relTol = 1e-6

// within reports whether err <= bound up to relTol of scale.
func within(err, bound, scale float64) bool {
	return err <= bound+relTol*math.Max(scale, 1e-30)
}
