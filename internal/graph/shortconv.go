package graph

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// ShortConv adds a depthwise causal convolution over time of x with the
// per-channel kernels w [cols(x), kernel] (op.ShortConv); its state slot
// holds the last kernel-1 rows of x, so chunks of any size give the rows
// of one pass. Node.HeadDim records the kernel length.
func (g *Graph) ShortConv(x int, w string, kernel int, name string) int {
	c := g.cols(x)
	if kernel < 2 {
		panic(fmt.Sprintf("graph: short convolution of kernel %d", kernel))
	}
	g.weight(w, c, kernel)
	return g.add(Node{Op: op.ShortConv, In: []int{x}, Cols: c, Weight: w, HeadDim: kernel,
		Slot: g.State((kernel - 1) * c), Name: name})
}
