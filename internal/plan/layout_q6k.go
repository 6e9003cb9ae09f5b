package plan

import "fmt"

// LayoutQ6K is ggml's Q6_K (quant.Q6K; K a multiple of 256), packed
// only, in planes:
//
//	q6k-p    nib [N*K/2] | hi [N*K/4] | sub i8 [N*K/16] | d f32 [N*K/256]
//	         w = float32(d*float32(sub)) * float32(u - 32) for the 6-bit
//	         code u of the input (kernel.PackQ6 gives where its low 4 and
//	         high 2 bits lie), its group of 16's sub and its super-block
//	         of 256's d.
//
// It takes 6.625 bits a weight (package kernel, Q6).
const LayoutQ6K LayoutKind = 6

func init() {
	registerLayout(&layoutInfo{
		kind:   LayoutQ6K,
		scheme: "q6k",
		forms:  packedOnly,
		parse: func(tag string) (WeightLayout, bool, error) {
			switch tag {
			case "q6k-p":
				return WeightLayout{Kind: LayoutQ6K, Packed: true}, true, nil
			case "q6k":
				return WeightLayout{}, true, fmt.Errorf("layout %q exists only packed (%s-p)", tag, tag)
			}
			return WeightLayout{}, false, nil
		},
		tag: func(WeightLayout) string { return "q6k-p" },
		parts: func(l WeightLayout, n, k int64) (Parts, error) {
			if !l.Packed || l.Block != 0 || k%Q4KSuper != 0 {
				return Parts{}, fmt.Errorf("layout %s: needs the packed form and inputs a multiple of %d (has %d)", l.Tag(), Q4KSuper, k)
			}
			p := Parts{Zeros: -1}
			p.Codes = n * k / 2
			p.Sub = p.Codes + n*k/4
			p.Scales = p.Sub + n*k/16 // a multiple of 16
			p.NScales = n * k / Q4KSuper
			p.Size = p.Scales + 4*p.NScales
			return p, nil
		},
		canPack: func(_ WeightLayout, k int64) bool { return k%Q4KSuper == 0 },
	})
}
