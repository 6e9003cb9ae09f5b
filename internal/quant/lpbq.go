package quant

import (
	"fmt"
	"math"
)

// KindLPBQ is LPBQ W4, block-wise expansion.
const KindLPBQ Kind = "lpbq"

func init() {
	register(&SchemeInfo{
		Kind:         KindLPBQ,
		Rule:         "w = float32(q*k[b]) * S[n], q in -7..7, k in 1..16",
		Bits:         4.25, // lpbq-bB-p: a code byte per 32 inputs
		Blocks:       BlockSizes,
		DefaultBlock: DefaultLPBQBlock,
		Layout:       "lpbq-bB-p",
		BlockPacked:  true,
		Recipe:       true,
		Tolerance:    0.12,
		check: func(s Scheme) error {
			if s.Mode != "" && s.Mode != LPBQRefined && s.Mode != LPBQReference {
				return &RecipeError{Field: "mode", Msg: fmt.Sprintf("unknown lpbq mode %q (want refined or reference)", string(s.Mode))}
			}
			return noHQQ(s)
		},
		name: func(s Scheme) string {
			m := s.Mode
			if m == "" {
				m = LPBQRefined
			}
			return fmt.Sprintf("lpbq/b%d/%s", s.Block, m)
		},
		recipe: func(s *Scheme, mode *string, sym *bool) error {
			s.Block, s.Mode = DefaultLPBQBlock, LPBQRefined
			if mode != nil && *mode != "" { // "" is refined, as omitted
				s.Mode = LPBQMode(*mode)
			}
			if sym != nil && !*sym {
				return &RecipeError{Field: "sym", Msg: "lpbq is always symmetric"}
			}
			return nil
		},
		json: func(s Scheme, m map[string]any) {
			mode := s.Mode
			if mode == "" {
				mode = LPBQRefined
			}
			m["block"], m["mode"] = s.Block, string(mode)
		},
		quantize: func(w []float32, rows, cols int, s Scheme) (*Quantized, error) {
			return QuantizeLPBQ(w, rows, cols, s.Block, s.Mode)
		},
		levels:        func(Scheme) (int, int) { return -7, 7 },
		round:         lpbqRound,
		search:        lpbqSearch,
		refit:         lpbqRefit,
		dequantizeRow: lpbqDequantizeRow,
		bits: func(q *Quantized) float64 {
			return (4*q.paddedWeights() + 4*float64(len(q.Codes)) + 32*float64(q.Rows)) / q.weights()
		},
	})
}

// LPBQ (low-power block-wise quantization, QNN's "block-wise expansion") stores
// a W4 weight as int4 values, one 4-bit code per block of B inputs and one
// float scale per output row, so a kernel can expand each block to int8
// (q*k) and apply a single per-channel scale:
//
//	s[b]  = max|w in block b| / 7                      block scale (float64)
//	S     = float32(max_b s[b] / 16)                   per-row scale, stored
//	k[b]  = clamp(round(s[b] / S), 1, 16)              block code, stored
//	q     = clamp(round(w / d), -7, 7)                 int4 value, stored
//	w'    = float32(q*k[b]) * S                        dequantized weight
//
// where d = s[b] in LPBQReference mode (the published rule, which rounds q
// against the block scale before it is itself rounded to k*S) and d = k[b]*S
// in LPBQRefined mode (the default). Refined picks, for every weight, the
// nearest point of the grid {-7..7}*k*S that both modes dequantize on, so its
// error is never larger than Reference's, element by element; the difference is
// largest for blocks whose k was rounded far from s/S (small k).
//
// Arithmetic: s and the division w/d are float64 from the float32 inputs;
// S is rounded to float32 once, and k and refined q use that stored S (d =
// float64(k)*float64(S), exact). round is half to even.
//
// Edge cases: a block of zeros has s = 0, k = 1 and q = 0; a row of zeros has
// S = 0, k = 1 and q = 0. A row whose S underflows float32 dequantizes to 0.
// When B does not divide K the last block is short, exactly as if padded with
// zeros (zeros change neither max|w| nor any q), and Quantized.Padded is set.

// QuantizeLPBQ quantizes the row-major weight w [rows, cols] with LPBQ blocks
// of block inputs; mode "" means LPBQRefined. Any block >= 1 is accepted here;
// recipes restrict it to BlockSizes.
func QuantizeLPBQ(w []float32, rows, cols, block int, mode LPBQMode) (*Quantized, error) {
	if block < 1 {
		return nil, fmt.Errorf("quant: lpbq: block size %d < 1", block)
	}
	switch mode {
	case "":
		mode = LPBQRefined
	case LPBQRefined, LPBQReference:
	default:
		return nil, fmt.Errorf("quant: lpbq: unknown mode %q", string(mode))
	}
	if err := checkMatrix(w, rows, cols); err != nil {
		return nil, fmt.Errorf("quant: lpbq: %w", err)
	}
	nb := (cols + block - 1) / block
	out := &Quantized{
		Scheme: Scheme{Kind: KindLPBQ, Block: block, Mode: mode},
		Rows:   rows,
		Cols:   cols,
		Padded: !BlockDivides(cols, block),
		Q:      make([]int8, rows*cols),
		Codes:  make([]uint8, rows*nb),
		Scales: make([]float32, rows),
	}
	s := make([]float64, nb) // block scales of the current row
	for r := range rows {
		lpbqRow(w[r*cols:(r+1)*cols], block, 7, mode, s,
			out.Q[r*cols:(r+1)*cols], out.Codes[r*nb:(r+1)*nb], &out.Scales[r])
	}
	return out, nil
}

// lpbqRow quantizes one row: w [K] -> q [K], codes [nb], *scale = S,
// with integers in -qmax..qmax (7 for lpbq, 15 for lpbq5). s [nb] is
// scratch for the block scales.
func lpbqRow(w []float32, block, qmax int, mode LPBQMode, s []float64, q []int8, codes []uint8, scale *float32) {
	var smax float64
	for b := range s {
		blk := w[b*block : min((b+1)*block, len(w))]
		s[b] = absMax(blk) / float64(qmax)
		smax = max(smax, s[b])
	}
	S32 := float32(smax / 16)
	S := float64(S32)
	*scale = S32
	for b := range s {
		k := 1
		if S > 0 {
			k = roundClamp(s[b]/S, 1, 16)
		}
		codes[b] = uint8(k)
		d := s[b]
		if mode == LPBQRefined {
			d = float64(k) * S
		}
		lo, hi := b*block, min((b+1)*block, len(w))
		if d == 0 {
			clear(q[lo:hi])
			continue
		}
		for i := lo; i < hi; i++ {
			q[i] = int8(roundClamp(float64(w[i])/d, -qmax, qmax))
		}
	}
}

// lpbqDequantizeRow writes row r of a lpbq or lpbq5 weight into row [K]:
// w = float32(q*k[b]) * S.
func lpbqDequantizeRow(q *Quantized, r int, row []float32) {
	nb, b := q.BlocksPerRow(), q.Scheme.Block
	s := q.Scales[r]
	for c, v := range q.Q[r*q.Cols : (r+1)*q.Cols] {
		k := int32(q.Codes[r*nb+c/b])
		row[c] = float32(int32(v)*k) * s
	}
}

// lpbqRound rounds weight (r, c) against its block's k*S (grid.round).
func lpbqRound(q *Quantized, r, c int, w float64, lo, hi int) float64 {
	i := r*q.Cols + c
	k := int32(q.Codes[r*q.BlocksPerRow()+c/q.Scheme.Block])
	step := float64(k) * float64(q.Scales[r])
	v := 0
	if step != 0 {
		v = roundClamp(w/step, lo, hi)
	}
	q.Q[i] = int8(v)
	return float64(float32(int32(v)*k) * q.Scales[r])
}

// lpbqSearch is SearchGrid of a lpbq weight: each block's code k in 1..16, the row scale held.
func lpbqSearch(q *Quantized, blockErr func(r, lo, hi int) float64) {
	nb, B := q.BlocksPerRow(), q.Scheme.Block
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
}

// lpbqRefit is RefitScales of row r of a lpbq weight.
func lpbqRefit(rf *refitter, r int, w []float32) {
	q, cols := rf.q, rf.cols
	qs := q.Q[r*cols : (r+1)*cols]
	nb, b := q.BlocksPerRow(), q.Scheme.Block
	codes := q.Codes[r*nb : (r+1)*nb]
	for range refitSweeps {
		rf.residual(r, w)
		changed := false
		// the row's float scale S, all codes held
		for c, v := range qs {
			rf.a[c] = float32(int32(v) * int32(codes[c/b]))
		}
		delta := rf.rowStep()
		if s := float64(q.Scales[r]) + delta; delta != 0 && s > 0 && s < math.MaxFloat32 {
			q.Scales[r] = float32(s)
			rf.rowMove(delta)
			changed = changed || math.Abs(delta) > 1e-6*s
		}
		// each block's code, S held: the best of 1..16 (the
		// objective is a convex quadratic in k, so the continuous
		// optimum rounded and clamped is the best integer)
		S := q.Scales[r]
		for j := range nb {
			c0, c1 := j*b, min((j+1)*b, cols)
			for c := c0; c < c1; c++ {
				rf.a[c] = float32(qs[c]) * S
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
