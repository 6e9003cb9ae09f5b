package graph

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// CausalConvBias is CausalConv with a bias b [cols(x)] added to every
// output row (Mamba2's conv1d).
func (g *Graph) CausalConvBias(x int, w, b string, k int, name string) int {
	n := g.CausalConv(x, w, k, name)
	g.weight(b, g.cols(x))
	g.Nodes[n].Bias = b
	return n
}

// SSMWeights names the per-head weights of an ssm_scan node, each [H]:
// A (negative: -exp(A_log)), D (the skip) and DTBias (added to dt before
// its softplus).
type SSMWeights struct {
	A, D, DTBias string
}

// SSMScan adds Mamba2's selective scan (op.SSMScan) over x [T, H*headDim],
// dt [T, H], b and c [T, groups*state], with a [H, headDim, state] state
// slot of its own. Node.HeadDim records headDim; the state size is read
// back from the slot (Cols * state).
func (g *Graph) SSMScan(x, dt, b, c int, ws SSMWeights, headDim, groups int, name string) int {
	cols, heads := g.cols(x), g.cols(dt)
	if headDim <= 0 || heads <= 0 || cols != heads*headDim {
		panic(fmt.Sprintf("graph: ssm_scan of %d columns in %d heads of %d", cols, heads, headDim))
	}
	gn := g.cols(b)
	if g.cols(c) != gn || groups <= 0 || heads%groups != 0 || gn%groups != 0 {
		panic(fmt.Sprintf("graph: ssm_scan B %d, C %d columns for %d groups of %d heads", gn, g.cols(c), groups, heads))
	}
	for _, w := range []string{ws.A, ws.D, ws.DTBias} {
		g.weight(w, heads)
	}
	return g.add(Node{Op: op.SSMScan, In: []int{x, dt, b, c}, Cols: cols, Weight: ws.A,
		More: []string{ws.D, ws.DTBias}, HeadDim: headDim, Slot: g.State(cols * (gn / groups)), Name: name})
}

// ssmScan evaluates an ssm_scan node over T rows.
func (in *Interpreter) ssmScan(n *Node, dst []float32, vals [][]float32, T int, st *State) {
	S := st.Rec[n.Slot]
	N := len(S) / n.Cols
	H := n.Cols / n.HeadDim
	G := in.g.cols(n.In[2]) / N
	op.SSMScanRows(dst, vals[n.In[0]], vals[n.In[1]], vals[n.In[2]], vals[n.In[3]],
		in.w[n.Weight], in.w[n.More[0]], in.w[n.More[1]], S, T, H, n.HeadDim, G, N)
}

// addConvBias adds b to every row of x.
func addConvBias(x, b []float32) {
	for i := range x {
		x[i] += b[i%len(b)]
	}
}
