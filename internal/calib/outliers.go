package calib

import (
	"math"
	"slices"
	"sort"
)

// DefaultOutlierRatio is how many times the median channel's max |x| a
// channel's must be to count as an outlier when no ratio is given.
const DefaultOutlierRatio = 8

// OutlierChannels picks the outlier channels of a linear's input from the
// calibrated max |x| of each channel: those at least ratio (0:
// DefaultOutlierRatio) times the median channel's, the largest first, at
// most ceil(fraction*K) of them (at least one when fraction > 0). It
// returns them ascending, or nil when there are none.
func OutlierChannels(maxAbs []float64, fraction, ratio float64) []int {
	k := len(maxAbs)
	if k == 0 || !(fraction > 0) {
		return nil
	}
	if ratio <= 0 {
		ratio = DefaultOutlierRatio
	}
	sorted := slices.Clone(maxAbs)
	slices.Sort(sorted)
	median := sorted[k/2]
	if k%2 == 0 {
		median = (sorted[k/2-1] + sorted[k/2]) / 2
	}
	limit := max(1, int(math.Ceil(fraction*float64(k))))
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return maxAbs[order[a]] > maxAbs[order[b]] })
	var out []int
	for _, c := range order[:min(limit, k)] {
		if maxAbs[c] > 0 && maxAbs[c] >= ratio*median {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
