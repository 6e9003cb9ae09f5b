package compile

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// q4k weights (GGUF Q4_K blocks, kept as they are) take layout q4k-p:
// 4.75 bits a weight, exactly ggml's values. Unpacked, they are
// q4-g32-asym, their super-blocks restated per group.
func init() {
	registerScheme(&weightScheme{
		kind: quant.KindQ4K,
		layout: func(w Weight, shape []int64, pack bool) (plan.WeightLayout, encoder, bool) {
			k4 := plan.WeightLayout{Kind: plan.LayoutQ4K, Block: plan.PackBlock, Packed: true}
			if pack && len(shape) == 2 && k4.CanPack(shape[1]) {
				return k4, encodeQ4K, true
			}
			return blockLayout(plan.WeightLayout{Kind: plan.LayoutQ4, Block: w.Quantized.Scheme.Block}, shape, pack, encodeQ4Packed)
		},
		gguf: []ggufBlocks{{typ: gguf.TypeQ4_K, scheme: "q4k", convert: q4kFromQ4_K}},
	})
}

// encodeQ4K lays out q's Q4_K super-blocks (q.K4) as layout q4k-p: the
// 4-bit codes packed as the other packed layouts pack them, then per row
// a record of 16 groups' 6-bit scales and minimums and their two
// super-blocks' d and dmin (kernel.Q4KChunk).
func encodeQ4K(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, err := partsOf(l, q, shape)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	ng, k4 := K/plan.PackBlock, q.K4
	if len(q.Q) != N*K || len(k4.Sc) != N*ng || len(k4.M) != N*ng || len(k4.D) != N*ng/8 || len(k4.DMin) != N*ng/8 {
		return nil, fmt.Errorf("%d integers, %d scales, %d minimums and %d super-blocks do not fit %s of [%d, %d]",
			len(q.Q), len(k4.Sc), len(k4.M), len(k4.D), l.Tag(), N, K)
	}
	b := make([]byte, p.Size)
	if err := packRows(b, q.Q, N, K, 0); err != nil {
		return nil, err
	}
	nc := (ng + 15) / 16
	rec := b[p.Scales:]
	for n := range N {
		for c := range nc {
			g0, g1 := n*ng+16*c, n*ng+min(16*c+16, ng)
			kernel.Q4KChunk(rec[(n*nc+c)*kernel.Q4KChunkBytes:], k4.Sc[g0:g1], k4.M[g0:g1], k4.D[g0/8:(g1+7)/8], k4.DMin[g0/8:(g1+7)/8])
		}
	}
	return b, nil
}

// q4kFromQ4_K re-lays Q4_K super-blocks (d f16, dmin f16, 12 bytes of
// 6-bit scales and mins, 128 bytes of codes): 8 groups of 32 with
// x = d*sc*u - dmin*m, groups 2i and 2i+1 in the low and high nibbles of
// bytes 32i..32i+31. The super-blocks' own parts are kept
// (Quantized.K4) and restated per group (Scales, Zeros).
func q4kFromQ4_K(raw []byte, rows, cols int) (*quant.Quantized, error) {
	q := quant.NewQ4K(rows, cols)
	k4 := q.K4
	for sb := range rows * cols / 256 {
		blk := raw[sb*144 : (sb+1)*144]
		d, dmin := half(blk), half(blk[2:])
		k4.D[sb], k4.DMin[sb] = d, dmin
		scales, codes := blk[4:16], blk[16:144]
		for i := range 4 {
			lo, hi := 8*sb+2*i, 8*sb+2*i+1
			for l, b := range codes[32*i : 32*i+32] {
				q.Q[lo*32+l], q.Q[hi*32+l] = int8(b&15), int8(b>>4)
			}
			for _, g := range []int{lo, hi} {
				k4.Sc[g], k4.M[g] = gguf.ScaleMinK4(g-8*sb, scales)
				q.RestateQ4K(g)
			}
		}
	}
	return q, nil
}
