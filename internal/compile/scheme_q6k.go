package compile

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// q6k weights take layout q6k-p where rows are whole super-blocks and
// the weights are packed; otherwise they are stored float32. GGUF Q6_K
// blocks stay q6k, exactly, in the token embedding and the classifier
// (tables read a row at a time or for one token's logits, which the
// 6-bit kernels serve); elsewhere they become w8, whose prefill tiles
// are faster.
func init() {
	registerScheme(&weightScheme{
		kind: quant.KindQ6K,
		layout: func(_ Weight, shape []int64, pack bool) (plan.WeightLayout, encoder, bool) {
			q6 := plan.WeightLayout{Kind: plan.LayoutQ6K, Packed: true}
			return q6, encodeQ6K, pack && len(shape) == 2 && q6.CanPack(shape[1])
		},
		gguf: []ggufBlocks{{typ: gguf.TypeQ6_K, scheme: "q6k", tablesOnly: true, convert: q6kFromQ6_K}},
	})
}

// encodeQ6K lays out a q6k weight as layout q6k-p: the 6-bit codes
// (q+32) in the planes kernel.PackQ6 writes, then the sub-scales and the
// super-blocks' d.
func encodeQ6K(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, err := partsOf(l, q, shape)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	if len(q.Q) != N*K || int64(len(q.Sub)) != p.Scales-p.Sub || int64(len(q.Scales)) != p.NScales {
		return nil, fmt.Errorf("%d integers, %d sub-scales and %d scales do not fit %s of [%d, %d]", len(q.Q), len(q.Sub), len(q.Scales), l.Tag(), N, K)
	}
	b := make([]byte, p.Size)
	nib, hi := b[:p.Codes], b[p.Codes:p.Sub]
	u := make([]uint8, K) // one row at a time: a classifier's codes are not copied whole
	for n := range N {
		for k, v := range q.Q[n*K : (n+1)*K] {
			if v < -32 || v > 31 {
				return nil, fmt.Errorf("row %d input %d: %d does not fit 6 bits", n, k, v)
			}
			u[k] = uint8(int(v) + 32)
		}
		if err := kernel.PackQ6(nib[n*K/2:(n+1)*K/2], hi[n*K/4:(n+1)*K/4], u, 1, K); err != nil {
			return nil, fmt.Errorf("row %d: %w", n, err)
		}
	}
	for i, v := range q.Sub {
		b[p.Sub+int64(i)] = byte(v)
	}
	putFloats(b[p.Scales:], q.Scales)
	return b, nil
}

// q6kFromQ6_K re-lays Q6_K super-blocks (ql [128], qh [64], scales
// [16]int8, d f16; x = d*scale*q with the 6-bit q less 32) as a q6k
// weight, exactly. In each half of 128 values, byte l of ql and qh hold
// values l, l+32, l+64 and l+96: ql[l] the low nibbles of l and l+64,
// ql[l+32] those of l+32 and l+96, qh[l] the high 2 bits of all four.
func q6kFromQ6_K(raw []byte, rows, cols int) (*quant.Quantized, error) {
	ns := rows * cols / quant.Q6KSuper
	q := &quant.Quantized{Scheme: quant.Scheme{Kind: quant.KindQ6K}, Rows: rows, Cols: cols,
		Q: make([]int8, rows*cols), Sub: make([]int8, rows*cols/quant.Q6KGroup), Scales: make([]float32, ns)}
	for sb := range ns {
		blk := raw[sb*210 : (sb+1)*210]
		d := half(blk[208:])
		if math.IsNaN(float64(d)) || math.IsInf(float64(d), 0) {
			return nil, fmt.Errorf("Q6_K super-block %d of row %d has a non-finite scale", sb%(cols/quant.Q6KSuper), sb/(cols/quant.Q6KSuper))
		}
		q.Scales[sb] = d
		for i, b := range blk[192:208] {
			q.Sub[sb*16+i] = int8(b)
		}
		out := q.Q[sb*quant.Q6KSuper : (sb+1)*quant.Q6KSuper]
		for h := range 2 {
			ql, qh, y := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32], out[128*h:128*h+128]
			for l := range 32 {
				y[l] = int8(ql[l]&15|(qh[l]&3)<<4) - 32
				y[l+32] = int8(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				y[l+64] = int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				y[l+96] = int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
		}
	}
	return q, nil
}
