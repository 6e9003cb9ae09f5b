package quant

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// GPTQ (Frantar et al., 2022) quantizes the columns of a weight W [N, K] one
// at a time and spreads each column's rounding error over the columns not yet
// quantized, so that the layer's output on the calibration inputs X [n, K],
// not the weight itself, stays close: it minimizes
// tr((W - W') H (W - W')^T) with H = X^T X, greedily in column order. With
// U the upper Cholesky factor of H^-1 (H^-1 = U^T U), column i's update is
//
//	e       = (w_i - q_i) / U[i,i]
//	w_j    -= e * U[i,j]             for every j > i
//
// which is the optimal-brain-surgeon update of the remaining columns,
// computed once for all steps instead of re-inverting H each time.
//
// Here the grid is fixed first: scales, block codes and zero points are
// those the scheme's own quantizer picks for the original weights; GPTQ
// then chooses the integers on that grid. Rows whose scheme has no integer
// grid (f16) are returned as the plain quantizer gives them.

// GPTQOptions tunes GPTQ.
type GPTQOptions struct {
	// Damp is added to H's diagonal as a fraction of its mean (the paper's
	// percdamp; 0.01 when zero).
	Damp float64
	// ActOrder quantizes the columns in decreasing order of H's diagonal
	// (the inputs with the most energy first, the paper's "act-order").
	// The grid is fixed beforehand here, so the order changes only which
	// columns absorb the others' errors.
	ActOrder bool
}

// QuantizeGPTQ quantizes w [rows, cols] with scheme s, choosing the integers
// by GPTQ with h, the [cols, cols] second moment of the layer's inputs
// (sum over calibration rows of x^T x, row-major, symmetric).
func QuantizeGPTQ(w []float32, rows, cols int, s Scheme, h []float64, opts GPTQOptions) (*Quantized, error) {
	q, err := Quantize(w, rows, cols, s)
	if err != nil {
		return nil, err
	}
	return q, GPTQOnGrid(q, w, h, opts)
}

// GPTQOnGrid chooses the integers of q, a quantization of w, by GPTQ on
// q's grid as it stands (after SearchGrid, say).
func GPTQOnGrid(q *Quantized, w []float32, h []float64, opts GPTQOptions) error {
	rows, cols := q.Rows, q.Cols
	if len(w) != rows*cols {
		return fmt.Errorf("quant: gptq: %d weights for [%d, %d]", len(w), rows, cols)
	}
	g, ok := gridOf(q)
	if !ok {
		return nil
	}
	if len(h) != cols*cols {
		return fmt.Errorf("quant: gptq: %d hessian values for %d columns", len(h), cols)
	}
	perm := make([]int, cols) // perm[i] is the column quantized i-th
	for i := range perm {
		perm[i] = i
	}
	if opts.ActOrder {
		sort.SliceStable(perm, func(a, b int) bool { return h[perm[a]*cols+perm[a]] > h[perm[b]*cols+perm[b]] })
		hp := make([]float64, len(h))
		for a, pa := range perm {
			for b, pb := range perm {
				hp[a*cols+b] = h[pa*cols+pb]
			}
		}
		h = hp
	}
	u, dead, err := gptqFactor(h, cols, opts.Damp)
	if err != nil {
		return err
	}
	row := make([]float64, cols)
	for r := range rows {
		for i, c := range perm {
			row[i] = float64(w[r*cols+c])
			if dead[i] {
				row[i] = 0
			}
		}
		for i := range cols {
			e := (row[i] - g.round(r, perm[i], row[i])) / u[i*cols+i]
			for j := i + 1; j < cols; j++ {
				row[j] -= e * u[i*cols+j]
			}
		}
	}
	return nil
}

// gptqFactor dampens h and returns the upper Cholesky factor U of its
// inverse, and the columns no input ever reached (zero diagonal: their
// weights do not matter, GPTQ sets them to 0 and H[i,i] to 1).
func gptqFactor(h []float64, k int, damp float64) ([]float64, []bool, error) {
	if damp == 0 {
		damp = 0.01
	}
	if !(damp > 0) {
		return nil, nil, fmt.Errorf("quant: gptq: damping %v is not positive", damp)
	}
	a := append([]float64(nil), h...)
	dead := make([]bool, k)
	var mean float64
	for i := range k {
		if a[i*k+i] == 0 {
			dead[i] = true
			a[i*k+i] = 1
		}
		mean += a[i*k+i]
	}
	mean /= float64(k)
	for i := range k {
		a[i*k+i] += damp * mean
	}
	inv, err := spdInverse(a, k)
	if err != nil {
		return nil, nil, fmt.Errorf("quant: gptq: %w", err)
	}
	// H^-1 = U^T U, U = L^T for the lower factor L of H^-1
	u, err := upperCholesky(inv, k)
	if err != nil {
		return nil, nil, fmt.Errorf("quant: gptq: %w", err)
	}
	return u, dead, nil
}

var errNotSPD = errors.New("matrix is not positive definite")

// cholesky returns the lower factor L of the symmetric positive definite
// a [k, k] (a = L L^T).
func cholesky(a []float64, k int) ([]float64, error) {
	l := make([]float64, k*k)
	for i := range k {
		for j := 0; j <= i; j++ {
			s := a[i*k+j]
			for p := range j {
				s -= l[i*k+p] * l[j*k+p]
			}
			if i == j {
				if !(s > 0) {
					return nil, errNotSPD
				}
				l[i*k+i] = math.Sqrt(s)
			} else {
				l[i*k+j] = s / l[j*k+j]
			}
		}
	}
	return l, nil
}

// upperCholesky returns the upper triangular U with a = U^T U.
func upperCholesky(a []float64, k int) ([]float64, error) {
	l, err := cholesky(a, k)
	if err != nil {
		return nil, err
	}
	u := make([]float64, k*k)
	for i := range k {
		for j := range k {
			u[i*k+j] = l[j*k+i]
		}
	}
	return u, nil
}

// spdInverse inverts the symmetric positive definite a [k, k] through its
// Cholesky factor.
func spdInverse(a []float64, k int) ([]float64, error) {
	l, err := cholesky(a, k)
	if err != nil {
		return nil, err
	}
	// inverse of L by forward substitution, then A^-1 = L^-T L^-1
	li := make([]float64, k*k)
	for c := range k {
		li[c*k+c] = 1 / l[c*k+c]
		for i := c + 1; i < k; i++ {
			var s float64
			for p := c; p < i; p++ {
				s -= l[i*k+p] * li[p*k+c]
			}
			li[i*k+c] = s / l[i*k+i]
		}
	}
	inv := make([]float64, k*k)
	for i := range k {
		for j := 0; j <= i; j++ {
			var s float64
			for p := i; p < k; p++ {
				s += li[p*k+i] * li[p*k+j]
			}
			inv[i*k+j], inv[j*k+i] = s, s
		}
	}
	return inv, nil
}
