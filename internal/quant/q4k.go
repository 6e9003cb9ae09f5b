package quant

import (
	"fmt"
	"math"
)

// Q4K stores a weight in ggml's Q4_K form: super-blocks of 256 inputs
// along a row, each with a float scale d and minimum scale dmin and 8
// groups of 32, each group with a 6-bit scale sc and minimum m:
//
//	w' = float32(d*float32(sc))*float32(q) - float32(dmin*float32(m))     q in 0..15
//
// Weights read from GGUF Q4_K blocks keep them exactly (compile lays them
// out as q4k-p, 4.75 bits a weight); recipes do not choose q4k.
//
// The reference quantizer, per group: the range [min(w, 0), max(w, 0)],
// its step (max - min)/15 and its minimum -min; d and dmin map the
// super-block's largest step and minimum to 63, sc and m are the rounded
// ratios, and every value is rounded against the group's scale and
// minimum as dequantization computes them. d and dmin stay float32
// (ggml rounds them to binary16).
const Q4KSuper = 256

// q4kGroup is the number of inputs of a Q4_K group.
const q4kGroup = 32

// KindQ4K is 4-bit in ggml's Q4_K super-blocks.
const KindQ4K Kind = "q4k"

func init() {
	register(&SchemeInfo{
		Kind:         KindQ4K,
		Rule:         "w = float32(d*sc)*float32(q) - float32(dmin*m), q in 0..15",
		Bits:         4.75, // q4k-p: a 48-byte record per 512 inputs
		DefaultBlock: q4kGroup,
		Super:        Q4KSuper,
		Layout:       "q4k-p",
		GGML:         "Q4_K",
		Tolerance:    0.12,
		check:        noModeNoHQQ,
		name:         kindName,
		json:         noFields,
		quantize: func(w []float32, rows, cols int, _ Scheme) (*Quantized, error) {
			return QuantizeQ4K(w, rows, cols)
		},
		dequantizeRow: func(q *Quantized, r int, row []float32) {
			nb, b, k4 := q.BlocksPerRow(), q.Scheme.Block, q.K4
			for c, v := range q.Q[r*q.Cols : (r+1)*q.Cols] {
				g := r*nb + c/b
				scale, minimum := k4.Scale(g)
				row[c] = float32(scale*float32(v)) - minimum // rounded as ggml rounds
			}
		},
		bits: func(q *Quantized) float64 {
			return (4*q.weights() + 12*float64(len(q.K4.Sc)) + 64*float64(len(q.K4.D))) / q.weights()
		},
	})
}

// Q4KBlocks are a q4k weight's Q4_K super-blocks (8 groups of 32 share a
// D and DMin; each group has a 6-bit scale Sc and minimum M):
//
//	w'[n,c] = D[s]*float32(Sc[g])*float32(Q) - DMin[s]*float32(M[g])
//
// for g = n*ng + c/32 and s = g/8.
type Q4KBlocks struct {
	Sc, M   []uint8   // [N*ng]
	D, DMin []float32 // [N*ng/8]
}

// Scale returns group g's scale d*sc and minimum term dmin*m, each one
// float32 product as ggml computes it.
func (k *Q4KBlocks) Scale(g int) (scale, minimum float32) {
	return float32(k.D[g/8] * float32(k.Sc[g])), float32(k.DMin[g/8] * float32(k.M[g]))
}

// NewQ4K allocates a q4k weight [rows, cols] (cols a multiple of 256)
// with its codes, restated scales and zero points, and super-blocks.
func NewQ4K(rows, cols int) *Quantized {
	ng := rows * cols / q4kGroup
	return &Quantized{Scheme: Scheme{Kind: KindQ4K, Block: q4kGroup}, Rows: rows, Cols: cols,
		Q: make([]int8, rows*cols), Scales: make([]float32, ng), Zeros: make([]float32, ng),
		K4: &Q4KBlocks{Sc: make([]uint8, ng), M: make([]uint8, ng), D: make([]float32, ng/8), DMin: make([]float32, ng/8)}}
}

// RestateQ4K sets group g's scale and zero point (Quantized.Scales,
// Zeros) from its super-block parts, once its codes are in q.Q: the
// values scale*u - min become s*(u - z). A group with scale 0 is the
// constant -min: its codes become 0 with s = min and z = 1.
func (q *Quantized) RestateQ4K(g int) {
	scale, minimum := q.K4.D[g/8]*float32(q.K4.Sc[g]), q.K4.DMin[g/8]*float32(q.K4.M[g])
	if scale == 0 {
		clear(q.Q[g*q4kGroup : (g+1)*q4kGroup])
		q.Scales[g], q.Zeros[g] = minimum, 1
		return
	}
	q.Scales[g], q.Zeros[g] = scale, minimum/scale
}

// QuantizeQ4K quantizes the row-major weight w [rows, cols] to Q4_K
// super-blocks by the reference rule above.
func QuantizeQ4K(w []float32, rows, cols int) (*Quantized, error) {
	if err := checkMatrix(w, rows, cols); err != nil {
		return nil, fmt.Errorf("quant: q4k: %w", err)
	}
	if cols%Q4KSuper != 0 {
		return nil, fmt.Errorf("quant: q4k: %d columns are not a multiple of %d", cols, Q4KSuper)
	}
	q := NewQ4K(rows, cols)
	k4 := q.K4
	var step, low [8]float64
	for sb := range rows * cols / Q4KSuper {
		var maxStep, maxLow float64
		for j := range 8 {
			g := w[(8*sb+j)*q4kGroup : (8*sb+j+1)*q4kGroup]
			lo, hi := 0.0, 0.0
			for _, v := range g {
				lo, hi = min(lo, float64(v)), max(hi, float64(v))
			}
			step[j], low[j] = (hi-lo)/15, -lo
			maxStep, maxLow = max(maxStep, step[j]), max(maxLow, low[j])
		}
		d, dmin := float32(maxStep/63), float32(maxLow/63)
		k4.D[sb], k4.DMin[sb] = d, dmin
		for j := range 8 {
			g := 8*sb + j
			if d != 0 {
				k4.Sc[g] = uint8(roundClamp(step[j]/float64(d), 0, 63))
			}
			if dmin != 0 {
				k4.M[g] = uint8(roundClamp(low[j]/float64(dmin), 0, 63))
			}
			scale, minimum := k4.Scale(g)
			if scale != 0 {
				for i, v := range w[g*q4kGroup : (g+1)*q4kGroup] {
					q.Q[g*q4kGroup+i] = int8(roundClamp((float64(v)+float64(minimum))/float64(scale), 0, 15))
				}
			}
			q.RestateQ4K(g)
		}
	}
	for i, s := range q.Scales {
		if math.IsInf(float64(s), 0) || math.IsInf(float64(q.Zeros[i]), 0) {
			return nil, fmt.Errorf("quant: q4k: group %d of row %d: scale out of float32 range", i%(cols/q4kGroup), i/(cols/q4kGroup))
		}
	}
	return q, nil
}
