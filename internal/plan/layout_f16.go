package plan

import "fmt"

// LayoutF16 is binary16 weights: a tensor of dtype f16 and shape [N, K]
// with no parts besides its values, and no packed form:
//
//	f16-rows    h f16 [N*K]
//	            w[n][k] = float32(h[n*K+k])   (IEEE binary16, exact in float32)
const LayoutF16 LayoutKind = 4

func init() {
	registerLayout(&layoutInfo{
		kind:   LayoutF16,
		scheme: "f16",
		forms:  unpackedOnly,
		half:   true,
		parse: func(tag string) (WeightLayout, bool, error) {
			return WeightLayout{Kind: LayoutF16}, tag == "f16-rows", nil
		},
		tag: func(WeightLayout) string { return "f16-rows" },
		parts: func(l WeightLayout, n, k int64) (Parts, error) {
			if l.Packed || l.Block != 0 {
				return Parts{}, fmt.Errorf("layout %s: binary16 rows have no blocks and no packed form", l.Tag())
			}
			return Parts{Codes: -1, Scales: -1, Zeros: -1, Sub: -1, Size: 2 * n * k}, nil
		},
		canPack: func(WeightLayout, int64) bool { return false },
	})
}
