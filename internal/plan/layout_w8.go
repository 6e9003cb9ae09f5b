package plan

// LayoutW8 is int8 with one scale per row:
//
//	w8-rows     q i8 [N*K] | s f32 [N]
//	            w[n][k] = float32(q[n*K+k]) * s[n]
//	w8-rows-p   u u8 [N*K] = q+128 | s f32 [N]
const LayoutW8 LayoutKind = 1

func init() {
	registerLayout(&layoutInfo{
		kind:   LayoutW8,
		scheme: "w8",
		forms:  bothForms,
		parse: func(tag string) (WeightLayout, bool, error) {
			return WeightLayout{Kind: LayoutW8}, tag == "w8-rows", nil
		},
		tag: func(WeightLayout) string { return "w8-rows" },
		parts: func(l WeightLayout, n, k int64) (Parts, error) {
			return blockParts(l, n, k, false, false, false, func(n, _ int64) int64 { return n })
		},
		canPack: packsInBlocks,
	})
}
