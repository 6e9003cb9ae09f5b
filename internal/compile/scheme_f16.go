package compile

import (
	"encoding/binary"
	"fmt"

	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// f16 weights take layout f16-rows when the source asks for binary16
// rows (Weight.F16Rows); otherwise they are widened to float32, which
// holds every binary16 value exactly.
func init() {
	registerScheme(&weightScheme{
		kind: quant.KindF16,
		layout: func(w Weight, _ []int64, _ bool) (plan.WeightLayout, encoder, bool) {
			return plan.WeightLayout{Kind: plan.LayoutF16}, encodeF16Rows, w.F16Rows
		},
	})
}

// encodeF16Rows lays out the binary16 values of q (scheme f16) as the
// little-endian rows of layout f16-rows.
func encodeF16Rows(_ plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	if len(shape) != 2 || shape[0] != int64(q.Rows) || shape[1] != int64(q.Cols) {
		return nil, fmt.Errorf("stored as [%d, %d], the graph says %v", q.Rows, q.Cols, shape)
	}
	if len(q.Half) != q.Rows*q.Cols {
		return nil, fmt.Errorf("%d binary16 values for [%d, %d]", len(q.Half), q.Rows, q.Cols)
	}
	b := make([]byte, 2*len(q.Half))
	for i, h := range q.Half {
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b, nil
}
