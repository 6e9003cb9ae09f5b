package quant

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/kernel"
)

// Scale re-fitting after GPTQ. GPTQ chooses the integers on a grid fixed
// beforehand; once they are chosen, the grid's scales are no longer the
// best ones for them. With the integers held, the layer's output error
// tr((W - W') H (W - W')^T) is a quadratic in each row's scales, so they
// can be fitted to it:
//
//	w8:   one scale per row, the least-squares optimum in closed form
//	q4:   one scale per group (the zero points held), fitted by
//	      coordinate descent, which converges to the least-squares optimum
//	lpbq: the row's float scale S in closed form, then each block's 4-bit
//	      code k (1..16) as the best of its 16 values, in sweeps
//
// and GPTQ can then run again on the refitted grid, and so on
// (GPTQOptions.Refit): each round can only keep or lower the objective of
// the best state seen, which is the one returned.

// refitSweeps is how many coordinate-descent sweeps a row gets per refit.
const refitSweeps = 4

// OutputError returns tr((W - W') H (W - W')^T), the GPTQ objective: the
// summed squared output error of q's dequantized weights against w on
// inputs whose second moment is h [cols, cols]. H e is computed in
// float32 on the SIMD row kernel, each row's e^T H e summed in float64.
func OutputError(q *Quantized, w []float32, h []float64) (float64, error) {
	rows, cols := q.Rows, q.Cols
	if len(w) != rows*cols || len(h) != cols*cols {
		return 0, fmt.Errorf("quant: output error: %d weights and %d hessian values for [%d, %d]", len(w), len(h), rows, cols)
	}
	return outputError32(q, w, toF32(h)), nil
}

func outputError32(q *Quantized, w []float32, h32 []float32) float64 {
	cols := q.Cols
	dq := make([]float32, cols)
	e := make([]float32, cols)
	g := make([]float32, cols)
	var total float64
	for r := range q.Rows {
		q.dequantizeRow(r, dq)
		for c := range cols {
			e[c] = w[r*cols+c] - dq[c]
		}
		kernel.DotRows(g, e, h32, cols)
		for c := range cols {
			total += float64(e[c]) * float64(g[c])
		}
	}
	return total
}

func toF32(h []float64) []float32 {
	out := make([]float32, len(h))
	for i, v := range h {
		out[i] = float32(v)
	}
	return out
}

// RefitScales fits q's scales (and LPBQ block codes) to the output error
// tr((W - W') H (W - W')^T) with q's integers held, h [cols, cols] the
// second moment of the inputs (damped as the caller wants). Schemes
// without scales to fit (f16) are left as they are. Each step is the
// exact minimum along one coordinate, so the objective (in real
// arithmetic) never rises; the products with H run in float32 on the SIMD
// row kernels, the residual recomputed at every sweep.
func RefitScales(q *Quantized, w []float32, h []float64) error {
	rows, cols := q.Rows, q.Cols
	if len(w) != rows*cols || len(h) != cols*cols {
		return fmt.Errorf("quant: refit: %d weights and %d hessian values for [%d, %d]", len(w), len(h), rows, cols)
	}
	refitScales32(q, w, toF32(h))
	return nil
}

func refitScales32(q *Quantized, w []float32, h32 []float32) {
	if _, ok := gridOf(q); !ok {
		return
	}
	cols := q.Cols
	rf := refitter{q: q, h: h32, cols: cols, e: make([]float32, cols), g: make([]float32, cols),
		a: make([]float32, cols), ha: make([]float32, cols), alpha: make([]float32, cols), dq: make([]float32, cols)}
	for r := range q.Rows {
		rf.row(r, w[r*cols:(r+1)*cols])
	}
}

// refitter holds one row's work vectors.
type refitter struct {
	q     *Quantized
	h     []float32 // H [cols, cols], symmetric
	cols  int
	e, g  []float32 // e = w - w', g = H e
	a     []float32 // a direction of w'
	ha    []float32 // H a, for a direction over the whole row
	alpha []float32
	dq    []float32
}

// residual sets e = w - w' and g = H e for row r.
func (rf *refitter) residual(r int, w []float32) {
	rf.q.dequantizeRow(r, rf.dq)
	for c := range rf.cols {
		rf.e[c] = w[c] - rf.dq[c]
	}
	kernel.DotRows(rf.g, rf.e, rf.h, rf.cols)
}

// step returns the least-squares multiple delta of the direction a
// (nonzero on [c0, c1)) to add to w': w' += delta*a changes e^T H e by
// -2 delta a^T g + delta^2 a^T H a, least at delta = a^T g / a^T H a.
// It also returns a^T H a (0 or less: a is no direction).
func (rf *refitter) step(c0, c1 int) (delta, aha float64) {
	a := rf.a[c0:c1]
	ag := float64(kernel.Dot(a, rf.g[c0:c1]))
	for i, c := 0, c0; c < c1; i, c = i+1, c+1 {
		aha += float64(a[i]) * float64(kernel.Dot(rf.h[c*rf.cols+c0:c*rf.cols+c1], a))
	}
	if !(aha > 0) {
		return 0, aha
	}
	return ag / aha, aha
}

// move applies w' += delta*a (a nonzero on [c0, c1)) to e and g:
// g -= delta * H[:, c0:c1] a, the rows c0..c1 of the symmetric H.
func (rf *refitter) move(delta float64, c0, c1 int) {
	d := float32(delta)
	kernel.Axpy(rf.e[c0:c1], -d, rf.a[c0:c1])
	al := rf.alpha[:c1-c0]
	for i := range al {
		al[i] = -d * rf.a[c0+i]
	}
	kernel.AxpyRows(rf.g, al, rf.h[c0*rf.cols:], rf.cols)
}

// rowStep is step and move over the whole row, with H a computed once.
func (rf *refitter) rowStep() float64 {
	kernel.DotRows(rf.ha, rf.a, rf.h, rf.cols)
	aha := float64(kernel.Dot(rf.a, rf.ha))
	if !(aha > 0) {
		return 0
	}
	return float64(kernel.Dot(rf.a, rf.g)) / aha
}

// rowMove applies w' += delta*a for the a of the last rowStep.
func (rf *refitter) rowMove(delta float64) {
	kernel.Axpy(rf.e, -float32(delta), rf.a)
	kernel.Axpy(rf.g, -float32(delta), rf.ha)
}

// row refits row r of q against its weights w [cols].
func (rf *refitter) row(r int, w []float32) {
	schemes[rf.q.Scheme.Kind].refit(rf, r, w)
}

// refitRounds alternates RefitScales and GPTQ on the refitted grid for
// rounds rounds after a first GPTQ pass has set q's integers, and leaves
// q at the state of least output error seen (the GPTQ result if no round
// improves on it), the output error measured with the damped Hessian
// GPTQ minimizes.
func (f *GPTQFactor) refitRounds(q *Quantized, w []float32, g grid, rounds int) {
	hd := f.damped32
	bestErr := outputError32(q, w, hd)
	best := snapshot(q)
	for range rounds {
		refitScales32(q, w, hd)
		if e := outputError32(q, w, hd); e < bestErr {
			bestErr, best = e, snapshot(q)
		}
		gptqRows(g, w, q.Rows, q.Cols, f.perm, f.dead, f.u)
		if e := outputError32(q, w, hd); e < bestErr {
			bestErr, best = e, snapshot(q)
		}
	}
	best.restore(q)
}

// quantState is a copy of the parts of a Quantized that GPTQ and
// RefitScales change.
type quantState struct {
	q      []int8
	codes  []uint8
	scales []float32
}

func snapshot(q *Quantized) quantState {
	return quantState{q: append([]int8(nil), q.Q...), codes: append([]uint8(nil), q.Codes...),
		scales: append([]float32(nil), q.Scales...)}
}

func (s quantState) restore(q *Quantized) {
	copy(q.Q, s.q)
	copy(q.Codes, s.codes)
	copy(q.Scales, s.scales)
}
