package testutil

import "math"

// ChiSquare returns Pearson's statistic of counts against expected
// counts, over the bins expecting at least 5 and one bin pooling the
// rest, and its degrees of freedom.
func ChiSquare(counts, expected []float64) (float64, int) {
	var stat, restC, restE float64
	bins := 0
	for i := range counts {
		if expected[i] >= 5 {
			d := counts[i] - expected[i]
			stat += d * d / expected[i]
			bins++
		} else {
			restC += counts[i]
			restE += expected[i]
		}
	}
	if restE > 0 {
		d := restC - restE
		stat += d * d / restE
		bins++
	}
	return stat, bins - 1
}

// ChiSquareCritical is the 0.999 quantile of the chi-square law of df
// degrees of freedom (Wilson-Hilferty; z = 3.0902 is the normal 0.999
// quantile).
func ChiSquareCritical(df int) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+3.0902*math.Sqrt(a), 3)
}
