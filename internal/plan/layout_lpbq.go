package plan

import (
	"fmt"
	"strings"
)

// LayoutLPBQ is LPBQ's int4 values with a 4-bit code per block of B
// inputs and a scale per row (nb = ceil(K/B)):
//
//	lpbq-bB     q i8 [N*K] | codes u8 [N*nb] | S f32 [N]
//	            w[n][k] = float32(int32(q[n*K+k]) * int32(codes[n*nb+k/B])) * S[n]
//	lpbq-bB-p   nib [N*K/2] | codes u8 [N*nb32] | S f32 [N]     u = q+8
const LayoutLPBQ LayoutKind = 2

func init() {
	registerLayout(&layoutInfo{
		kind:   LayoutLPBQ,
		scheme: "lpbq",
		forms:  bothForms,
		parse: func(tag string) (WeightLayout, bool, error) {
			rest, ok := strings.CutPrefix(tag, "lpbq-")
			if !ok {
				return WeightLayout{}, false, nil
			}
			b, err := parseBlock(tag, rest, "b")
			l, err := canonical(tag, WeightLayout{Kind: LayoutLPBQ, Block: b}, err)
			return l, true, err
		},
		tag: func(l WeightLayout) string { return fmt.Sprintf("lpbq-b%d", l.Block) },
		parts: func(l WeightLayout, n, k int64) (Parts, error) {
			return blockParts(l, n, k, true, false, true, func(n, _ int64) int64 { return n })
		},
		canPack: packsInBlocks,
	})
}
