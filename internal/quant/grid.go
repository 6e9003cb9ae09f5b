package quant

// grid is the per-weight quantization grid of a Quantized, with its
// parameters (scales, codes, zero points) fixed: weight (r, c) may take
// the values its scheme's round gives for integers in [lo, hi].
type grid struct {
	q      *Quantized
	lo, hi int
	rule   func(q *Quantized, r, c int, w float64, lo, hi int) float64
}

// gridOf returns the grid of q; ok is false for a scheme without an
// integer grid the optimizers (GPTQ, SearchGrid, RefitScales) work on.
func gridOf(q *Quantized) (grid, bool) {
	info, ok := schemes[q.Scheme.Kind]
	if !ok || info.round == nil {
		return grid{}, false
	}
	lo, hi := info.levels(q.Scheme)
	return grid{q, lo, hi, info.round}, true
}

// round sets the integer of weight (r, c) to the grid point nearest w and
// returns the value it dequantizes to (as Quantized.Dequantize computes it).
func (g grid) round(r, c int, w float64) float64 { return g.rule(g.q, r, c, w, g.lo, g.hi) }
