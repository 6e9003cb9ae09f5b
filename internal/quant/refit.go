package quant

import (
	"fmt"
	"math"
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
const refitSweeps = 8

// OutputError returns tr((W - W') H (W - W')^T), the GPTQ objective: the
// summed squared output error of q's dequantized weights against w on
// inputs whose second moment is h [cols, cols].
func OutputError(q *Quantized, w []float32, h []float64) (float64, error) {
	rows, cols := q.Rows, q.Cols
	if len(w) != rows*cols || len(h) != cols*cols {
		return 0, fmt.Errorf("quant: output error: %d weights and %d hessian values for [%d, %d]", len(w), len(h), rows, cols)
	}
	dq := make([]float32, cols)
	e := make([]float64, cols)
	var total float64
	for r := range rows {
		q.dequantizeRow(r, dq)
		for c := range cols {
			e[c] = float64(w[r*cols+c]) - float64(dq[c])
		}
		total += quadForm(h, e, cols)
	}
	return total, nil
}

// quadForm returns e^T h e for h [n, n].
func quadForm(h, e []float64, n int) float64 {
	var s float64
	for i := range n {
		s += e[i] * dot64(h[i*n:(i+1)*n], e)
	}
	return s
}

// RefitScales fits q's scales (and LPBQ block codes) to the output error
// tr((W - W') H (W - W')^T) with q's integers held, h [cols, cols] the
// second moment of the inputs (damped as the caller wants). Schemes
// without scales to fit (f16) are left as they are. Each step is the
// exact minimum along one coordinate, so the objective (in real
// arithmetic) never rises.
func RefitScales(q *Quantized, w []float32, h []float64) error {
	rows, cols := q.Rows, q.Cols
	if len(w) != rows*cols || len(h) != cols*cols {
		return fmt.Errorf("quant: refit: %d weights and %d hessian values for [%d, %d]", len(w), len(h), rows, cols)
	}
	if _, ok := gridOf(q); !ok {
		return nil
	}
	rf := refitter{q: q, h: h, cols: cols, e: make([]float64, cols), g: make([]float64, cols),
		a: make([]float64, cols), dq: make([]float32, cols)}
	for r := range rows {
		rf.row(r, w[r*cols:(r+1)*cols])
	}
	return nil
}

// refitter holds one row's work vectors.
type refitter struct {
	q    *Quantized
	h    []float64
	cols int
	e, g []float64 // e = w - w', g = H e
	a    []float64 // a direction of w'
	dq   []float32
}

// residual sets e = w - w' and g = H e for row r.
func (rf *refitter) residual(r int, w []float32) {
	rf.q.dequantizeRow(r, rf.dq)
	for c := range rf.cols {
		rf.e[c] = float64(w[c]) - float64(rf.dq[c])
	}
	for c := range rf.cols {
		rf.g[c] = dot64(rf.h[c*rf.cols:(c+1)*rf.cols], rf.e)
	}
}

// step returns the least-squares multiple delta of the direction a
// (nonzero on [c0, c1)) to add to w': w' += delta*a changes e^T H e by
// -2 delta a^T g + delta^2 a^T H a, least at delta = a^T g / a^T H a.
// It also returns a^T H a (0 or less: a is no direction).
func (rf *refitter) step(c0, c1 int) (delta, aha float64) {
	var ag float64
	for c := c0; c < c1; c++ {
		ag += rf.a[c] * rf.g[c]
		aha += rf.a[c] * dot64(rf.h[c*rf.cols+c0:c*rf.cols+c1], rf.a[c0:c1])
	}
	if !(aha > 0) {
		return 0, aha
	}
	return ag / aha, aha
}

// move applies w' += delta*a (a nonzero on [c0, c1)) to e and g.
func (rf *refitter) move(delta float64, c0, c1 int) {
	for c := c0; c < c1; c++ {
		rf.e[c] -= delta * rf.a[c]
	}
	for i := range rf.cols {
		rf.g[i] -= delta * dot64(rf.h[i*rf.cols+c0:i*rf.cols+c1], rf.a[c0:c1])
	}
}

// row refits row r of q against its weights w [cols].
func (rf *refitter) row(r int, w []float32) {
	q, cols := rf.q, rf.cols
	qs := q.Q[r*cols : (r+1)*cols]
	rf.residual(r, w)
	switch q.Scheme.Kind {
	case KindW8:
		for c, v := range qs {
			rf.a[c] = float64(v)
		}
		delta, _ := rf.step(0, cols)
		if s := float64(q.Scales[r]) + delta; delta != 0 && s > 0 && s < math.MaxFloat32 {
			q.Scales[r] = float32(s)
		}
	case KindQ4:
		nb, b := q.BlocksPerRow(), q.Scheme.Block
		for range refitSweeps {
			changed := false
			for j := range nb {
				c0, c1 := j*b, min((j+1)*b, cols)
				gi := r*nb + j
				z := 0.0
				if q.Zeros != nil {
					z = float64(q.Zeros[gi])
				}
				for c := c0; c < c1; c++ {
					rf.a[c] = float64(qs[c]) - z
				}
				delta, _ := rf.step(c0, c1)
				s := float64(q.Scales[gi]) + delta
				if delta == 0 || !(s > 0 && s < math.MaxFloat32) {
					continue
				}
				q.Scales[gi] = float32(s)
				rf.move(delta, c0, c1)
				changed = changed || math.Abs(delta) > 1e-6*s
			}
			if !changed {
				break
			}
		}
	case KindLPBQ:
		nb, b := q.BlocksPerRow(), q.Scheme.Block
		codes := q.Codes[r*nb : (r+1)*nb]
		for range refitSweeps {
			changed := false
			// the row's float scale S, all codes held
			for c, v := range qs {
				rf.a[c] = float64(int32(v) * int32(codes[c/b]))
			}
			delta, _ := rf.step(0, cols)
			if s := float64(q.Scales[r]) + delta; delta != 0 && s > 0 && s < math.MaxFloat32 {
				q.Scales[r] = float32(s)
				rf.move(delta, 0, cols)
				changed = changed || math.Abs(delta) > 1e-6*s
			}
			// each block's code, S held: the best of 1..16 (the
			// objective is a convex quadratic in k, so the continuous
			// optimum rounded and clamped is the best integer)
			S := float64(q.Scales[r])
			for j := range nb {
				c0, c1 := j*b, min((j+1)*b, cols)
				for c := c0; c < c1; c++ {
					rf.a[c] = float64(qs[c]) * S
				}
				dk, aha := rf.step(c0, c1) // in code steps
				if !(aha > 0) {
					continue
				}
				k := int(codes[j])
				best := min(max(int(math.Round(float64(k)+dk)), 1), 16)
				if best == k {
					continue
				}
				codes[j] = uint8(best)
				rf.move(float64(best-k), c0, c1)
				changed = true
			}
			if !changed {
				break
			}
		}
	}
}

// refitRounds alternates RefitScales and GPTQ on the refitted grid for
// rounds rounds after a first GPTQ pass has set q's integers, and leaves
// q at the state of least output error seen (the GPTQ result if no round
// improves on it), the output error measured with the damped Hessian
// GPTQ minimizes.
func (f *GPTQFactor) refitRounds(q *Quantized, w []float32, g grid, rounds int) error {
	hd := f.damped
	bestErr, err := OutputError(q, w, hd)
	if err != nil {
		return err
	}
	best := snapshot(q)
	for range rounds {
		if err := RefitScales(q, w, hd); err != nil {
			return err
		}
		if e, _ := OutputError(q, w, hd); e < bestErr {
			bestErr, best = e, snapshot(q)
		}
		gptqRows(g, w, q.Rows, q.Cols, f.perm, f.dead, f.u)
		if e, _ := OutputError(q, w, hd); e < bestErr {
			bestErr, best = e, snapshot(q)
		}
	}
	best.restore(q)
	return nil
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
