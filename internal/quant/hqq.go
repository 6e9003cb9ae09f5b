package quant

import "math"

// HQQ (half-quadratic quantization, Badri & Shaji 2023) refines the scale or
// zero point of a quantized group without calibration data, by minimizing the
// lp-norm (p < 1) of the weight error, which tolerates a few large errors on
// outliers in exchange for a closer fit of the bulk. Each iteration, with inv
// = 1/scale and the error e = w - (q - z)/inv of the current parameters:
//
//	q   = clamp(round(w*inv + z), qmin, qmax)
//	W_e = shrink(e),  shrink(x) = sign(x) * max(|x| - |x|^(p-1)/beta, 0)
//	asymmetric: z   = mean(q - (w - W_e)*inv)               (zero point update)
//	symmetric:  inv = sum(q^2) / (sum((w - W_e)*q) + 1e-8)  (scale update, z = 0)
//
// This package follows MNN's export (transformers/llm/export, --hqq): p = 0.7,
// beta = 10 held fixed (the HQQ library multiplies beta by kappa = 1.01 each
// step; MNN does not), at most 20 iterations, and stop at the first step whose
// mean |w - w'| does not improve. Two deliberate differences: the stopping
// test and the kept parameters are per group rather than over the whole
// tensor, and the parameters kept are the best seen (MNN keeps the ones of the
// last, already non-improving, step). The first parameters evaluated are the
// plain min/max (or amax/7) ones, so the refined group's mean |w - w'| is
// never larger than the plain one's.

// HQQ constants (see above).
const (
	HQQNorm  = 0.7  // p of the lp-norm
	HQQBeta  = 10.0 // beta of the shrinkage operator, held fixed
	HQQIters = 20   // maximum iterations
)

// shrinkLp is the proximal operator of the lp-norm with weight 1/beta.
func shrinkLp(x float64) float64 {
	a := math.Abs(x)
	if a == 0 {
		return 0
	}
	v := a - math.Pow(a, HQQNorm-1)/HQQBeta
	if v <= 0 {
		return 0
	}
	return math.Copysign(v, x)
}

// hqqAsym refines the zero point z of a 0..15 group with scale 1/inv and
// returns the best zero point found.
func hqqAsym(w []float32, inv, z float64) float64 {
	n := float64(len(w))
	best, bestZ := math.Inf(1), z
	for range HQQIters {
		var errSum, zSum float64
		for _, v := range w {
			x := float64(v)
			q := float64(roundClamp(x*inv+z, 0, 15))
			e := x - (q-z)/inv
			errSum += math.Abs(e)
			zSum += q - (x-shrinkLp(e))*inv
		}
		cur := errSum / n
		if !(cur < best) {
			break
		}
		best, bestZ = cur, z
		z = zSum / n
		if math.IsNaN(z) || math.IsInf(z, 0) {
			break
		}
	}
	return bestZ
}

// hqqSym refines the inverse scale inv of a -8..7 group and returns the best
// one found.
func hqqSym(w []float32, inv float64) float64 {
	n := float64(len(w))
	best, bestInv := math.Inf(1), inv
	for range HQQIters {
		var errSum, qq, pq float64
		for _, v := range w {
			x := float64(v)
			q := float64(roundClamp(x*inv, -8, 7))
			e := x - q/inv
			errSum += math.Abs(e)
			qq += q * q
			pq += (x - shrinkLp(e)) * q
		}
		cur := errSum / n
		if !(cur < best) {
			break
		}
		best, bestInv = cur, inv
		next := qq / (pq + 1e-8)
		if !(next > 0) || math.IsInf(next, 0) {
			break
		}
		inv = next
	}
	return bestInv
}
