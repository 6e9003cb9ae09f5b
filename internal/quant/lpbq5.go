package quant

import (
	"fmt"
	"math"
)

// KindLPBQ5 is LPBQ with 5-bit integers: blocks of 32 inputs, a 4-bit
// code per block and a float scale per row, as lpbq, with q in -15..15.
const KindLPBQ5 Kind = "lpbq5"

// LPBQ5Block is lpbq5's only block size, the int8 activation block of
// the products.
const LPBQ5Block = 32

func init() {
	register(&SchemeInfo{
		Kind:         KindLPBQ5,
		Rule:         "w = float32(q*k[b]) * S[n], q in -15..15, k in 1..16",
		Bits:         5.25, // lpbq5-p: 5 bits a weight, a code byte per 32 inputs
		Blocks:       []int{LPBQ5Block},
		DefaultBlock: LPBQ5Block,
		Layout:       "lpbq5-p",
		BlockPacked:  true,
		Recipe:       true,
		Tolerance:    0.06,
		check:        noModeNoHQQ,
		name:         func(s Scheme) string { return fmt.Sprintf("lpbq5/b%d", s.Block) },
		recipe: func(s *Scheme, mode *string, sym *bool) error {
			s.Block = LPBQ5Block
			if mode != nil && *mode != "" {
				return &RecipeError{Field: "mode", Msg: "mode applies to lpbq only, not lpbq5"}
			}
			if sym != nil && !*sym {
				return &RecipeError{Field: "sym", Msg: "lpbq5 is always symmetric"}
			}
			return nil
		},
		json: func(s Scheme, m map[string]any) { m["block"] = s.Block },
		quantize: func(w []float32, rows, cols int, s Scheme) (*Quantized, error) {
			return QuantizeLPBQ5(w, rows, cols)
		},
		levels:        func(Scheme) (int, int) { return -15, 15 },
		round:         lpbqRound,
		search:        lpbqSearch,
		refit:         lpbqRefit,
		dequantizeRow: lpbqDequantizeRow,
		bits: func(q *Quantized) float64 {
			return (5*q.paddedWeights() + 4*float64(len(q.Codes)) + 32*float64(q.Rows)) / q.weights()
		},
	})
}

// QuantizeLPBQ5 quantizes the row-major weight w [rows, cols] as lpbq5:
// integers q in -15..15 in blocks of LPBQ5Block inputs, a code k in
// 1..16 per block and a float32 scale S per row, w' = float32(q*k)*S.
// Each row's grid is searched for the least squared error sum (w - w')^2:
//
//  1. each block's own best scale d: for the candidate steps
//     max|w|/(15 + j/8), j = -8..8, the integers rounded and clipped to
//     -15..15, then d fitted by least squares to those integers; the d of
//     least error is kept (llama.cpp's make_qkx2 searches its Q4_K scales
//     the same way);
//  2. the row scale S among max(d)/16 * f, f = 0.84, 0.86, ..., 1.16, and
//     LPBQ's plain rule (S = max|w|/15/16 over the row, k = round(s/S) with
//     s = max|w in block|/15), each block taking for a candidate S the
//     better of the two codes around d/S;
//  3. for the S of least row error, each block's code anew among all of
//     1..16.
//
// The integers are always rounded to nearest against k*S (LPBQ's refined
// rule), so the result is never worse than the plain rule's on any row,
// and given its S no block's error is lowered by any other code. The last
// block is short (Quantized.Padded set) when 32 does not divide cols.
// Against lpbq's 4.25 bits a weight in the packed layouts it takes 5.25.
func QuantizeLPBQ5(w []float32, rows, cols int) (*Quantized, error) {
	if err := checkMatrix(w, rows, cols); err != nil {
		return nil, fmt.Errorf("quant: lpbq5: %w", err)
	}
	const block = LPBQ5Block
	nb := (cols + block - 1) / block
	out := &Quantized{
		Scheme: Scheme{Kind: KindLPBQ5, Block: block},
		Rows:   rows,
		Cols:   cols,
		Padded: !BlockDivides(cols, block),
		Q:      make([]int8, rows*cols),
		Codes:  make([]uint8, rows*nb),
		Scales: make([]float32, rows),
	}
	s := make([]float64, nb)
	for r := range rows {
		lpbq5Row(w[r*cols:(r+1)*cols], s, out.Q[r*cols:(r+1)*cols], out.Codes[r*nb:(r+1)*nb], &out.Scales[r])
	}
	return out, nil
}

// lpbq5Max is the largest magnitude of an lpbq5 integer.
const lpbq5Max = 15

// lpbq5Row quantizes one row by the search of QuantizeLPBQ5: w [K] -> q
// [K], codes [nb], *scale = S. d [nb] is scratch.
func lpbq5Row(w []float32, d []float64, q []int8, codes []uint8, scale *float32) {
	const block = LPBQ5Block
	blk := func(b int) []float32 { return w[b*block : min((b+1)*block, len(w))] }
	// the plain rule, the search's first candidate
	lpbqRow(w, block, lpbq5Max, LPBQRefined, d, q, codes, scale)
	bestS := *scale
	bestCodes := append([]uint8(nil), codes...)
	bestE := 0.0
	for b := range d {
		bestE += lpbq5BlockErr(blk(b), int(codes[b]), bestS)
	}
	var dmax float64
	for b := range d {
		d[b] = lpbq5BlockScale(blk(b))
		dmax = max(dmax, d[b])
	}
	if dmax > 0 && bestE > 0 {
		for i := range 17 {
			f := 0.84 + 0.02*float64(i)
			S := float32(dmax / 16 * f)
			if S == 0 || math.IsInf(float64(S), 0) {
				continue
			}
			var e float64
			for b := range d {
				k0 := min(max(int(math.Floor(d[b]/float64(S))), 1), 16)
				e0 := lpbq5BlockErr(blk(b), k0, S)
				if k1 := min(k0+1, 16); k1 != k0 {
					if e1 := lpbq5BlockErr(blk(b), k1, S); e1 < e0 {
						k0, e0 = k1, e1
					}
				}
				codes[b] = uint8(k0)
				e += e0
				if e >= bestE {
					break
				}
			}
			if e < bestE {
				bestE, bestS = e, S
				copy(bestCodes, codes)
			}
		}
	}
	*scale = bestS
	copy(codes, bestCodes)
	for b := range d {
		x := blk(b)
		best, be := codes[b], lpbq5BlockErr(x, int(codes[b]), bestS)
		for k := 1; k <= 16; k++ {
			if e := lpbq5BlockErr(x, k, bestS); e < be {
				best, be = uint8(k), e
			}
		}
		codes[b] = best
		step := float64(best) * float64(bestS)
		out := q[b*block : b*block+len(x)]
		for i, v := range x {
			out[i] = 0
			if step != 0 {
				out[i] = int8(roundClamp(float64(v)/step, -lpbq5Max, lpbq5Max))
			}
		}
	}
}

// lpbq5BlockErr is the squared error of the block x rounded to nearest
// against k*S, as the weights dequantize (float32(q*k)*S).
func lpbq5BlockErr(x []float32, k int, S float32) float64 {
	step := float64(k) * float64(S)
	var e float64
	for _, v := range x {
		var dq float64
		if step != 0 {
			n := roundClamp(float64(v)/step, -lpbq5Max, lpbq5Max)
			dq = float64(float32(int32(n)*int32(k)) * S)
		}
		e += (float64(v) - dq) * (float64(v) - dq)
	}
	return e
}

// lpbq5BlockScale is the block's own best scale: of the steps
// amax/(15 + j/8), j = -8..8, the least-squares scale of the integers
// each rounds to, the one of least squared error.
func lpbq5BlockScale(x []float32) float64 {
	amax := absMax(x)
	if amax == 0 {
		return 0
	}
	best, bestE := amax/lpbq5Max, math.Inf(1)
	for j := -8; j <= 8; j++ {
		inv := (lpbq5Max + float64(j)/8) / amax
		var sxq, sqq float64
		for _, v := range x {
			n := float64(roundClamp(float64(v)*inv, -lpbq5Max, lpbq5Max))
			sxq += float64(v) * n
			sqq += n * n
		}
		if sqq == 0 || sxq <= 0 {
			continue
		}
		d := sxq / sqq
		var e float64
		for _, v := range x {
			n := float64(roundClamp(float64(v)*inv, -lpbq5Max, lpbq5Max))
			e += (float64(v) - d*n) * (float64(v) - d*n)
		}
		if e < bestE {
			best, bestE = d, e
		}
	}
	return best
}
