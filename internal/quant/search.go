package quant

import "fmt"

// SearchGrid lowers the importance-weighted error sum_c imp[c] (w - w')^2 of
// q, a quantization of w, by choosing its grid again block by block, as
// its scheme's entry says (lpbqSearch, q4Search, w8Search):
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
	search := schemes[q.Scheme.Kind].search
	if !ok || search == nil {
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
	search(q, blockErr)
	return nil
}
