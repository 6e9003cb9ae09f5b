package quant

import "fmt"

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
		dequantizeRow: func(q *Quantized, r int, row []float32) {
			nb, b := q.BlocksPerRow(), q.Scheme.Block
			s := q.Scales[r]
			for c, v := range q.Q[r*q.Cols : (r+1)*q.Cols] {
				k := int32(q.Codes[r*nb+c/b])
				row[c] = float32(int32(v)*k) * s
			}
		},
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
		lpbqRow(w[r*cols:(r+1)*cols], block, mode, s,
			out.Q[r*cols:(r+1)*cols], out.Codes[r*nb:(r+1)*nb], &out.Scales[r])
	}
	return out, nil
}

// lpbqRow quantizes one row: w [K] -> q [K], codes [nb], *scale = S.
// s [nb] is scratch for the block scales.
func lpbqRow(w []float32, block int, mode LPBQMode, s []float64, q []int8, codes []uint8, scale *float32) {
	var smax float64
	for b := range s {
		blk := w[b*block : min((b+1)*block, len(w))]
		s[b] = absMax(blk) / 7
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
			q[i] = int8(roundClamp(float64(w[i])/d, -7, 7))
		}
	}
}
