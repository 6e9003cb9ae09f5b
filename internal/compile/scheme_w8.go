package compile

import (
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// w8 weights take layout w8-rows, packed w8-rows-p. Every GGUF block type
// no scheme keeps is decoded and requantized to w8 (fromBlocks).
func init() {
	registerScheme(&weightScheme{
		kind: quant.KindW8,
		layout: func(_ Weight, shape []int64, pack bool) (plan.WeightLayout, encoder, bool) {
			return blockLayout(plan.WeightLayout{Kind: plan.LayoutW8}, shape, pack, encodeW8Packed)
		},
	})
}

// encodeW8Packed lays q out as w8-rows-p: the integers offset by 128,
// then the row scales.
func encodeW8Packed(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, b, _, _, err := packedBlocks(l, q, shape, false)
	if err != nil {
		return nil, err
	}
	for i, v := range q.Q {
		b[i] = byte(int(v) + 128)
	}
	putFloats(b[p.Scales:], q.Scales)
	return b, nil
}
