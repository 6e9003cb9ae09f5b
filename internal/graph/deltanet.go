package graph

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// The gated_delta op of a Gated DeltaNet layer (op/deltanet.go), with a
// state slot of its own; its causal_conv is Graph.CausalConv.

// GatedDelta adds the gated delta rule over x = [q | k | v], a and b
// ([T, d.ValueHeads] each), with weights A and dtBias [d.ValueHeads] and a
// [ValueHeads, KeyDim, ValueDim] state slot.
func (g *Graph) GatedDelta(x, a, b int, A, dtBias string, d op.DeltaDims, name string) int {
	if err := d.Check(); err != nil {
		panic("graph: " + err.Error())
	}
	if g.cols(x) != d.In() || g.cols(a) != d.ValueHeads || g.cols(b) != d.ValueHeads {
		panic(fmt.Sprintf("graph: gated delta %+v on inputs of %d, %d and %d columns", d, g.cols(x), g.cols(a), g.cols(b)))
	}
	g.weight(A, d.ValueHeads)
	g.weight(dtBias, d.ValueHeads)
	return g.add(Node{Op: op.GatedDelta, In: []int{x, a, b}, Cols: d.Out(), Weight: A, Bias: dtBias,
		Delta: &d, Slot: g.State(d.State()), Name: name})
}

// evalDeltaNet evaluates op.GatedDelta; false for other ops.
func (in *Interpreter) evalDeltaNet(n *Node, dst []float32, vals [][]float32, nrows []int, st *State) bool {
	switch n.Op {
	case op.GatedDelta:
		op.GatedDeltaRows(dst, vals[n.In[0]], vals[n.In[1]], vals[n.In[2]], in.w[n.Weight], in.w[n.Bias],
			st.Rec[n.Slot], st.Rec[n.Slot], nrows[n.In[0]], *n.Delta, make([]float32, n.Delta.Temp()))
	default:
		return false
	}
	return true
}
