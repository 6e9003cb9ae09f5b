package graph

import "fmt"

// Op is the operation a node performs.
type Op uint8

// The ops. Shapes use the letters of the package comment; x is input 0,
// y input 1, w and b weights (named by Node.Weight / Node.Bias).
const (
	OpInvalid Op = iota
	// OpTokens is the graph input: T token ids. It has no columns.
	OpTokens
	// OpEmbed gathers rows of the weight table w [V, D] by the token ids of
	// input 0: out[t] = w[ids[t]].
	OpEmbed
	// OpLinear is out[t][n] = sum_k x[t][k] * w[n][k] (+ b[n]); w is [N, K].
	OpLinear
	// OpRMSNorm is out[t][c] = x[t][c] / sqrt(mean_c(x[t]^2) + Eps) * (w[c] + Offset).
	OpRMSNorm
	// OpAdd is out = x + y, elementwise.
	OpAdd
	// OpMul is out = x * y, elementwise.
	OpMul
	// OpScale is out = x * Scale.
	OpScale
	// OpSiLU is out = x * sigmoid(x).
	OpSiLU
	// OpGELUTanh is the tanh approximation of GELU.
	OpGELUTanh
	// OpRoPE rotates each head of x [T, heads*E] by the position of its row
	// (Pos + t), per the Rope attribute.
	OpRoPE
	// OpAttention is causal multi-head attention with grouped keys/values:
	// inputs q [T, H*E], k [T, G*E], v [T, G*E]. It writes k and v into the
	// cache of layer Attn.Layer at positions Pos..Pos+T-1, then for each row
	// t and head h: out[t][h] = sum_j softmax_j(Scale * q[t][h]·K[j][h/(H/G)]) V[j][h/(H/G)]
	// over cache positions j <= Pos+t (and Pos+t-j < Window when Window > 0).
	OpAttention
	// OpColumns copies columns [Lo, Hi) of x: out is [T, Hi-Lo].
	OpColumns
	// OpLastRow keeps only the last row of x: out is [1, C].
	OpLastRow
	// OpHeadRMSNorm normalizes each head of x [T, heads*E] on its own:
	// out[t][h*E+e] = x[t][h*E+e] / sqrt(mean_e(x[t][h*E:(h+1)*E]^2) + Eps) * (w[e] + Offset),
	// with w [E] shared by all heads (Qwen3's and Gemma 3's q_norm/k_norm).
	OpHeadRMSNorm
	// The recurrent ops (recurrent.go): RWKV-7's blocks.
	OpLayerNorm
	OpTokenShift
	OpMix
	OpSub
	OpSigmoid
	OpTanh
	OpReLU
	OpWKV7
)

var opNames = [...]string{
	OpInvalid: "invalid", OpTokens: "tokens", OpEmbed: "embed", OpLinear: "linear",
	OpRMSNorm: "rms_norm", OpAdd: "add", OpMul: "mul", OpScale: "scale", OpSiLU: "silu",
	OpGELUTanh: "gelu_tanh", OpRoPE: "rope", OpAttention: "attention", OpColumns: "columns",
	OpLastRow: "last_row", OpHeadRMSNorm: "head_rms_norm",
	OpLayerNorm: "layer_norm", OpTokenShift: "token_shift", OpMix: "mix", OpSub: "sub",
	OpSigmoid: "sigmoid", OpTanh: "tanh", OpReLU: "relu", OpWKV7: "wkv7",
}

// String returns the op's name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// RopeStyle says which pairs of a head's dimensions rotate together.
type RopeStyle uint8

const (
	// RopeInterleaved rotates adjacent pairs (x[2i], x[2i+1]): llama2.c,
	// Meta's original Llama, GGUF llama (whose q/k rows are permuted for it), GLM.
	RopeInterleaved RopeStyle = iota
	// RopeHalf rotates (x[i], x[i+R/2]): HF's rotate_half, GPT-NeoX.
	RopeHalf
)

// MarshalText writes the style as its name.
func (s RopeStyle) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a style name ("interleaved" or "half").
func (s *RopeStyle) UnmarshalText(b []byte) error {
	switch string(b) {
	case "interleaved":
		*s = RopeInterleaved
	case "half":
		*s = RopeHalf
	default:
		return fmt.Errorf("rope style %q: want interleaved or half", b)
	}
	return nil
}

func (s RopeStyle) String() string {
	if s == RopeHalf {
		return "half"
	}
	return "interleaved"
}

// Rope configures OpRoPE.
type Rope struct {
	Style   RopeStyle
	HeadDim int // E
	RotDim  int // R <= E; dims R..E-1 pass through unchanged
	// InvFreq holds R/2 angular frequencies: pair i of a row at position p
	// rotates by angle p * InvFreq[i]. Scaling schemes are folded in here.
	InvFreq []float64
	// Scale multiplies cos and sin, so the rotated dimensions grow by it
	// (longrope's attention factor); 0 and 1 mean unscaled.
	Scale float64
}

// Attn configures OpAttention.
type Attn struct {
	Layer   int     // index of the cache slot
	Heads   int     // H
	KVHeads int     // G; H % G == 0
	HeadDim int     // E
	Scale   float32 // multiplies q·k
	Window  int     // sliding window in positions; 0 = unlimited
}

// Node is one operation in the graph.
type Node struct {
	Op     Op
	In     []int  // indices of input nodes
	Cols   int    // columns of the output (rows are T, or 1 after OpLastRow)
	Weight string // weight name (OpEmbed, OpLinear, OpRMSNorm, OpHeadRMSNorm)
	Bias   string // optional bias name (OpLinear, OpLayerNorm)
	Name   string // a label for dumps and errors
	// More names further weights, after Weight and Bias (OpWKV7).
	More []string
	// Slot is the recurrent state slot an op carries across calls
	// (OpTokenShift, OpWKV7; see Graph.States).
	Slot int

	Eps     float32 // OpRMSNorm, OpHeadRMSNorm, OpLayerNorm, OpWKV7 (its group norm)
	Offset  float32 // OpRMSNorm, OpHeadRMSNorm gain offset (1 for Gemma's (1+w))
	HeadDim int     // OpHeadRMSNorm, OpWKV7: E, the span each norm covers
	Scale   float32 // OpScale
	Lo, Hi  int     // OpColumns
	Rope    *Rope   // OpRoPE
	Attn    *Attn   // OpAttention
}

// Graph is a forward pass: nodes in topological order, the weights they
// name with their shapes, and the output node.
type Graph struct {
	Nodes   []Node
	Weights map[string][]int // name -> shape (outermost first)
	Output  int              // node index of the logits
	Layers  int              // attention layers (cache slots) used
	KVCols  int              // columns per cache row: G*E (max over layers)
	// States holds the size in floats of each recurrent state slot: what
	// a recurrent op carries from one call to the next (zero at the start
	// of a sequence).
	States []int
}

// New returns an empty graph.
func New() *Graph { return &Graph{Weights: map[string][]int{}, Output: -1} }

func (g *Graph) add(n Node) int {
	g.Nodes = append(g.Nodes, n)
	return len(g.Nodes) - 1
}

func (g *Graph) cols(i int) int { return g.Nodes[i].Cols }

// weight declares a weight; a second declaration must agree on the shape.
func (g *Graph) weight(name string, shape ...int) {
	if old, ok := g.Weights[name]; ok {
		if !sameShape(old, shape) {
			panic(fmt.Sprintf("graph: weight %q declared as %v and %v", name, old, shape))
		}
		return
	}
	g.Weights[name] = shape
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
