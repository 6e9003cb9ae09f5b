package quant

import "math"

// grid is the per-weight quantization grid of a Quantized, with its
// parameters (scales, codes, zero points) fixed: weight (r, c) may take
// the values (q - zero) * step for integer q in [lo, hi].
type grid struct {
	q      *Quantized
	lo, hi int
}

// gridOf returns the grid of q; ok is false for f16 (no integer grid).
func gridOf(q *Quantized) (grid, bool) {
	switch q.Scheme.Kind {
	case KindLPBQ:
		return grid{q, -7, 7}, true
	case KindW8:
		return grid{q, -127, 127}, true
	case KindQ4:
		if q.Scheme.Sym {
			return grid{q, -8, 7}, true
		}
		return grid{q, 0, 15}, true
	}
	return grid{}, false
}

// round sets the integer of weight (r, c) to the grid point nearest w and
// returns the value it dequantizes to (as Quantized.Dequantize computes it).
func (g grid) round(r, c int, w float64) float64 {
	q := g.q
	i := r*q.Cols + c
	switch q.Scheme.Kind {
	case KindLPBQ:
		k := int32(q.Codes[r*q.BlocksPerRow()+c/q.Scheme.Block])
		step := float64(k) * float64(q.Scales[r])
		v := 0
		if step != 0 {
			v = roundClamp(w/step, g.lo, g.hi)
		}
		q.Q[i] = int8(v)
		return float64(float32(int32(v)*k) * q.Scales[r])
	case KindW8:
		s := q.Scales[r]
		v := 0
		if s != 0 {
			v = roundClamp(w/float64(s), g.lo, g.hi)
		}
		q.Q[i] = int8(v)
		return float64(float32(v) * s)
	default: // q4
		gi := r*q.BlocksPerRow() + c/q.Scheme.Block
		s := q.Scales[gi]
		var z float32
		if q.Zeros != nil {
			z = q.Zeros[gi]
		}
		v := 0
		if s != 0 {
			v = roundClamp(w/float64(s)+float64(z), g.lo, g.hi)
		} else if !q.Scheme.Sym {
			v = int(math.Round(float64(z)))
		}
		q.Q[i] = int8(v)
		return float64((float32(v) - z) * s)
	}
}
