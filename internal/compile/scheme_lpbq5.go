package compile

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// lpbq5 weights take layout lpbq5-p where their width is a multiple of
// 32 and the weights are packed; otherwise the unpacked lpbq-b32, whose
// integer bytes hold -15..15 as well as lpbq's -7..7.
func init() {
	registerScheme(&weightScheme{
		kind: quant.KindLPBQ5,
		layout: func(w Weight, shape []int64, pack bool) (plan.WeightLayout, encoder, bool) {
			l5 := plan.WeightLayout{Kind: plan.LayoutLPBQ5, Packed: true}
			if pack && len(shape) == 2 && l5.CanPack(shape[1]) {
				return l5, encodeLPBQ5, true
			}
			return plan.WeightLayout{Kind: plan.LayoutLPBQ, Block: w.Quantized.Scheme.Block}, encodeQuantized, true
		},
	})
}

// encodeLPBQ5 lays out an lpbq5 weight as layout lpbq5-p: the 5-bit
// codes q+16 in the planes kernel.PackQ5 writes, the block codes, the
// row scales.
func encodeLPBQ5(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, err := partsOf(l, q, shape)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	if len(q.Q) != N*K || len(q.Codes) != N*K/plan.PackBlock || len(q.Scales) != N {
		return nil, fmt.Errorf("%d integers, %d block codes and %d scales do not fit %s of [%d, %d]", len(q.Q), len(q.Codes), len(q.Scales), l.Tag(), N, K)
	}
	b := make([]byte, p.Size)
	u := make([]uint8, K) // one row at a time
	for n := range N {
		for k, v := range q.Q[n*K : (n+1)*K] {
			if v < -15 || v > 15 {
				return nil, fmt.Errorf("row %d input %d: %d does not fit lpbq5's -15..15", n, k, v)
			}
			u[k] = uint8(int(v) + 16)
		}
		if err := kernel.PackQ5(b[n*K/2:(n+1)*K/2], b[p.Sub+int64(n*K/8):p.Sub+int64((n+1)*K/8)], u); err != nil {
			return nil, fmt.Errorf("row %d: %w", n, err)
		}
	}
	copy(b[p.Codes:], q.Codes)
	putFloats(b[p.Scales:], q.Scales)
	return b, nil
}
