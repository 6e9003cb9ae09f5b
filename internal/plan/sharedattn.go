package plan

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// checkSharedAttn checks a shared_attention step: causal attention of its
// one input q over cache layer Attn.Layer, which it does not write.
func (p *Plan) checkSharedAttn(st *Step, q, o Buffer) *Error {
	a := st.Attn
	if a == nil {
		return errf(".attn", "missing")
	}
	if a.Heads < 1 || a.KVHeads < 1 || a.Heads%a.KVHeads != 0 || a.Heads > MaxCols {
		return errf(".attn.heads", "%d query heads over %d key/value heads", a.Heads, a.KVHeads)
	}
	if a.HeadDim < 1 || a.HeadDim > MaxCols {
		return errf(".attn.head_dim", "%d is outside [1, %d]", a.HeadDim, MaxCols)
	}
	if a.Bidirectional || a.Tile != 0 {
		return errf(".attn", "shared attention reads the cache: it is causal and has no tiles")
	}
	if a.Layer < 0 || a.Layer >= p.KV.Layers {
		return errf(".attn.layer", "%d is outside the %d cache layers", a.Layer, p.KV.Layers)
	}
	if a.Window < 0 || !finite32(a.Scale) {
		return errf(".attn", "window %d, scale %v", a.Window, a.Scale)
	}
	if int64(q.Cols) != int64(a.Heads)*int64(a.HeadDim) {
		return errf(".in", "q %d columns for %d heads of %d", q.Cols, a.Heads, a.HeadDim)
	}
	if q.Rows != p.Rows || o.Rows != p.Rows || o.Cols != q.Cols {
		return errf(".out", "shared attention rows q %d out %dx%d in a pass of %d rows", q.Rows, o.Rows, o.Cols, p.Rows)
	}
	return nil
}

// checkShared requires every shared_attention step to read a cache layer
// an earlier attention step writes with the same key/value heads and head
// size: the rows it reads are the ones that step stored in the pass.
func (p *Plan) checkShared() error {
	for s, st := range p.Steps {
		if st.Op != op.SharedAttention {
			continue
		}
		a, ok := st.Attn, false
		for _, w := range p.Steps[:s] {
			if w.Op == op.Attention && !w.Attn.Bidirectional && w.Attn.Layer == a.Layer {
				if w.Attn.KVHeads != a.KVHeads || w.Attn.HeadDim != a.HeadDim {
					return errf(fmt.Sprintf("steps[%d].attn", s), "reads cache layer %d as %d heads of %d, written as %d heads of %d",
						a.Layer, a.KVHeads, a.HeadDim, w.Attn.KVHeads, w.Attn.HeadDim)
				}
				ok = true
			}
		}
		if !ok {
			return errf(fmt.Sprintf("steps[%d].attn.layer", s), "no earlier attention step writes cache layer %d", a.Layer)
		}
	}
	return nil
}
