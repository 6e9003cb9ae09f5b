package graph

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// CausalConv adds the depthwise causal convolution of x with w [cols(x),
// k] over time (op.CausalConv); its state slot holds the last k-1 input
// rows, so chunks of any size give the rows of one pass. Node.HeadDim
// records k.
func (g *Graph) CausalConv(x int, w string, k int, name string) int {
	c := g.cols(x)
	if k < 2 {
		panic(fmt.Sprintf("graph: causal convolution of kernel %d", k))
	}
	g.weight(w, c, k)
	return g.add(Node{Op: op.CausalConv, In: []int{x}, Cols: c, Weight: w, HeadDim: k,
		Slot: g.State((k - 1) * c), Name: name})
}
