package graph

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// The builder methods append a node and return its index. They panic when
// shapes disagree: architectures validate user configs before building, so a
// mismatch here is a bug in the architecture code, not bad input.

// Tokens adds the graph input.
func (g *Graph) Tokens() int { return g.add(Node{Op: op.Tokens, Name: "tokens"}) }

// Embed gathers rows of table [V, D].
func (g *Graph) Embed(ids int, table string, vocab, dim int) int {
	g.weight(table, vocab, dim)
	return g.add(Node{Op: op.Embed, In: []int{ids}, Cols: dim, Weight: table, Name: table})
}

// Linear adds x · w^T (+ bias); w is [n, cols(x)]. bias may be "".
func (g *Graph) Linear(x int, w string, n int, bias string) int {
	k := g.cols(x)
	g.weight(w, n, k)
	if bias != "" {
		g.weight(bias, n)
	}
	return g.add(Node{Op: op.Linear, In: []int{x}, Cols: n, Weight: w, Bias: bias, Name: w})
}

// RMSNorm normalizes each row of x and multiplies by (w + offset).
func (g *Graph) RMSNorm(x int, w string, eps, offset float32) int {
	c := g.cols(x)
	g.weight(w, c)
	return g.add(Node{Op: op.RMSNorm, In: []int{x}, Cols: c, Weight: w, Eps: eps, Offset: offset, Name: w})
}

// HeadRMSNorm normalizes each headDim-wide head of x on its own and
// multiplies it by (w + offset); w is [headDim], shared by the heads.
func (g *Graph) HeadRMSNorm(x int, w string, headDim int, eps, offset float32) int {
	c := g.cols(x)
	if headDim <= 0 || c%headDim != 0 {
		panic(fmt.Sprintf("graph: head rms norm of head size %d on %d columns", headDim, c))
	}
	g.weight(w, headDim)
	return g.add(Node{Op: op.HeadRMSNorm, In: []int{x}, Cols: c, Weight: w, Eps: eps, Offset: offset,
		HeadDim: headDim, Name: w})
}

func (g *Graph) binary(o op.Op, x, y int) int {
	if g.cols(x) != g.cols(y) {
		panic(fmt.Sprintf("graph: %v of %d and %d columns", o, g.cols(x), g.cols(y)))
	}
	return g.add(Node{Op: o, In: []int{x, y}, Cols: g.cols(x)})
}

// Add adds x + y.
func (g *Graph) Add(x, y int) int { return g.binary(op.Add, x, y) }

// Mul adds x * y elementwise.
func (g *Graph) Mul(x, y int) int { return g.binary(op.Mul, x, y) }

// Scale adds x * s.
func (g *Graph) Scale(x int, s float32) int {
	return g.add(Node{Op: op.Scale, In: []int{x}, Cols: g.cols(x), Scale: s})
}

// SiLU adds x * sigmoid(x).
func (g *Graph) SiLU(x int) int { return g.add(Node{Op: op.SiLU, In: []int{x}, Cols: g.cols(x)}) }

// GELUTanh adds the tanh-approximated GELU of x.
func (g *Graph) GELUTanh(x int) int {
	return g.add(Node{Op: op.GELUTanh, In: []int{x}, Cols: g.cols(x)})
}

// GELUF16 adds the tanh-approximated GELU of x through llama.cpp's
// binary16 table (kernel.GELUF16).
func (g *Graph) GELUF16(x int) int {
	return g.add(Node{Op: op.GELUF16, In: []int{x}, Cols: g.cols(x)})
}

// RoPE rotates the heads of x; cols(x) must be a multiple of r.HeadDim.
func (g *Graph) RoPE(x int, r Rope) int {
	if r.HeadDim <= 0 || g.cols(x)%r.HeadDim != 0 || r.RotDim > r.HeadDim || r.RotDim%2 != 0 ||
		len(r.InvFreq) != r.RotDim/2 || !sectionsFit(r.Sections, r.RotDim/2) {
		panic(fmt.Sprintf("graph: rope with head dim %d, rot dim %d, %d freqs on %d columns",
			r.HeadDim, r.RotDim, len(r.InvFreq), g.cols(x)))
	}
	return g.add(Node{Op: op.RoPE, In: []int{x}, Cols: g.cols(x), Rope: &r})
}

// sectionsFit reports whether rope sections (none, or positive lengths)
// add up to the half pairs.
func sectionsFit(sec []int, half int) bool {
	if len(sec) == 0 {
		return true
	}
	sum := 0
	for _, n := range sec {
		if n <= 0 {
			return false
		}
		sum += n
	}
	return sum == half
}

// Attention adds cached causal attention over q, k, v.
func (g *Graph) Attention(q, k, v int, a Attn) int {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 ||
		g.cols(q) != a.Heads*a.HeadDim || g.cols(k) != a.KVHeads*a.HeadDim || g.cols(v) != g.cols(k) {
		panic(fmt.Sprintf("graph: attention heads %d/%d dim %d on q %d k %d v %d columns",
			a.Heads, a.KVHeads, a.HeadDim, g.cols(q), g.cols(k), g.cols(v)))
	}
	if a.Tile < 0 || (a.Tile > 0 && !a.Bidirectional) {
		panic(fmt.Sprintf("graph: attention tile %d (bidirectional %v)", a.Tile, a.Bidirectional))
	}
	if !a.Bidirectional {
		// bidirectional attention uses no cache slot
		if a.Layer+1 > g.Layers {
			g.Layers = a.Layer + 1
		}
		if c := a.KVHeads * a.HeadDim; c > g.KVCols {
			g.KVCols = c
		}
	}
	return g.add(Node{Op: op.Attention, In: []int{q, k, v}, Cols: g.cols(q), Attn: &a})
}

// Columns copies columns [lo, hi) of x.
func (g *Graph) Columns(x, lo, hi int) int {
	if lo < 0 || hi > g.cols(x) || lo >= hi {
		panic(fmt.Sprintf("graph: columns [%d,%d) of %d", lo, hi, g.cols(x)))
	}
	return g.add(Node{Op: op.Columns, In: []int{x}, Cols: hi - lo, Lo: lo, Hi: hi})
}

// HeadColumns copies columns [lo, hi) of each group-wide block of x, the
// blocks' ranges side by side (a per-head part of a projection whose heads
// interleave two parts).
func (g *Graph) HeadColumns(x, group, lo, hi int) int {
	if group <= 0 || g.cols(x)%group != 0 || lo < 0 || hi > group || lo >= hi {
		panic(fmt.Sprintf("graph: columns [%d,%d) of blocks of %d in %d", lo, hi, group, g.cols(x)))
	}
	return g.add(Node{Op: op.Columns, In: []int{x}, Cols: g.cols(x) / group * (hi - lo), Lo: lo, Hi: hi, Group: group})
}

// LastRow keeps the last row of x.
func (g *Graph) LastRow(x int) int {
	return g.add(Node{Op: op.SelectRows, In: []int{x}, Cols: g.cols(x)})
}

// Rows adds a graph input of cols floats a row (a vision encoder's
// patches), given to Interpreter.RunInput.
func (g *Graph) Rows(cols int) int {
	return g.add(Node{Op: op.Rows, Cols: cols, Name: "rows"})
}

// GroupRows joins each k consecutive rows of x into one row of k*cols(x)
// columns; the pass must have a multiple of k rows.
func (g *Graph) GroupRows(x, k int) int { return g.GroupRowsAfter(x, 0, k) }

// GroupRowsAfter is GroupRows over the rows of x after its first skip
// rows, which are dropped (a vision encoder's class token); the pass must
// have skip plus a multiple of k rows.
func (g *Graph) GroupRowsAfter(x, skip, k int) int {
	if k < 1 || skip < 0 {
		panic(fmt.Sprintf("graph: group of %d rows after %d", k, skip))
	}
	return g.add(Node{Op: op.GroupRows, In: []int{x}, Cols: k * g.cols(x), Group: k, Lo: skip})
}

// GatherCols copies columns idx (ascending, distinct) of x (op.GatherCols).
func (g *Graph) GatherCols(x int, idx []int) int {
	g.checkIndex(x, idx)
	return g.add(Node{Op: op.GatherCols, In: []int{x}, Cols: len(idx), Index: append([]int(nil), idx...)})
}

// ZeroCols copies x with columns idx (ascending, distinct) set to zero
// (op.ZeroCols).
func (g *Graph) ZeroCols(x int, idx []int) int {
	g.checkIndex(x, idx)
	return g.add(Node{Op: op.ZeroCols, In: []int{x}, Cols: g.cols(x), Index: append([]int(nil), idx...)})
}

func (g *Graph) checkIndex(x int, idx []int) {
	if err := CheckIndex(idx, g.cols(x)); err != nil {
		panic(err)
	}
}

// CheckIndex reports whether idx is a non-empty ascending list of distinct
// columns of a value of cols columns.
func CheckIndex(idx []int, cols int) error {
	if len(idx) == 0 {
		return fmt.Errorf("graph: an empty column list")
	}
	for i, c := range idx {
		if c < 0 || c >= cols || (i > 0 && c <= idx[i-1]) {
			return fmt.Errorf("graph: column list %v is not ascending within [0, %d)", idx, cols)
		}
	}
	return nil
}

// Hadamard rotates each row of x by blockdiag(H_P)/sqrt(P), P a power of
// two dividing cols(x) (op.Hadamard): an online rotation whose inverse is
// folded into the weights that read its output.
func (g *Graph) Hadamard(x, p int) int {
	if p < 1 || p&(p-1) != 0 || g.cols(x)%p != 0 {
		panic(fmt.Sprintf("graph: hadamard blocks of %d on %d columns", p, g.cols(x)))
	}
	return g.add(Node{Op: op.Hadamard, In: []int{x}, Cols: g.cols(x), HeadDim: p})
}

// SetOutput marks node i as the graph's output.
func (g *Graph) SetOutput(i int) { g.Output = i }
