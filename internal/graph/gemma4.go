package graph

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// SharedAttention adds attention of q over cache slot a.Layer, which an
// earlier Attention node of the graph writes in the same pass; it stores
// nothing (op.SharedAttention: Gemma 4's layers that reuse another
// layer's keys and values).
func (g *Graph) SharedAttention(q int, a Attn) int {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || g.cols(q) != a.Heads*a.HeadDim ||
		a.Bidirectional || a.Tile != 0 || a.Layer < 0 || a.Layer >= g.Layers {
		panic(fmt.Sprintf("graph: shared attention of slot %d (%d slots), heads %d/%d dim %d on q %d columns",
			a.Layer, g.Layers, a.Heads, a.KVHeads, a.HeadDim, g.cols(q)))
	}
	return g.add(Node{Op: op.SharedAttention, In: []int{q}, Cols: g.cols(q), Attn: &a})
}

// ScaleBy adds x * w[0], w a weight of one value (a learned scalar).
func (g *Graph) ScaleBy(x int, w string) int {
	g.weight(w, 1)
	return g.add(Node{Op: op.Scale, In: []int{x}, Cols: g.cols(x), Scale: 1, Weight: w, Name: w})
}

// UnitHeadRMSNorm normalizes each headDim-wide head of x by its root mean
// square, with no gain.
func (g *Graph) UnitHeadRMSNorm(x, headDim int, eps float32, name string) int {
	c := g.cols(x)
	if headDim <= 0 || c%headDim != 0 {
		panic(fmt.Sprintf("graph: head rms norm of head size %d on %d columns", headDim, c))
	}
	return g.add(Node{Op: op.HeadRMSNorm, In: []int{x}, Cols: c, Eps: eps, HeadDim: headDim, Name: name})
}

// unitRMSNorm is rmsNorm with a gain of 1 + offset in every column.
func unitRMSNorm(dst, x []float32, C int, eps, offset float32) {
	w := make([]float32, C)
	rmsNorm(dst, x, w, C, eps, 1+offset)
}
