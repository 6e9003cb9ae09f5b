package quant

import "fmt"

// SearchGrid lowers the importance-weighted error sum_c imp[c] (w - w')^2 of
// q, a quantization of w, by choosing its grid again block by block:
//
//   - lpbq: each block's code k in 1..16 (the row scale S stays), the
//     integers rounded against k*S;
//   - q4 symmetric: each group's scale among s*f, f = 1, 0.98, ..., 0.60;
//   - w8: each row's scale among s*f, f = 1, 0.99, ..., 0.80.
//
// Shrinking a scale clips the largest weights and rounds the rest more
// finely; with imp the inputs' mean square (the diagonal of X^T X / n) the
// choice favours the weights that meet large activations. imp nil weighs
// every input alike. Other schemes are left as they are. The integers are
// rounded to nearest on the new grid (GPTQ may choose them afterwards).
func SearchGrid(q *Quantized, w []float32, imp []float64) error {
	if len(w) != q.Rows*q.Cols {
		return fmt.Errorf("quant: grid search: %d weights for [%d, %d]", len(w), q.Rows, q.Cols)
	}
	if imp != nil && len(imp) != q.Cols {
		return fmt.Errorf("quant: grid search: %d importances for %d columns", len(imp), q.Cols)
	}
	g, ok := gridOf(q)
	if !ok || (q.Scheme.Kind == KindQ4 && !q.Scheme.Sym) {
		return nil
	}
	weight := func(c int) float64 {
		if imp == nil {
			return 1
		}
		return imp[c]
	}
	// blockErr rounds columns [lo, hi) of row r on the current grid and
	// returns their weighted error.
	blockErr := func(r, lo, hi int) float64 {
		var e float64
		for c := lo; c < hi; c++ {
			x := float64(w[r*q.Cols+c])
			d := x - g.round(r, c, x)
			e += weight(c) * d * d
		}
		return e
	}
	nb, B := q.BlocksPerRow(), q.Scheme.Block
	switch q.Scheme.Kind {
	case KindLPBQ:
		for r := range q.Rows {
			for b := range nb {
				lo, hi := b*B, min((b+1)*B, q.Cols)
				ci := r*nb + b
				best, bestE := q.Codes[ci], -1.0
				for k := uint8(1); k <= 16; k++ {
					q.Codes[ci] = k
					if e := blockErr(r, lo, hi); bestE < 0 || e < bestE {
						best, bestE = k, e
					}
				}
				q.Codes[ci] = best
				blockErr(r, lo, hi)
			}
		}
	case KindQ4:
		for r := range q.Rows {
			for b := range nb {
				lo, hi := b*B, min((b+1)*B, q.Cols)
				gi := r*nb + b
				s0 := q.Scales[gi]
				best, bestE := s0, -1.0
				for f := 100; f >= 60; f -= 2 {
					q.Scales[gi] = s0 * float32(f) / 100
					if e := blockErr(r, lo, hi); bestE < 0 || e < bestE {
						best, bestE = q.Scales[gi], e
					}
				}
				q.Scales[gi] = best
				blockErr(r, lo, hi)
			}
		}
	case KindW8:
		for r := range q.Rows {
			s0 := q.Scales[r]
			best, bestE := s0, -1.0
			for f := 100; f >= 80; f-- {
				q.Scales[r] = s0 * float32(f) / 100
				if e := blockErr(r, 0, q.Cols); bestE < 0 || e < bestE {
					best, bestE = q.Scales[r], e
				}
			}
			q.Scales[r] = best
			blockErr(r, 0, q.Cols)
		}
	}
	return nil
}
