package graph

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/op"
)

// The recurrent ops, which RWKV-7 is built from. Two of them carry state
// from one call to the next in a slot of State.Rec (declared in
// Graph.States), so a sequence may be fed in chunks of any size and give
// the same rows as one pass:
//
//	layer_norm   out[t][c] = (x[t][c] - mean(x[t])) / sqrt(var(x[t]) + Eps) * w[c] + b[c]
//	             (biased variance)
//	token_shift  out[0] = S, out[t] = x[t-1]; then S = x[T-1]          S [C]
//	mix          out[t][c] = x[t][c] + (y[t][c] - x[t][c]) * m[c]      m [C]
//	sub          out = x - y
//	sigmoid      out = 1 / (1 + exp(-x))
//	tanh         out = tanh(x)
//	relu         out = max(x, 0)
//	wkv7         RWKV-7's time-mix core over inputs r, w, k, v, a [T, C]
//	             and weights k_k, k_a, r_k, gn_w, gn_b [C]; see wkv7 below.

// State declares a recurrent state slot of n floats and returns its index.
func (g *Graph) State(n int) int {
	if n <= 0 {
		panic(fmt.Sprintf("graph: state slot of %d floats", n))
	}
	g.States = append(g.States, n)
	return len(g.States) - 1
}

// LayerNorm normalizes each row of x to zero mean and unit variance, then
// applies the gain w and bias b ([cols(x)] each).
func (g *Graph) LayerNorm(x int, w, b string, eps float32) int {
	c := g.cols(x)
	g.weight(w, c)
	g.weight(b, c)
	return g.add(Node{Op: op.LayerNorm, In: []int{x}, Cols: c, Weight: w, Bias: b, Eps: eps, Name: w})
}

// TokenShift returns x shifted down one row, its first row being the last
// row of the previous call (zero at the start); it declares its own slot.
func (g *Graph) TokenShift(x int, name string) int {
	c := g.cols(x)
	return g.add(Node{Op: op.TokenShift, In: []int{x}, Cols: c, Slot: g.State(c), Name: name})
}

// Mix returns x + (y - x) * m, m [cols(x)] broadcast over the rows.
func (g *Graph) Mix(x, y int, m string) int {
	n := g.binary(op.Mix, x, y)
	g.weight(m, g.cols(x))
	g.Nodes[n].Weight, g.Nodes[n].Name = m, m
	return n
}

// Sub adds x - y.
func (g *Graph) Sub(x, y int) int { return g.binary(op.Sub, x, y) }

// Sigmoid adds 1 / (1 + exp(-x)).
func (g *Graph) Sigmoid(x int) int { return g.add(Node{Op: op.Sigmoid, In: []int{x}, Cols: g.cols(x)}) }

// Tanh adds tanh(x).
func (g *Graph) Tanh(x int) int { return g.add(Node{Op: op.Tanh, In: []int{x}, Cols: g.cols(x)}) }

// ReLU adds max(x, 0).
func (g *Graph) ReLU(x int) int { return g.add(Node{Op: op.ReLU, In: []int{x}, Cols: g.cols(x)}) }

// WKV7Weights names the per-channel weights of a wkv7 node, each [C]:
// KK scales k before its normalization, KA mixes a into k, RK is the
// bonus weight (RWKV's r_k, [H, E] flattened), GNW and GNB the gain and
// bias of the per-head group norm.
type WKV7Weights struct {
	KK, KA, RK, GNW, GNB string
}

// WKV7 adds RWKV-7's time-mix core over r, w, k, v, a (all [T, C], C =
// H*headDim) with a [H, E, E] state slot of its own; eps is the group
// norm's epsilon.
func (g *Graph) WKV7(r, w, k, v, a int, ws WKV7Weights, headDim int, eps float32, name string) int {
	c := g.cols(r)
	for _, i := range []int{w, k, v, a} {
		if g.cols(i) != c {
			panic(fmt.Sprintf("graph: wkv7 inputs of %d and %d columns", c, g.cols(i)))
		}
	}
	if headDim <= 0 || c%headDim != 0 {
		panic(fmt.Sprintf("graph: wkv7 head size %d on %d columns", headDim, c))
	}
	names := []string{ws.KK, ws.KA, ws.RK, ws.GNW, ws.GNB}
	for _, n := range names {
		g.weight(n, c)
	}
	return g.add(Node{Op: op.WKV7, In: []int{r, w, k, v, a}, Cols: c, Weight: ws.KK, Bias: ws.KA,
		More: names[2:], HeadDim: headDim, Eps: eps, Slot: g.State(c * headDim), Name: name})
}

// evalRecurrent evaluates the recurrent ops; ok is false for other ops.
func (in *Interpreter) evalRecurrent(n *Node, dst []float32, vals [][]float32, nrows []int, st *State) (bool, error) {
	var x []float32
	if len(n.In) > 0 {
		x = vals[n.In[0]]
	}
	T := 0
	if len(n.In) > 0 {
		T = nrows[n.In[0]]
	}
	switch n.Op {
	case op.LayerNorm:
		op.LayerNormRows(dst, x, in.w[n.Weight], in.w[n.Bias], n.Cols, n.Eps)
	case op.TokenShift:
		op.TokenShiftRows(dst, x, st.Rec[n.Slot], T, n.Cols)
	case op.Mix:
		y, m := vals[n.In[1]], in.w[n.Weight]
		for i := range dst {
			dst[i] = x[i] + (y[i]-x[i])*m[i%n.Cols]
		}
	case op.Sub:
		y := vals[n.In[1]]
		for i := range dst {
			dst[i] = x[i] - y[i]
		}
	case op.Sigmoid:
		for i := range dst {
			dst[i] = op.SigmoidOf(x[i])
		}
	case op.Tanh:
		for i := range dst {
			dst[i] = float32(math.Tanh(float64(x[i])))
		}
	case op.ReLU:
		for i := range dst {
			dst[i] = max(x[i], 0)
		}
	case op.WKV7:
		ws := [5][]float32{in.w[n.Weight], in.w[n.Bias], in.w[n.More[0]], in.w[n.More[1]], in.w[n.More[2]]}
		op.WKV7Rows(dst, x, vals[n.In[1]], vals[n.In[2]], vals[n.In[3]], vals[n.In[4]], st.Rec[n.Slot], st.Rec[n.Slot], ws,
			T, n.Cols, n.HeadDim, n.Eps, make([]float32, 4*n.HeadDim))
	case op.CausalConv:
		op.CausalConvRows(dst, x, in.w[n.Weight], st.Rec[n.Slot], st.Rec[n.Slot], T, n.Cols, n.HeadDim)
		if n.Bias != "" {
			addConvBias(dst, in.w[n.Bias])
		}
	case op.SSMScan:
		in.ssmScan(n, dst, vals, T, st)
	default:
		return false, nil
	}
	return true, nil
}
