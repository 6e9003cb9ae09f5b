package plan

import "fmt"

// LayoutQ4K is ggml's Q4_K super-blocks kept as they are, packed only
// (K a multiple of 256; nc = ceil(K/512) records of 16 blocks a row):
//
//	q4k-p    nib [N*K/2] | rec [N*nc][48]
//	         rec = sc u8 [16] | m u8 [16] | d0, dmin0, d1, dmin1 f32
//	         w = d*sc*u - dmin*m for the block's 6-bit sc and m and its
//	         super-block's (8 blocks: d0, dmin0 for blocks 0..7 of the
//	         record) d and dmin; a record past the row's last block holds
//	         zeros.
//
// It takes 4.75 bits a weight, where q4-g32-asym-p of the same weights
// takes 6 (package kernel, Q4.K4).
const LayoutQ4K LayoutKind = 5

// Q4KSuper is the number of inputs of a q4k-p (and q6k-p) super-block,
// of which a weight's row holds a whole number.
const Q4KSuper = 256

// q4kRecordBytes is the size of a q4k-p record of 16 blocks.
const q4kRecordBytes = 48

func init() {
	registerLayout(&layoutInfo{
		kind:   LayoutQ4K,
		scheme: "q4k",
		forms:  packedOnly,
		parse: func(tag string) (WeightLayout, bool, error) {
			switch tag {
			case "q4k-p":
				return WeightLayout{Kind: LayoutQ4K, Block: PackBlock, Packed: true}, true, nil
			case "q4k":
				return WeightLayout{}, true, fmt.Errorf("layout %q exists only packed (%s-p)", tag, tag)
			}
			return WeightLayout{}, false, nil
		},
		tag: func(WeightLayout) string { return "q4k-p" },
		parts: func(l WeightLayout, n, k int64) (Parts, error) {
			if !l.Packed || l.Block != PackBlock || k%Q4KSuper != 0 {
				return Parts{}, fmt.Errorf("layout %s: needs the packed form and inputs a multiple of %d (has %d)", l.Tag(), Q4KSuper, k)
			}
			nc := (k/PackBlock + 15) / 16
			p := Parts{Codes: -1, Zeros: -1, Sub: -1}
			p.Scales = n * k / 2 // a multiple of 128
			p.NScales = n * nc * q4kRecordBytes / 4
			p.Size = p.Scales + n*nc*q4kRecordBytes
			return p, nil
		},
		canPack: func(_ WeightLayout, k int64) bool { return k%Q4KSuper == 0 },
	})
}
