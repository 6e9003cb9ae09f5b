package quant

import (
	"fmt"
	"math"
)

// KindQ4 is group-wise 4-bit, symmetric or asymmetric.
const KindQ4 Kind = "q4"

func init() {
	register(&SchemeInfo{
		Kind:         KindQ4,
		Rule:         "w = (float32(q) - z[g]) * s[g], q in -8..7 (z = 0) or 0..15",
		Bits:         5, // q4-g32-sym-p: a float32 scale per 32 inputs
		Blocks:       BlockSizes,
		DefaultBlock: DefaultQ4Group,
		Group:        true,
		Layout:       "q4-gG-sym-p",
		BlockPacked:  true,
		Recipe:       true,
		Tolerance:    0.12,
		check: func(s Scheme) error {
			if s.Mode != "" {
				return &RecipeError{Field: "mode", Msg: fmt.Sprintf("mode applies to lpbq only, not %s", s.Kind)}
			}
			return nil
		},
		name: func(s Scheme) string {
			out := fmt.Sprintf("q4/g%d/", s.Block)
			if s.Sym {
				out += "sym"
			} else {
				out += "asym"
			}
			if s.HQQ {
				out += "/hqq"
			}
			return out
		},
		recipe: func(s *Scheme, mode *string, sym *bool) error {
			s.Block, s.Sym = DefaultQ4Group, true
			if sym != nil {
				s.Sym = *sym
			}
			return nil
		},
		json: func(s Scheme, m map[string]any) {
			m["group"], m["sym"], m["hqq"] = s.Block, s.Sym, s.HQQ
		},
		quantize: func(w []float32, rows, cols int, s Scheme) (*Quantized, error) {
			return QuantizeQ4(w, rows, cols, Q4Options{Group: s.Block, Sym: s.Sym, HQQ: s.HQQ})
		},
		levels: q4Levels,
		round:  q4Round,
		search: q4Search,
		refit:  q4Refit,
		dequantizeRow: func(q *Quantized, r int, row []float32) {
			nb, b := q.BlocksPerRow(), q.Scheme.Block
			for c, v := range q.Q[r*q.Cols : (r+1)*q.Cols] {
				g := r*nb + c/b
				z := float32(0)
				if q.Zeros != nil {
					z = q.Zeros[g]
				}
				row[c] = (float32(v) - z) * q.Scales[g]
			}
		},
		bits: func(q *Quantized) float64 {
			return (4*q.paddedWeights() + 32*float64(len(q.Scales)+len(q.Zeros))) / q.weights()
		},
	})
}

// q4 stores a weight as 4-bit integers in groups of G inputs, one float32
// scale (and, when asymmetric, one float32 zero point) per group.
//
// Symmetric (Sym): values -8..7, zero point 0.
//
//	inv = 7 / max|w in group|              (float64)
//	s   = float32(1 / inv)                 stored scale, = amax/7
//	q   = clamp(round(w / s), -8, 7)
//	w'  = float32(q) * s
//
// The scale is amax/7, not amax/8: with amax/8 one sign of the extreme
// reaches -8 exactly but the other sign would need +8 and is clipped to 7, an
// error of a full step; which sign that is depends on the data (ggml's Q4_0
// works around it by giving the scale the sign of the extreme). amax/7 keeps
// the grid symmetric and |w - w'| <= s/2 for every weight, the same rule as
// MNN's symmetric export; -8 stays in the range so that HQQ, which shrinks
// the scale, may use it.
//
// Asymmetric (min/max): values 0..15 and a zero point z in quantized units.
//
//	inv = 15 / (max - min)                 (float64)
//	z   = round(-min * inv)                an integer before HQQ, any float after
//	s   = float32(1 / inv)
//	q   = clamp(round(w / s + float32(z)), 0, 15)
//	w'  = (float32(q) - float32(z)) * s
//
// Rounding z to an integer moves the grid by at most half a step, so
// |w - w'| <= s/2 still holds for every weight of the group. A constant
// group c != 0 uses the range [min(c, 0), max(c, 0)], so c is an end point; a
// group of zeros has s = 0 and z = 0.
//
// When G does not divide K the last group is short: its statistics cover
// only its real values (padding is not stored, and a kernel multiplies
// padded positions by zero activations), and Quantized.Padded is set.

// Q4Options selects the q4 variant.
type Q4Options struct {
	Group int  // G, inputs per group (>= 1)
	Sym   bool // symmetric -8..7 instead of min/max 0..15 with a zero point
	HQQ   bool // refine scale (Sym) or zero point (asymmetric) with HQQ
}

// QuantizeQ4 quantizes the row-major weight w [rows, cols] group-wise to 4 bits.
func QuantizeQ4(w []float32, rows, cols int, opt Q4Options) (*Quantized, error) {
	if opt.Group < 1 {
		return nil, fmt.Errorf("quant: q4: group size %d < 1", opt.Group)
	}
	if err := checkMatrix(w, rows, cols); err != nil {
		return nil, fmt.Errorf("quant: q4: %w", err)
	}
	g := opt.Group
	ng := (cols + g - 1) / g
	out := &Quantized{
		Scheme: Scheme{Kind: KindQ4, Block: g, Sym: opt.Sym, HQQ: opt.HQQ},
		Rows:   rows,
		Cols:   cols,
		Padded: !BlockDivides(cols, g),
		Q:      make([]int8, rows*cols),
		Scales: make([]float32, rows*ng),
	}
	if !opt.Sym {
		out.Zeros = make([]float32, rows*ng)
	}
	for r := range rows {
		for b := range ng {
			lo, hi := r*cols+b*g, r*cols+min((b+1)*g, cols)
			if opt.Sym {
				out.Scales[r*ng+b] = q4Sym(w[lo:hi], opt.HQQ, out.Q[lo:hi])
			} else {
				out.Scales[r*ng+b], out.Zeros[r*ng+b] = q4Asym(w[lo:hi], opt.HQQ, out.Q[lo:hi])
			}
		}
	}
	return out, nil
}

// q4Sym quantizes one symmetric group into q and returns its scale.
func q4Sym(w []float32, hqq bool, q []int8) float32 {
	amax := absMax(w)
	if amax == 0 {
		clear(q)
		return 0
	}
	inv := 7 / amax
	if hqq {
		inv = hqqSym(w, inv)
	}
	s := float32(1 / inv)
	if s == 0 {
		clear(q)
		return 0
	}
	for i, v := range w {
		q[i] = int8(roundClamp(float64(v)/float64(s), -8, 7))
	}
	return s
}

// q4Asym quantizes one min/max group into q and returns its scale and zero point.
func q4Asym(w []float32, hqq bool, q []int8) (scale, zero float32) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range w {
		lo, hi = min(lo, float64(v)), max(hi, float64(v))
	}
	if lo == hi {
		if lo == 0 {
			clear(q)
			return 0, 0
		}
		lo, hi = min(lo, 0), max(hi, 0)
	}
	inv := 15 / (hi - lo)
	z := math.RoundToEven(-lo * inv)
	if hqq {
		z = hqqAsym(w, inv, z)
	}
	s := float32(1 / inv)
	if s == 0 {
		clear(q)
		return 0, 0
	}
	z32 := float32(z)
	for i, v := range w {
		q[i] = int8(roundClamp(float64(v)/float64(s)+float64(z32), 0, 15))
	}
	return s, z32
}

// q4Levels is the range of q4's integers: -8..7 symmetric, 0..15
// asymmetric.
func q4Levels(s Scheme) (lo, hi int) {
	if s.Sym {
		return -8, 7
	}
	return 0, 15
}

// q4Round rounds weight (r, c) against its group's scale and zero
// point (grid.round).
func q4Round(q *Quantized, r, c int, w float64, lo, hi int) float64 {
	i := r*q.Cols + c
	gi := r*q.BlocksPerRow() + c/q.Scheme.Block
	s := q.Scales[gi]
	var z float32
	if q.Zeros != nil {
		z = q.Zeros[gi]
	}
	v := 0
	if s != 0 {
		v = roundClamp(w/float64(s)+float64(z), lo, hi)
	} else if !q.Scheme.Sym {
		v = int(math.Round(float64(z)))
	}
	q.Q[i] = int8(v)
	return float64((float32(v) - z) * s)
}

// q4Search is SearchGrid of a q4 weight: each symmetric group's scale among s*f, f = 1, 0.98, ..., 0.60 (asymmetric groups are left as they are).
func q4Search(q *Quantized, blockErr func(r, lo, hi int) float64) {
	if !q.Scheme.Sym {
		return
	}
	nb, B := q.BlocksPerRow(), q.Scheme.Block
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
}

// q4Refit is RefitScales of row r of a q4 weight.
func q4Refit(rf *refitter, r int, w []float32) {
	q, cols := rf.q, rf.cols
	qs := q.Q[r*cols : (r+1)*cols]
	nb, b := q.BlocksPerRow(), q.Scheme.Block
	for range refitSweeps {
		rf.residual(r, w)
		changed := false
		for j := range nb {
			c0, c1 := j*b, min((j+1)*b, cols)
			gi := r*nb + j
			var z float32
			if q.Zeros != nil {
				z = q.Zeros[gi]
			}
			for c := c0; c < c1; c++ {
				rf.a[c] = float32(qs[c]) - z
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
}
