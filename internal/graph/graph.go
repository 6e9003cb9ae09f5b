package graph

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

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

// Rope configures op.RoPE.
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
	// Sections, when set, splits the R/2 pairs into consecutive runs of
	// these lengths (summing to R/2): the pairs of run j rotate by
	// component j of the row's position, not by the row's place in the
	// sequence. A vision encoder's 2-D RoPE reads (row, col), Qwen2-VL's
	// M-RoPE (t, h, w). The components come from Input.Positions; without
	// them every component is the row's cache position, which is plain
	// RoPE.
	Sections []int
}

// Components is the number of position components a row carries for r:
// len(Sections), or 1.
func (r *Rope) Components() int { return max(len(r.Sections), 1) }

// Component returns the position component pair i reads.
func (r *Rope) Component(i int) int {
	for j, n := range r.Sections {
		if i < n {
			return j
		}
		i -= n
	}
	return 0
}

// PosComponents is the number of position components per row that
// Input.Positions holds for g: the most any RoPE node reads (1 when none
// has sections).
func (g *Graph) PosComponents() int {
	n := 1
	for i := range g.Nodes {
		if r := g.Nodes[i].Rope; r != nil {
			n = max(n, r.Components())
		}
	}
	return n
}

// Attn configures op.Attention and op.SharedAttention.
type Attn struct {
	Layer   int     // index of the cache slot
	Heads   int     // H
	KVHeads int     // G; H % G == 0
	HeadDim int     // E
	Scale   float32 // multiplies q·k
	// Window is the sliding window in positions; 0 = unlimited. Causal
	// attention sees the last Window positions (its own included),
	// bidirectional attention the positions at most Window/2 away on
	// either side (EmbeddingGemma's symmetric window).
	Window int
	// Bidirectional lets every row see every row of its pass, later ones
	// included (a vision encoder, a text encoder); otherwise attention is
	// causal.
	Bidirectional bool
	// Tile, with Bidirectional, limits a row to the rows of its Tile x Tile
	// square of the 2-D position grid: those whose first two position
	// components (a patch's row and column) divided by Tile equal its own
	// (Qwen2.5-VL's window attention). 0: every row of the pass.
	Tile int
}

// TileKey returns the tile of a row at 2-D position (r, c) for tiles of
// side tile: rows attend each other under Attn.Tile when their keys are
// equal.
func TileKey(r, c, tile int) int64 { return int64(r/tile)<<32 | int64(c/tile) }

// Node is one operation in the graph.
type Node struct {
	Op     op.Op
	In     []int  // indices of input nodes
	Cols   int    // columns of the output (rows are T, or 1 after op.SelectRows)
	Weight string // weight name (op.Embed, op.Linear, op.RMSNorm, op.HeadRMSNorm; optional for op.HeadRMSNorm and op.Scale)
	Bias   string // optional bias name (op.Linear, op.LayerNorm)
	Name   string // a label for dumps and errors
	// More names further weights, after Weight and Bias (op.WKV7).
	More []string
	// Slot is the recurrent state slot an op carries across calls
	// (op.TokenShift, op.WKV7, op.CausalConv; see Graph.States).
	Slot int

	Eps     float32 // op.RMSNorm, op.HeadRMSNorm, op.LayerNorm, op.WKV7 (its group norm)
	Offset  float32 // op.RMSNorm, op.HeadRMSNorm gain offset (1 for Gemma's (1+w))
	HeadDim int     // op.HeadRMSNorm, op.WKV7: E, the span each norm covers; op.Hadamard: its block P; op.CausalConv: the kernel K
	Scale   float32 // op.Scale
	Lo, Hi  int     // op.Columns; Lo alone: op.GroupRows, the leading rows dropped
	Index   []int   // op.GatherCols, op.ZeroCols: the columns, ascending
	Group   int     // op.GroupRows: rows joined into one; op.Columns: the block width the range repeats in
	Rope    *Rope   // op.RoPE
	Attn    *Attn   // op.Attention, op.SharedAttention
	// Delta holds the head sizes of op.GatedDelta.
	Delta *op.DeltaDims
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
