package compile

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// arenaAlign is the alignment of buffer offsets in floats (64 bytes).
const arenaAlign = 16

// Lower returns the plan of g for passes of n rows and a cache of ctx
// positions, with buffers placed in the arena by Assign.
func Lower(g *graph.Graph, n, ctx int) (*plan.Plan, error) { return lower(g, n, ctx, false, false) }

// LowerVision returns the plan of a vision encoder's graph for passes of
// exactly n rows (the patches of one image): its rows input becomes a
// rows step, its attention is bidirectional and uses no cache, and
// group_rows joins rows. The plan has no cache layers.
func LowerVision(g *graph.Graph, n int) (*plan.Plan, error) { return lower(g, n, 1, true, false) }

// lowerRows is Lower for a causal graph that also reads input rows (a
// draft head's): its rows input becomes a rows step.
func lowerRows(g *graph.Graph, n, ctx int) (*plan.Plan, error) { return lower(g, n, ctx, false, true) }

func lower(g *graph.Graph, n, ctx int, vision, rowsIn bool) (*plan.Plan, error) {
	if n < 1 || n > plan.MaxRows {
		return nil, fmt.Errorf("compile: AR length %d is outside [1, %d]", n, plan.MaxRows)
	}
	if g.Output < 0 || g.Output >= len(g.Nodes) {
		return nil, fmt.Errorf("compile: graph has no output node")
	}
	p := &plan.Plan{Version: plan.Version, Rows: n, KV: plan.KV{Layers: g.Layers, Cols: g.KVCols, Ctx: ctx},
		State: append([]int(nil), g.States...)}
	if vision {
		if len(g.States) > 0 {
			return nil, fmt.Errorf("compile: a vision encoder with recurrent state")
		}
		p.KV = plan.KV{Ctx: ctx}
	}
	buf := make([]int, len(g.Nodes)) // node -> buffer id, -1 for the token input
	for i := range g.Nodes {
		nd := &g.Nodes[i]
		if nd.Op == op.Tokens {
			buf[i] = -1
			continue
		}
		o := nd.Op
		// a text graph's attention may be bidirectional (an encoder's),
		// not tiled; a vision graph's is bidirectional
		if vision && o == op.Attention && !nd.Attn.Bidirectional {
			return nil, fmt.Errorf("compile: node %d (%s): a vision encoder's attention must be bidirectional", i, nd.Name)
		}
		if !vision && (o == op.Rows || o == op.GroupRows || (o == op.Attention && nd.Attn.Tile > 0)) && !(rowsIn && o == op.Rows) {
			return nil, fmt.Errorf("compile: node %d (%s): %v belongs to a vision encoder, which compiles to a vision plan of its own", i, nd.Name, nd.Op)
		}
		if o == op.Invalid || o >= op.Count {
			return nil, fmt.Errorf("compile: node %d (%s): op %v has no plan form", i, nd.Name, nd.Op)
		}
		rows := n
		st := plan.Step{Op: o, Name: nd.Name, Eps: nd.Eps, Offset: nd.Offset, Scale: nd.Scale, Lo: nd.Lo, Hi: nd.Hi, Index: nd.Index,
			HeadDim: nd.HeadDim, Slot: nd.Slot, Group: nd.Group, Delta: nd.Delta}
		for _, in := range nd.In {
			if in < 0 || in >= i {
				return nil, fmt.Errorf("compile: node %d (%s): input %d is not an earlier node", i, nd.Name, in)
			}
			if buf[in] < 0 {
				continue // the token ids feed embed directly
			}
			st.In = append(st.In, buf[in])
		}
		if len(st.In) > 0 {
			rows = p.Buffers[st.In[0]].Rows
		}
		if o == op.SelectRows {
			// room for the logits of every row; a pass selects which
			rows = n
		}
		if o == op.GroupRows {
			if nd.Group < 1 || nd.Lo < 0 || rows < nd.Lo || (rows-nd.Lo)%nd.Group != 0 {
				return nil, fmt.Errorf("compile: node %d (%s): %d rows after the first %d do not group by %d", i, nd.Name, rows-nd.Lo, nd.Lo, nd.Group)
			}
			rows = (rows - nd.Lo) / nd.Group
			st.Group = nd.Group
		}
		if nd.Weight != "" {
			st.Weights = append(st.Weights, nd.Weight)
		}
		if nd.Bias != "" {
			st.Weights = append(st.Weights, nd.Bias)
		}
		st.Weights = append(st.Weights, nd.More...)
		if r := nd.Rope; r != nil {
			st.Rope = &plan.Rope{Half: r.Style == graph.RopeHalf, HeadDim: r.HeadDim, RotDim: r.RotDim,
				InvFreq: append([]float64(nil), r.InvFreq...), Scale: r.Scale, Sections: append([]int(nil), r.Sections...)}
		}
		if a := nd.Attn; a != nil {
			st.Attn = &plan.Attn{Layer: a.Layer, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
				Scale: a.Scale, Window: a.Window, Bidirectional: a.Bidirectional, Tile: a.Tile}
		}
		buf[i] = len(p.Buffers)
		st.Out = buf[i]
		p.Buffers = append(p.Buffers, plan.Buffer{Rows: rows, Cols: nd.Cols})
		p.Steps = append(p.Steps, st)
	}
	if buf[g.Output] < 0 {
		return nil, fmt.Errorf("compile: the graph's output is its token input")
	}
	p.Output = buf[g.Output]
	if err := Assign(p); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("compile: lowered plan for AR length %d: %w", n, err)
	}
	return p, nil
}

// Assign places p's buffers in the arena and sets p.Arena: a buffer is live
// from the step that writes it to the last step that reads it (the output
// to the end), and takes the lowest free offset that fits when it is
// written; a step's inputs are released after its output is placed, so
// they never overlap it.
func Assign(p *plan.Plan) error {
	last := make([]int, len(p.Buffers))
	for i := range last {
		last[i] = -1
	}
	for s, st := range p.Steps {
		for _, b := range st.In {
			last[b] = s
		}
	}
	last[p.Output] = len(p.Steps)
	var a allocator
	for s, st := range p.Steps {
		b := &p.Buffers[st.Out]
		size := int64(b.Rows) * int64(b.Cols)
		if size > plan.MaxArena {
			return fmt.Errorf("compile: buffer %d (%s) of %dx%d floats is too large", st.Out, st.Name, b.Rows, b.Cols)
		}
		b.Offset = a.alloc(int(size))
		if last[st.Out] < 0 { // never read: free at once
			a.free(b.Offset, int(size))
		}
		for i, in := range st.In {
			if last[in] == s && !dup(st.In[:i], in) {
				a.free(p.Buffers[in].Offset, p.Buffers[in].Size())
			}
		}
	}
	if a.top > plan.MaxArena {
		return fmt.Errorf("compile: the arena needs %d floats, more than %d", a.top, plan.MaxArena)
	}
	p.Arena = a.top
	return nil
}

func dup(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// allocator hands out aligned ranges of an arena that grows at its top.
type allocator struct {
	top   int
	holes []span // free ranges below top, sorted by offset, not adjacent
}

type span struct{ off, n int }

func roundUp(n int) int { return (n + arenaAlign - 1) / arenaAlign * arenaAlign }

func (a *allocator) alloc(n int) int {
	n = roundUp(n)
	for i, h := range a.holes {
		if h.n >= n {
			off := h.off
			if h.n == n {
				a.holes = append(a.holes[:i], a.holes[i+1:]...)
			} else {
				a.holes[i] = span{h.off + n, h.n - n}
			}
			return off
		}
	}
	// extend the topmost hole if it touches the top
	if k := len(a.holes) - 1; k >= 0 && a.holes[k].off+a.holes[k].n == a.top {
		off := a.holes[k].off
		a.holes = a.holes[:k]
		a.top = off + n
		return off
	}
	off := a.top
	a.top += n
	return off
}

func (a *allocator) free(off, n int) {
	n = roundUp(n)
	i := 0
	for i < len(a.holes) && a.holes[i].off < off {
		i++
	}
	a.holes = append(a.holes, span{})
	copy(a.holes[i+1:], a.holes[i:])
	a.holes[i] = span{off, n}
	// merge with the next, then the previous neighbour
	if i+1 < len(a.holes) && a.holes[i].off+a.holes[i].n == a.holes[i+1].off {
		a.holes[i].n += a.holes[i+1].n
		a.holes = append(a.holes[:i+1], a.holes[i+2:]...)
	}
	if i > 0 && a.holes[i-1].off+a.holes[i-1].n == a.holes[i].off {
		a.holes[i-1].n += a.holes[i].n
		a.holes = append(a.holes[:i], a.holes[i+1:]...)
	}
}
