package quant

import (
	"fmt"
	"math"
)

// KindW8 is int8 per output channel, symmetric.
const KindW8 Kind = "w8"

func init() {
	register(&SchemeInfo{
		Kind:        KindW8,
		Rule:        "w = float32(q) * s[n], q in -127..127",
		Bits:        8,
		Layout:      "w8-rows-p",
		BlockPacked: true,
		Recipe:      true,
		Tolerance:   0.01,
		check:       noModeNoHQQ,
		name:        kindName,
		recipe: func(s *Scheme, mode *string, sym *bool) error {
			if sym != nil && !*sym {
				return &RecipeError{Field: "sym", Msg: "w8 is always symmetric"}
			}
			return nil
		},
		json: noFields,
		quantize: func(w []float32, rows, cols int, _ Scheme) (*Quantized, error) {
			return QuantizeW8(w, rows, cols)
		},
		levels: func(Scheme) (int, int) { return -127, 127 },
		round:  w8Round,
		search: w8Search,
		refit:  w8Refit,
		dequantizeRow: func(q *Quantized, r int, row []float32) {
			s := q.Scales[r]
			for c, v := range q.Q[r*q.Cols : (r+1)*q.Cols] {
				row[c] = float32(v) * s
			}
		},
		bits: func(q *Quantized) float64 { return (8*q.weights() + 32*float64(q.Rows)) / q.weights() },
	})
}

// W8 stores a weight as int8 with one symmetric scale per output row:
//
//	s  = float32(max|w in row| / 127)      (float64 division, stored float32)
//	q  = clamp(round(w / s), -127, 127)    (against the stored s; half to even)
//	w' = float32(q) * s
//
// so |w - w'| <= s/2 for every weight. -128 is never used, keeping the range
// symmetric. A row of zeros has s = 0 and q = 0.

// QuantizeW8 quantizes the row-major weight w [rows, cols] to W8.
func QuantizeW8(w []float32, rows, cols int) (*Quantized, error) {
	if err := checkMatrix(w, rows, cols); err != nil {
		return nil, fmt.Errorf("quant: w8: %w", err)
	}
	out := &Quantized{
		Scheme: Scheme{Kind: KindW8},
		Rows:   rows,
		Cols:   cols,
		Q:      make([]int8, rows*cols),
		Scales: make([]float32, rows),
	}
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		s := float32(absMax(row) / 127)
		out.Scales[r] = s
		if s == 0 {
			continue
		}
		q := out.Q[r*cols : (r+1)*cols]
		for i, v := range row {
			q[i] = int8(roundClamp(float64(v)/float64(s), -127, 127))
		}
	}
	return out, nil
}

// w8Round rounds weight (r, c) against its row's scale (grid.round).
func w8Round(q *Quantized, r, c int, w float64, lo, hi int) float64 {
	i := r*q.Cols + c
	s := q.Scales[r]
	v := 0
	if s != 0 {
		v = roundClamp(w/float64(s), lo, hi)
	}
	q.Q[i] = int8(v)
	return float64(float32(v) * s)
}

// w8Search is SearchGrid of a w8 weight: each row's scale among s*f, f = 1, 0.99, ..., 0.80.
func w8Search(q *Quantized, blockErr func(r, lo, hi int) float64) {
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

// w8Refit is RefitScales of row r of a w8 weight.
func w8Refit(rf *refitter, r int, w []float32) {
	q, cols := rf.q, rf.cols
	qs := q.Q[r*cols : (r+1)*cols]
	rf.residual(r, w)
	for c, v := range qs {
		rf.a[c] = float32(v)
	}
	delta := rf.rowStep()
	if s := float64(q.Scales[r]) + delta; delta != 0 && s > 0 && s < math.MaxFloat32 {
		q.Scales[r] = float32(s)
	}
}
