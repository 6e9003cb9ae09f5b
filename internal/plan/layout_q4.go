package plan

import (
	"fmt"
	"strings"
)

// LayoutQ4 is 4-bit integers with a scale (and, asymmetric, a zero
// point) per group of G inputs (ng = ceil(K/G)):
//
//	q4-gG-sym      q i8 [N*K] | s f32 [N*ng]
//	               w[n][k] = float32(q[n*K+k]) * s[n*ng+k/G]
//	q4-gG-asym     q i8 [N*K] | s f32 [N*ng] | z f32 [N*ng]
//	               w[n][k] = (float32(q[n*K+k]) - z[n*ng+k/G]) * s[n*ng+k/G]
//	q4-gG-sym-p    nib [N*K/2] | s f32 [N*nb32]                  u = q+8
//	q4-gG-asym-p   nib [N*K/2] | s f32 [N*nb32] | z f32 [N*nb32] u = q
const LayoutQ4 LayoutKind = 3

func init() {
	registerLayout(&layoutInfo{
		kind:   LayoutQ4,
		scheme: "q4",
		forms:  bothForms,
		parse: func(tag string) (WeightLayout, bool, error) {
			if !strings.HasPrefix(tag, "q4-") {
				return WeightLayout{}, false, nil
			}
			f := strings.Split(tag, "-")
			if len(f) != 3 || (f[2] != "sym" && f[2] != "asym") {
				return WeightLayout{}, true, fmt.Errorf("layout %q: want q4-gG-sym or q4-gG-asym", tag)
			}
			b, err := parseBlock(tag, f[1], "g")
			l, err := canonical(tag, WeightLayout{Kind: LayoutQ4, Block: b, Sym: f[2] == "sym"}, err)
			return l, true, err
		},
		tag: func(l WeightLayout) string {
			if l.Sym {
				return fmt.Sprintf("q4-g%d-sym", l.Block)
			}
			return fmt.Sprintf("q4-g%d-asym", l.Block)
		},
		parts: func(l WeightLayout, n, k int64) (Parts, error) {
			return blockParts(l, n, k, false, !l.Sym, true, func(n, nb int64) int64 { return n * nb })
		},
		canPack: packsInBlocks,
	})
}
