package quant

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/aotlm/aotlm/internal/kernel"
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
	// Refit is how many rounds of scale re-fitting follow GPTQ: each
	// round fits the scales (LPBQ: the row scale and block codes) to the
	// output error with the integers held (RefitScales), then runs GPTQ
	// again on the refitted grid; the state of least output error is
	// kept. 0: none.
	Refit int
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
	if _, ok := gridOf(q); !ok {
		return nil
	}
	f, err := FactorGPTQ(h, q.Cols, opts)
	if err != nil {
		return err
	}
	return f.Apply(q, w)
}

// GPTQFactor is what GPTQ derives from a Hessian alone: the column order
// and the upper Cholesky factor of the dampened inverse. Weights reading
// the same input (q, k and v; gate and up) share one.
type GPTQFactor struct {
	cols int
	perm []int // perm[i] is the column quantized i-th
	u    []float64
	dead []bool
	// with Refit: the rounds, and the damped Hessian in column order
	refit    int
	damped32 []float32
}

// FactorGPTQ factors h, the [cols, cols] second moment of a layer's
// inputs, for GPTQ with opts.
func FactorGPTQ(h []float64, cols int, opts GPTQOptions) (*GPTQFactor, error) {
	if len(h) != cols*cols {
		return nil, fmt.Errorf("quant: gptq: %d hessian values for %d columns", len(h), cols)
	}
	if opts.Refit < 0 {
		return nil, fmt.Errorf("quant: gptq: %d refit rounds", opts.Refit)
	}
	perm := make([]int, cols)
	for i := range perm {
		perm[i] = i
	}
	var damped32 []float32
	if opts.Refit > 0 {
		d, _ := dampHessian(h, cols, opts.Damp)
		damped32 = toF32(d)
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
		return nil, err
	}
	return &GPTQFactor{cols: cols, perm: perm, u: u, dead: dead, refit: opts.Refit, damped32: damped32}, nil
}

// Apply chooses the integers of q, a quantization of w, by GPTQ on q's
// grid with the factor f. It is safe for concurrent use on different q.
func (f *GPTQFactor) Apply(q *Quantized, w []float32) error {
	rows, cols := q.Rows, q.Cols
	if len(w) != rows*cols {
		return fmt.Errorf("quant: gptq: %d weights for [%d, %d]", len(w), rows, cols)
	}
	if cols != f.cols {
		return fmt.Errorf("quant: gptq: a factor of %d columns for a weight of %d", f.cols, cols)
	}
	g, ok := gridOf(q)
	if !ok {
		return nil
	}
	gptqRows(g, w, rows, cols, f.perm, f.dead, f.u)
	if f.refit > 0 {
		f.refitRounds(q, w, g, f.refit)
	}
	return nil
}

// gptqBlock is how many columns GPTQ quantizes before it applies their
// errors to the columns after them in one pass (the reference
// implementation's lazy batch updates).
const gptqBlock = 128

// gptqRows runs GPTQ's column loop over every row of w, rounding through
// g. Within a block of gptqBlock columns the updates are float64 and in
// order; the block's effect on the later columns, sum over the block of
// e_i * U[i, j], is accumulated in float32 on the SIMD axpy kernel and
// then applied, which is the same sum in another order (the paper's
// reference runs entirely in float32).
func gptqRows(g grid, w []float32, rows, cols int, perm []int, dead []bool, u []float64) {
	var u32 []float32
	if cols > gptqBlock {
		u32 = make([]float32, len(u))
		for i, v := range u {
			u32[i] = float32(v)
		}
	}
	row := make([]float64, cols)
	delta := make([]float32, cols)
	var es [gptqBlock]float64
	for r := range rows {
		for i, c := range perm {
			row[i] = float64(w[r*cols+c])
			if dead[i] {
				row[i] = 0
			}
		}
		for i1 := 0; i1 < cols; i1 += gptqBlock {
			i2 := min(i1+gptqBlock, cols)
			for i := i1; i < i2; i++ {
				e := (row[i] - g.round(r, perm[i], row[i])) / u[i*cols+i]
				ui := u[i*cols : (i+1)*cols]
				for j := i + 1; j < i2; j++ {
					row[j] -= e * ui[j]
				}
				es[i-i1] = e
			}
			if i2 == cols {
				continue
			}
			d := delta[:cols-i2]
			clear(d)
			for i := i1; i < i2; i++ {
				kernel.Axpy(d, float32(es[i-i1]), u32[i*cols+i2:(i+1)*cols])
			}
			for j, v := range d {
				row[i2+j] -= float64(v)
			}
		}
	}
}

// gptqFactor dampens h and returns the upper Cholesky factor U of its
// inverse, and the columns no input ever reached (zero diagonal: their
// weights do not matter, GPTQ sets them to 0 and H[i,i] to 1).
func gptqFactor(h []float64, k int, damp float64) ([]float64, []bool, error) {
	if !(damp >= 0) {
		return nil, nil, fmt.Errorf("quant: gptq: damping %v is not positive", damp)
	}
	a, dead := dampHessian(h, k, damp)
	u, err := inverseUpperFactor(a, k)
	if err != nil {
		return nil, nil, fmt.Errorf("quant: gptq: %w", err)
	}
	return u, dead, nil
}

// dampHessian returns a copy of h [k, k] with damp (0.01 when zero) times
// its mean diagonal added to the diagonal, and the dead columns (zero
// diagonal) given a diagonal of 1 first.
func dampHessian(h []float64, k int, damp float64) ([]float64, []bool) {
	if damp == 0 {
		damp = 0.01
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
	return a, dead
}

// inverseUpperFactor returns the upper triangular U with positive diagonal
// such that a^-1 = U^T U, for a symmetric positive definite a [k, k].
// With J the reversal permutation, J a J = L L^T (lower Cholesky) gives
// a = R R^T with R = J L J upper, so a^-1 = R^-T R^-1 and U = R^-1 =
// J L^-1 J: one factorization and one triangular inverse, both walking
// rows in memory order, instead of inverting a and factoring the inverse.
func inverseUpperFactor(a []float64, k int) ([]float64, error) {
	rev := make([]float64, k*k)
	for i := range k {
		for j := range k {
			rev[i*k+j] = a[(k-1-i)*k+(k-1-j)]
		}
	}
	l, err := cholesky(rev, k)
	if err != nil {
		return nil, err
	}
	li := lowerInverse(l, k)
	u := rev // reuse: U[i,j] = L^-1[k-1-i, k-1-j]
	for i := range k {
		for j := range k {
			u[i*k+j] = li[(k-1-i)*k+(k-1-j)]
		}
	}
	return u, nil
}

// lowerInverse inverts the lower triangular l [k, k] row by row: row i of
// L^-1 is -(sum over p < i of l[i,p] * row p of L^-1) / l[i,i], plus
// 1/l[i,i] on the diagonal, accumulated as whole-row updates.
func lowerInverse(l []float64, k int) []float64 {
	li := make([]float64, k*k)
	for i := range k {
		row := li[i*k : i*k+i+1]
		for p := range i {
			c := l[i*k+p]
			if c == 0 {
				continue
			}
			axpy64(row[:p+1], c, li[p*k:p*k+p+1])
		}
		d := l[i*k+i]
		for j := range i {
			row[j] = -row[j] / d
		}
		row[i] = 1 / d
	}
	return li
}

var errNotSPD = errors.New("matrix is not positive definite")

// cholesky returns the lower factor L of the symmetric positive definite
// a [k, k] (a = L L^T).
func cholesky(a []float64, k int) ([]float64, error) {
	l := make([]float64, k*k)
	for i := range k {
		for j := 0; j <= i; j++ {
			s := a[i*k+j] - dot64(l[i*k:i*k+j], l[j*k:j*k+j])
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

// dot64 returns the dot product of a and b (len(b) >= len(a)) with four
// running sums, which the CPU overlaps.
func dot64(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy64 adds c*x to y (len(x) >= len(y)), four elements a step.
func axpy64(y []float64, c float64, x []float64) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += c * x[i]
		y[i+1] += c * x[i+1]
		y[i+2] += c * x[i+2]
		y[i+3] += c * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += c * x[i]
	}
}
