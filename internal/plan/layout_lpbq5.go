package plan

import "fmt"

// LayoutLPBQ5 is lpbq5's 5-bit integers (kernel.Q5; K a multiple of
// PackBlock), packed only, in planes:
//
//	lpbq5-p  nib [N*K/2] | hi [N*K/8] | codes u8 [N*K/32] | S f32 [N]
//	         w[n][k] = float32((u - 16) * codes[n][k/32]) * S[n] for the
//	         5-bit code u of weight i = n*K + k: its low 4 bits in nib
//	         byte i/2 (the low nibble for even i), its fifth bit as bit
//	         i%8 of hi byte i/8.
//
// Parts.Sub is where hi starts. It takes 5.25 bits a weight; a weight
// whose width is not a multiple of 32 is stored in the unpacked lpbq-b32
// layout, whose integers are bytes.
const LayoutLPBQ5 LayoutKind = 7

func init() {
	registerLayout(&layoutInfo{
		kind:   LayoutLPBQ5,
		scheme: "lpbq5",
		forms:  packedOnly,
		parse: func(tag string) (WeightLayout, bool, error) {
			switch tag {
			case "lpbq5-p":
				return WeightLayout{Kind: LayoutLPBQ5, Packed: true}, true, nil
			case "lpbq5":
				return WeightLayout{}, true, fmt.Errorf("layout %q exists only packed (%s-p)", tag, tag)
			}
			return WeightLayout{}, false, nil
		},
		tag: func(WeightLayout) string { return "lpbq5-p" },
		parts: func(l WeightLayout, n, k int64) (Parts, error) {
			if !l.Packed || l.Block != 0 || k%PackBlock != 0 {
				return Parts{}, fmt.Errorf("layout %s: needs the packed form and inputs a multiple of %d (has %d)", l.Tag(), PackBlock, k)
			}
			p := Parts{Zeros: -1}
			p.Sub = n * k / 2
			p.Codes = p.Sub + n*k/8
			p.Scales = align4(p.Codes + n*k/PackBlock)
			p.NScales = n
			p.Size = p.Scales + 4*p.NScales
			return p, nil
		},
		canPack: func(_ WeightLayout, k int64) bool { return k%PackBlock == 0 },
	})
}
