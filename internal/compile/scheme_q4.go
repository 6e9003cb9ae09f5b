package compile

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// q4 weights take layout q4-gG-sym or q4-gG-asym, packed with "-p".
// GGUF Q4_0 and Q4_1 blocks become q4 with groups of 32 and a float32
// scale (and zero point) per group: Q4_0 exactly, Q4_1 up to the
// float32 rounding of z = m/d.
func init() {
	registerScheme(&weightScheme{
		kind: quant.KindQ4,
		layout: func(w Weight, shape []int64, pack bool) (plan.WeightLayout, encoder, bool) {
			s := w.Quantized.Scheme
			return blockLayout(plan.WeightLayout{Kind: plan.LayoutQ4, Block: s.Block, Sym: s.Sym}, shape, pack, encodeQ4Packed)
		},
		gguf: []ggufBlocks{
			{typ: gguf.TypeQ4_0, scheme: "q4/g32/sym", convert: q4FromQ4_0},
			{typ: gguf.TypeQ4_1, scheme: "q4/g32/asym", convert: q4FromQ4_1},
		},
	})
}

// encodeQ4Packed lays q out as q4-gG-sym-p or q4-gG-asym-p: 4-bit codes
// (q+8 symmetric, q asymmetric), each group's scale and zero point
// repeated over its blocks of plan.PackBlock.
func encodeQ4Packed(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, b, srcBlocks, per, err := packedBlocks(l, q, shape, true)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	offset := 8
	if !l.Sym {
		offset = 0
	}
	if err := packRows(b, q.Q, N, K, offset); err != nil {
		return nil, err
	}
	putFloats(b[p.Scales:], spreadBlocks(q.Scales, N, K, srcBlocks, per))
	if p.Zeros >= 0 {
		if len(q.Zeros) != N*srcBlocks {
			return nil, fmt.Errorf("%d zero points, %s needs %d", len(q.Zeros), l.Tag(), N*srcBlocks)
		}
		putFloats(b[p.Zeros:], spreadBlocks(q.Zeros, N, K, srcBlocks, per))
	}
	return b, nil
}

// newQ4 allocates a q4 weight with groups of 32.
func newQ4(rows, cols int, sym bool) *quant.Quantized {
	q := &quant.Quantized{Scheme: quant.Scheme{Kind: quant.KindQ4, Block: 32, Sym: sym},
		Rows: rows, Cols: cols, Q: make([]int8, rows*cols), Scales: make([]float32, rows*cols/32)}
	if !sym {
		q.Zeros = make([]float32, rows*cols/32)
	}
	return q
}

// setAffine sets group g of q, whose values are scale*u - min for the
// codes u (0..15) already in q.Q, as s*(u - z). A group with scale 0 is
// the constant -min: its codes become 0 with s = min and z = 1.
func setAffine(q *quant.Quantized, g int, scale, min float32) {
	if scale == 0 {
		clear(q.Q[g*32 : (g+1)*32])
		q.Scales[g], q.Zeros[g] = min, 1
		return
	}
	q.Scales[g], q.Zeros[g] = scale, min/scale
}

// q4FromQ4_0 re-lays Q4_0 blocks (d f16, 16 bytes of codes: value j in
// the low nibble of byte j, value j+16 in the high one; x = d*(u - 8)).
func q4FromQ4_0(raw []byte, rows, cols int) (*quant.Quantized, error) {
	q := newQ4(rows, cols, true)
	for g := range rows * cols / 32 {
		blk := raw[g*18 : (g+1)*18]
		q.Scales[g] = half(blk)
		out := q.Q[g*32 : (g+1)*32]
		for j, b := range blk[2:18] {
			out[j], out[j+16] = int8(b&15)-8, int8(b>>4)-8
		}
	}
	return q, nil
}

// q4FromQ4_1 re-lays Q4_1 blocks (d f16, m f16, 16 bytes of codes as
// Q4_0; x = d*u + m).
func q4FromQ4_1(raw []byte, rows, cols int) (*quant.Quantized, error) {
	q := newQ4(rows, cols, false)
	for g := range rows * cols / 32 {
		blk := raw[g*20 : (g+1)*20]
		out := q.Q[g*32 : (g+1)*32]
		for j, b := range blk[4:20] {
			out[j], out[j+16] = int8(b&15), int8(b>>4)
		}
		setAffine(q, g, half(blk), -half(blk[2:]))
	}
	return q, nil
}
