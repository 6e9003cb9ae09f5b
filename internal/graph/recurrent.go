package graph

import (
	"fmt"
	"math"
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
	return g.add(Node{Op: OpLayerNorm, In: []int{x}, Cols: c, Weight: w, Bias: b, Eps: eps, Name: w})
}

// TokenShift returns x shifted down one row, its first row being the last
// row of the previous call (zero at the start); it declares its own slot.
func (g *Graph) TokenShift(x int, name string) int {
	c := g.cols(x)
	return g.add(Node{Op: OpTokenShift, In: []int{x}, Cols: c, Slot: g.State(c), Name: name})
}

// Mix returns x + (y - x) * m, m [cols(x)] broadcast over the rows.
func (g *Graph) Mix(x, y int, m string) int {
	n := g.binary(OpMix, x, y)
	g.weight(m, g.cols(x))
	g.Nodes[n].Weight, g.Nodes[n].Name = m, m
	return n
}

// Sub adds x - y.
func (g *Graph) Sub(x, y int) int { return g.binary(OpSub, x, y) }

// Sigmoid adds 1 / (1 + exp(-x)).
func (g *Graph) Sigmoid(x int) int { return g.add(Node{Op: OpSigmoid, In: []int{x}, Cols: g.cols(x)}) }

// Tanh adds tanh(x).
func (g *Graph) Tanh(x int) int { return g.add(Node{Op: OpTanh, In: []int{x}, Cols: g.cols(x)}) }

// ReLU adds max(x, 0).
func (g *Graph) ReLU(x int) int { return g.add(Node{Op: OpReLU, In: []int{x}, Cols: g.cols(x)}) }

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
	return g.add(Node{Op: OpWKV7, In: []int{r, w, k, v, a}, Cols: c, Weight: ws.KK, Bias: ws.KA,
		More: names[2:], HeadDim: headDim, Eps: eps, Slot: g.State(c * headDim), Name: name})
}

// layerNorm normalizes each row of x [T, C]; sums run in float64.
func layerNorm(dst, x, w, b []float32, C int, eps float32) {
	for t := 0; t*C < len(x); t++ {
		row := x[t*C : (t+1)*C]
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		mean := s / float64(C)
		var ss float64
		for _, v := range row {
			d := float64(v) - mean
			ss += d * d
		}
		inv := 1 / math.Sqrt(ss/float64(C)+float64(eps))
		for c, v := range row {
			dst[t*C+c] = float32((float64(v)-mean)*inv)*w[c] + b[c]
		}
	}
}

// tokenShift writes x shifted down one row into dst (row 0 from state)
// and keeps x's last row in state; x and dst are [T, C].
func tokenShift(dst, x, state []float32, T, C int) {
	if T == 0 {
		return
	}
	copy(dst[:C], state)
	copy(dst[C:T*C], x[:(T-1)*C])
	copy(state, x[(T-1)*C:T*C])
}

func sigmoid(v float32) float32 { return float32(1 / (1 + math.Exp(-float64(v)))) }

// wkv7 runs RWKV-7's time mix over T rows in order; state S is [H][E][E]
// (value index i, key index j), zero at the start of a sequence. For each
// row and head h, over that head's E channels (weights indexed by channel):
//
//	decay_j = exp(-exp(-softplus(-w_j) - 0.5))
//	kk      = normalize(k * k_k)                 (L2, divided by max(|.|, 1e-12))
//	k'_j    = k_j * (1 + (a_j - 1) * k_a_j)
//	sa_i    = sum_j -kk_j * S_ij
//	S_ij    = S_ij * decay_j + sa_i * kk_j * a_j + v_i * k'_j
//	y_i     = sum_j S_ij * r_j
//	out_i   = groupnorm(y)_i * gn_w_i + gn_b_i + (sum_j r_j * k'_j * r_k_j) * v_i
//
// where groupnorm(y) = (y - mean(y)) / sqrt(var(y) + eps) over the head.
// scratch holds at least 4*E floats.
func wkv7(dst, r, w, k, v, a, S []float32, ws [5][]float32, T, C, E int, eps float32, scratch []float32) {
	kk, kp, dec, y := scratch[:E], scratch[E:2*E], scratch[2*E:3*E], scratch[3*E:4*E]
	kkw, kaw, rkw, gnw, gnb := ws[0], ws[1], ws[2], ws[3], ws[4]
	for t := 0; t < T; t++ {
		for h := 0; h*E < C; h++ {
			o := t*C + h*E
			c0 := h * E
			var nn float64
			for j := 0; j < E; j++ {
				kj := k[o+j]
				kk[j] = kj * kkw[c0+j]
				nn += float64(kk[j]) * float64(kk[j])
				kp[j] = kj * (1 + (a[o+j]-1)*kaw[c0+j])
				dec[j] = float32(math.Exp(-math.Exp(-softplus(-float64(w[o+j])) - 0.5)))
			}
			inv := float32(1 / math.Max(math.Sqrt(nn), 1e-12))
			for j := range kk {
				kk[j] *= inv
			}
			Sh := S[h*E*E : (h+1)*E*E]
			for i := 0; i < E; i++ {
				row := Sh[i*E : (i+1)*E]
				var sa float32
				for j, s := range row {
					sa -= kk[j] * s
				}
				vi := v[o+i]
				var yi float32
				for j := range row {
					s := row[j]*dec[j] + sa*(kk[j]*a[o+j]) + vi*kp[j]
					row[j] = s
					yi += s * r[o+j]
				}
				y[i] = yi
			}
			var bonus float32
			for j := 0; j < E; j++ {
				bonus += r[o+j] * kp[j] * rkw[c0+j]
			}
			var sum float64
			for _, yi := range y {
				sum += float64(yi)
			}
			mean := sum / float64(E)
			var ss float64
			for _, yi := range y {
				d := float64(yi) - mean
				ss += d * d
			}
			gi := 1 / math.Sqrt(ss/float64(E)+float64(eps))
			for i, yi := range y {
				dst[o+i] = float32((float64(yi)-mean)*gi)*gnw[c0+i] + gnb[c0+i] + bonus*v[o+i]
			}
		}
	}
}

// softplus is log(1 + exp(x)), and x itself above 20 (as PyTorch's).
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
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
	case OpLayerNorm:
		layerNorm(dst, x, in.w[n.Weight], in.w[n.Bias], n.Cols, n.Eps)
	case OpTokenShift:
		tokenShift(dst, x, st.Rec[n.Slot], T, n.Cols)
	case OpMix:
		y, m := vals[n.In[1]], in.w[n.Weight]
		for i := range dst {
			dst[i] = x[i] + (y[i]-x[i])*m[i%n.Cols]
		}
	case OpSub:
		y := vals[n.In[1]]
		for i := range dst {
			dst[i] = x[i] - y[i]
		}
	case OpSigmoid:
		for i := range dst {
			dst[i] = sigmoid(x[i])
		}
	case OpTanh:
		for i := range dst {
			dst[i] = float32(math.Tanh(float64(x[i])))
		}
	case OpReLU:
		for i := range dst {
			dst[i] = max(x[i], 0)
		}
	case OpWKV7:
		ws := [5][]float32{in.w[n.Weight], in.w[n.Bias], in.w[n.More[0]], in.w[n.More[1]], in.w[n.More[2]]}
		wkv7(dst, x, vals[n.In[1]], vals[n.In[2]], vals[n.In[3]], vals[n.In[4]], st.Rec[n.Slot], ws,
			T, n.Cols, n.HeadDim, n.Eps, make([]float32, 4*n.HeadDim))
	default:
		return false, nil
	}
	return true, nil
}
