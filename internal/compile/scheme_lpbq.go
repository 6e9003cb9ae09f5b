package compile

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// lpbq weights take layout lpbq-bB, packed lpbq-bB-p.
func init() {
	registerScheme(&weightScheme{
		kind: quant.KindLPBQ,
		layout: func(w Weight, shape []int64, pack bool) (plan.WeightLayout, encoder, bool) {
			return blockLayout(lpbqLayout(w.Quantized.Scheme), shape, pack, encodeLPBQPacked)
		},
	})
}

// lpbqLayout is the unpacked layout of an lpbq scheme.
func lpbqLayout(s quant.Scheme) plan.WeightLayout {
	return plan.WeightLayout{Kind: plan.LayoutLPBQ, Block: s.Block}
}

// encodeLPBQPacked lays q out as lpbq-bB-p: 4-bit codes q+8, each
// block's code repeated over its blocks of plan.PackBlock, the row
// scales.
func encodeLPBQPacked(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, b, srcBlocks, per, err := packedBlocks(l, q, shape, false)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	if err := packRows(b, q.Q, N, K, 8); err != nil {
		return nil, err
	}
	if len(q.Codes) != N*srcBlocks {
		return nil, fmt.Errorf("%d block codes do not fit %s", len(q.Codes), l.Tag())
	}
	copy(b[p.Codes:], spreadBlocks(q.Codes, N, K, srcBlocks, per))
	putFloats(b[p.Scales:], q.Scales)
	return b, nil
}
