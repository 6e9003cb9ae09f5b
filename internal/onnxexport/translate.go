package onnxexport

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/onnx"
	"github.com/aotlm/aotlm/internal/op"
)

// The names of the graphs' inputs and outputs (onnxruntime-genai's).
const (
	InputIDs      = "input_ids"
	PositionIDs   = "position_ids"
	AttentionMask = "attention_mask"
	Logits        = "logits"
)

// PastKey names the input holding cache layer l's keys.
func PastKey(l int) string { return fmt.Sprintf("past_key_values.%d.key", l) }

// PastValue names the input holding cache layer l's values.
func PastValue(l int) string { return fmt.Sprintf("past_key_values.%d.value", l) }

// PresentKey names the output holding cache layer l's keys after the pass.
func PresentKey(l int) string { return fmt.Sprintf("present.%d.key", l) }

// PresentValue names the output holding cache layer l's values after the
// pass.
func PresentValue(l int) string { return fmt.Sprintf("present.%d.value", l) }

// pass holds what one graph's translation shares between nodes.
type pass struct {
	*builder
	g      *graph.Graph
	w      graph.Weights
	q      quantizer
	rows   int64 // N, the tokens of the pass
	ctx    int64
	vals   []string // ONNX value of each graph node
	nrows  []int64  // rows of each graph node
	ropes  map[*graph.Rope][2]string
	masks  map[int]string // window -> [1,1,N,ctx] bool visibility
	sel    string         // [1,1,ctx,N] float: the slot each row writes
	keep   string         // [1,1,ctx,1] float: 1 where the cache is kept
	posCol string         // position_ids as [1,N,1]
	arange string         // [ctx] int64 0..ctx-1
	caches []cacheIO
}

type cacheIO struct {
	layer    int
	kvHeads  int64
	headDim  int64
	used     bool
	key, val string // the present values
}

// translate builds the ONNX graph of g for passes of rows tokens over a
// cache of ctx positions.
func translate(name string, g *graph.Graph, w graph.Weights, st *store, q quantizer, rows, ctx int) (*onnx.Graph, error) {
	p := &pass{
		builder: newBuilder(name, st), g: g, w: w, q: q, rows: int64(rows), ctx: int64(ctx),
		vals: make([]string, len(g.Nodes)), nrows: make([]int64, len(g.Nodes)),
		ropes: map[*graph.Rope][2]string{}, masks: map[int]string{},
	}
	if err := checkOps(g); err != nil {
		return nil, err
	}
	p.caches = make([]cacheIO, g.Layers)
	for i := range g.Nodes {
		if a := g.Nodes[i].Attn; a != nil {
			p.caches[a.Layer] = cacheIO{layer: a.Layer, kvHeads: int64(a.KVHeads), headDim: int64(a.HeadDim), used: true}
		}
	}
	p.graph().Inputs = append(p.graph().Inputs,
		onnx.Value{Name: InputIDs, Type: onnx.Int64, Dims: []int64{1, p.rows}},
		onnx.Value{Name: PositionIDs, Type: onnx.Int64, Dims: []int64{1, p.rows}},
		onnx.Value{Name: AttentionMask, Type: onnx.Int64, Dims: []int64{1, p.ctx}},
	)
	for _, c := range p.caches {
		if !c.used {
			return nil, fmt.Errorf("onnx export: cache layer %d has no attention node", c.layer)
		}
		dims := []int64{1, c.kvHeads, p.ctx, c.headDim}
		p.graph().Inputs = append(p.graph().Inputs,
			onnx.Value{Name: PastKey(c.layer), Type: q.cacheType(), Dims: dims},
			onnx.Value{Name: PastValue(c.layer), Type: q.cacheType(), Dims: dims})
	}
	p.positions()
	for i := range g.Nodes {
		if err := p.node(i); err != nil {
			n := &g.Nodes[i]
			return nil, fmt.Errorf("onnx export: node %d (%v %s): %w", i, n.Op, n.Name, err)
		}
	}
	out := p.vals[g.Output]
	p.rename(out, Logits)
	p.graph().Outputs = append(p.graph().Outputs, onnx.Value{Name: Logits, Type: onnx.Float,
		Dims: []int64{1, p.nrows[g.Output], int64(g.Nodes[g.Output].Cols)}})
	for _, c := range p.caches {
		dims := []int64{1, c.kvHeads, p.ctx, c.headDim}
		p.rename(c.key, PresentKey(c.layer))
		p.rename(c.val, PresentValue(c.layer))
		p.graph().Outputs = append(p.graph().Outputs,
			onnx.Value{Name: PresentKey(c.layer), Type: q.cacheType(), Dims: dims},
			onnx.Value{Name: PresentValue(c.layer), Type: q.cacheType(), Dims: dims})
	}
	return &p.builder.g, nil
}

// graph is the ONNX graph being built.
func (p *pass) graph() *onnx.Graph { return &p.builder.g }

// checkOps refuses a graph with an op the export has no mapping for,
// naming the first one.
func checkOps(g *graph.Graph) error {
	for i := range g.Nodes {
		n := &g.Nodes[i]
		switch n.Op {
		case op.Tokens, op.Embed, op.Linear, op.RMSNorm, op.HeadRMSNorm, op.LayerNorm,
			op.Add, op.Mul, op.Sub, op.Scale, op.SiLU, op.GELUTanh, op.Sigmoid, op.Tanh, op.ReLU,
			op.RoPE, op.Columns, op.SelectRows, op.GatherCols, op.ZeroCols, op.Hadamard:
		case op.Attention:
			if a := n.Attn; a.Bidirectional || a.Tile > 0 {
				return fmt.Errorf("onnx export: node %s: bidirectional attention (a vision or text encoder) is not exported", n.Name)
			}
		default:
			return fmt.Errorf("onnx export: op %v (node %d %s) has no ONNX mapping in the export; "+
				"recurrent state ops, shared cache slots and vision inputs are not exported", n.Op, i, n.Name)
		}
		if n.Rope != nil && len(n.Rope.Sections) > 0 {
			return fmt.Errorf("onnx export: node %s: multi-axis RoPE (sections %v) is not exported", n.Name, n.Rope.Sections)
		}
	}
	return nil
}

// positions makes the values every attention layer shares: which cache
// slot each row writes, and the causal visibility of the cache.
func (p *pass) positions() {
	ar := make([]int64, p.ctx)
	for i := range ar {
		ar[i] = int64(i)
	}
	p.arange = p.constant(onnx.Int64, []int64{p.ctx}, int64Bytes(ar))
	p.posCol = p.unsqueeze(PositionIDs, 2)            // [1,N,1]
	eq := p.op("Equal", []string{p.arange, p.posCol}) // [1,N,ctx]
	sel := p.op("Cast", []string{eq}, intAttr("to", int64(onnx.Float)))
	selT := p.unsqueeze(p.transpose(sel, 0, 2, 1), 1) // [1,1,ctx,N]
	written := p.op("ReduceSum", []string{selT, p.ints(3)}, intAttr("keepdims", 1))
	p.sel = selT
	p.keep = p.op("Sub", []string{p.scalar(1), written}) // [1,1,ctx,1]
}

// mask returns the [1,1,N,ctx] visibility of cache slots for a sliding
// window (0: none): slot j is seen by row n when j <= pos[n], j > pos[n] -
// window, and attention_mask[j] is 1.
func (p *pass) mask(window int) string {
	if m, ok := p.masks[window]; ok {
		return m
	}
	vis := p.op("LessOrEqual", []string{p.arange, p.posCol}) // [1,N,ctx]
	if window > 0 {
		lo := p.op("Sub", []string{p.posCol, p.ints(int64(window))})
		vis = p.op("And", []string{vis, p.op("Greater", []string{p.arange, lo})})
	}
	valid := p.op("Cast", []string{AttentionMask}, intAttr("to", int64(onnx.Bool)))
	vis = p.op("And", []string{vis, p.unsqueeze(valid, 1)}) // [1,N,ctx]
	m := p.unsqueeze(vis, 1)
	p.masks[window] = m
	return m
}

func (p *pass) in(n *graph.Node, k int) string { return p.vals[n.In[k]] }

func (p *pass) node(i int) error {
	n := &p.g.Nodes[i]
	rows := p.rows
	if len(n.In) > 0 {
		rows = p.nrows[n.In[0]]
	}
	if n.Op == op.SelectRows {
		rows = 1
	}
	p.nrows[i] = rows
	C := int64(n.Cols)
	var out string
	switch n.Op {
	case op.Tokens:
		out = InputIDs
	case op.Embed:
		var err error
		if out, err = p.q.embed(p, n); err != nil {
			return err
		}
	case op.Linear:
		w, err := p.q.linear(p, n)
		if err != nil {
			return err
		}
		out = p.op("MatMul", []string{p.q.activation(p, n, p.in(n, 0)), w})
		if i != p.g.Output { // the logits stay float: a calibrated range would clip them
			out = p.q.output(p, n, out)
		}
		if n.Bias != "" {
			out = p.op("Add", []string{out, p.vector(n.Bias, 0)})
		}
	case op.RMSNorm:
		out = p.op("Mul", []string{p.rms(p.in(n, 0), n.Eps), p.vector(n.Weight, n.Offset)})
	case op.HeadRMSNorm:
		x := p.reshape(p.in(n, 0), 1, rows, C/int64(n.HeadDim), int64(n.HeadDim))
		x = p.rms(x, n.Eps)
		if n.Weight != "" {
			x = p.op("Mul", []string{x, p.vector(n.Weight, n.Offset)})
		} else if g := 1 + n.Offset; g != 1 {
			x = p.op("Mul", []string{x, p.scalar(g)})
		}
		out = p.reshape(x, 1, rows, C)
	case op.LayerNorm:
		out = p.op("LayerNormalization", []string{p.in(n, 0), p.vector(n.Weight, 0), p.vector(n.Bias, 0)},
			intAttr("axis", -1), floatAttr("epsilon", n.Eps))
	case op.Add, op.Mul, op.Sub:
		out = p.op(map[op.Op]string{op.Add: "Add", op.Mul: "Mul", op.Sub: "Sub"}[n.Op],
			[]string{p.in(n, 0), p.in(n, 1)})
	case op.Scale:
		s := n.Scale
		if n.Weight != "" {
			s *= p.w[n.Weight][0]
		}
		out = p.op("Mul", []string{p.in(n, 0), p.scalar(s)})
	case op.SiLU:
		x := p.in(n, 0)
		out = p.op("Mul", []string{x, p.op("Sigmoid", []string{x})})
	case op.GELUTanh:
		out = p.op("Gelu", []string{p.in(n, 0)}, stringAttr("approximate", "tanh"))
	case op.Sigmoid, op.Tanh, op.ReLU:
		out = p.op(map[op.Op]string{op.Sigmoid: "Sigmoid", op.Tanh: "Tanh", op.ReLU: "Relu"}[n.Op],
			[]string{p.in(n, 0)})
	case op.RoPE:
		out = p.rope(p.in(n, 0), n.Rope, rows, C)
	case op.Attention:
		out = p.attention(n, rows)
	case op.Columns:
		x := p.in(n, 0)
		if n.Group > 0 {
			inC := int64(p.g.Nodes[n.In[0]].Cols)
			x = p.reshape(x, 1, rows, inC/int64(n.Group), int64(n.Group))
			x = p.slice(x, 3, int64(n.Lo), int64(n.Hi))
			out = p.reshape(x, 1, rows, C)
		} else {
			out = p.slice(x, 2, int64(n.Lo), int64(n.Hi))
		}
	case op.SelectRows:
		out = p.slice(p.in(n, 0), 1, -1, math.MaxInt64)
	case op.GatherCols:
		idx := make([]int64, len(n.Index))
		for k, j := range n.Index {
			idx[k] = int64(j)
		}
		out = p.op("Gather", []string{p.in(n, 0), p.ints(idx...)}, intAttr("axis", 2))
	case op.ZeroCols:
		m := make([]float32, C)
		for k := range m {
			m[k] = 1
		}
		for _, j := range n.Index {
			m[j] = 0
		}
		out = p.op("Mul", []string{p.in(n, 0), p.constant(onnx.Float, []int64{C}, floatBytes(m))})
	case op.Hadamard:
		eye := make([]float32, C*C)
		for k := int64(0); k < C; k++ {
			eye[k*C+k] = 1
		}
		h := make([]float32, C*C)
		op.HadamardRows(h, eye, n.HeadDim)
		t := p.st.put(fmt.Sprintf("hadamard.%d.%d", C, n.HeadDim), onnx.Float, []int64{C, C},
			func() []byte { return floatBytes(h) })
		out = p.op("MatMul", []string{p.in(n, 0), p.weight(t)})
	default:
		return fmt.Errorf("op %v is not exported", n.Op)
	}
	p.vals[i] = out
	return nil
}

// vector returns the stored weight name (a [C] vector) plus offset.
func (p *pass) vector(name string, offset float32) string {
	v := p.w[name]
	key := name
	if offset != 0 {
		key = fmt.Sprintf("%s+%g", name, offset)
	}
	t := p.st.put(key, onnx.Float, []int64{int64(len(v))}, func() []byte {
		if offset == 0 {
			return floatBytes(v)
		}
		s := make([]float32, len(v))
		for i, x := range v {
			s[i] = x + offset
		}
		return floatBytes(s)
	})
	return p.weight(t)
}

// rms returns x / sqrt(mean(x^2, last axis) + eps).
func (p *pass) rms(x string, eps float32) string {
	ms := p.op("ReduceMean", []string{p.op("Mul", []string{x, x}), p.ints(-1)}, intAttr("keepdims", 1))
	inv := p.op("Reciprocal", []string{p.op("Sqrt", []string{p.op("Add", []string{ms, p.scalar(eps)})})})
	return p.op("Mul", []string{x, inv})
}

// ropeTables returns the cos and sin of each row's position, [1,N,1,R/2],
// gathered from tables of every cache position computed as the
// interpreter computes them.
func (p *pass) ropeTables(r *graph.Rope) (string, string) {
	if t, ok := p.ropes[r]; ok {
		return t[0], t[1]
	}
	half := int64(len(r.InvFreq))
	cos := make([]float32, p.ctx*half)
	sin := make([]float32, p.ctx*half)
	for pos := int64(0); pos < p.ctx; pos++ {
		for i, f := range r.InvFreq {
			s, c := math.Sincos(float64(pos) * f)
			if m := r.Scale; m != 0 && m != 1 {
				s, c = s*m, c*m
			}
			cos[pos*half+int64(i)], sin[pos*half+int64(i)] = float32(c), float32(s)
		}
	}
	key := fmt.Sprintf("rope.%x", ropeKey(r))
	tc := p.st.put(key+".cos", onnx.Float, []int64{p.ctx, half}, func() []byte { return floatBytes(cos) })
	ts := p.st.put(key+".sin", onnx.Float, []int64{p.ctx, half}, func() []byte { return floatBytes(sin) })
	c := p.unsqueeze(p.op("Gather", []string{p.weight(tc), PositionIDs}, intAttr("axis", 0)), 2)
	s := p.unsqueeze(p.op("Gather", []string{p.weight(ts), PositionIDs}, intAttr("axis", 0)), 2)
	p.ropes[r] = [2]string{c, s}
	return c, s
}

// ropeKey hashes a rope's frequencies and scale (FNV-1a), so layers with
// the same rope share one table.
func ropeKey(r *graph.Rope) uint64 {
	h := uint64(14695981039346656037)
	mix := func(x uint64) {
		for k := 0; k < 8; k++ {
			h ^= x & 0xFF
			h *= 1099511628211
			x >>= 8
		}
	}
	for _, f := range r.InvFreq {
		mix(math.Float64bits(f))
	}
	mix(math.Float64bits(r.Scale))
	return h
}

// rope rotates each head of x [1,rows,C] by its row's position.
func (p *pass) rope(x string, r *graph.Rope, rows, C int64) string {
	E, R := int64(r.HeadDim), int64(r.RotDim)
	half := R / 2
	heads := C / E
	cos, sin := p.ropeTables(r)
	x4 := p.reshape(x, 1, rows, heads, E)
	rot := x4
	if R < E {
		rot = p.slice(x4, 3, 0, R)
	}
	var out string
	if r.Style == graph.RopeHalf {
		a := p.slice(rot, 3, 0, half)
		b := p.slice(rot, 3, half, R)
		oa := p.op("Sub", []string{p.op("Mul", []string{a, cos}), p.op("Mul", []string{b, sin})})
		ob := p.op("Add", []string{p.op("Mul", []string{a, sin}), p.op("Mul", []string{b, cos})})
		out = p.concat(3, oa, ob)
	} else {
		x5 := p.reshape(rot, 1, rows, heads, half, 2)
		a := p.slice(x5, 4, 0, 1)
		b := p.slice(x5, 4, 1, 2)
		c5, s5 := p.unsqueeze(cos, 4), p.unsqueeze(sin, 4)
		oa := p.op("Sub", []string{p.op("Mul", []string{a, c5}), p.op("Mul", []string{b, s5})})
		ob := p.op("Add", []string{p.op("Mul", []string{a, s5}), p.op("Mul", []string{b, c5})})
		out = p.reshape(p.concat(4, oa, ob), 1, rows, heads, R)
	}
	if R < E {
		out = p.concat(3, out, p.slice(x4, 3, R, E))
	}
	return p.reshape(out, 1, rows, C)
}

// attention writes the pass's keys and values into the cache slots of
// their positions (a one-hot matmul: no concatenation, the cache keeps its
// size) and attends each query row over the slots the mask lets it see.
func (p *pass) attention(n *graph.Node, rows int64) string {
	a := n.Attn
	H, G, E := int64(a.Heads), int64(a.KVHeads), int64(a.HeadDim)
	group := H / G
	c := &p.caches[a.Layer]
	update := func(x, past string, value bool) (present, read string) {
		x = p.transpose(p.reshape(x, 1, rows, G, E), 0, 2, 1, 3) // [1,G,N,E]
		x = p.q.cacheRows(p, a.Layer, value, x)
		written := p.op("MatMul", []string{p.sel, x}) // [1,G,ctx,E]
		old := p.q.cacheIn(p, a.Layer, value, past)
		full := p.op("Add", []string{p.op("Mul", []string{old, p.keep}), written})
		present = p.q.cacheOut(p, a.Layer, value, full)
		if present == full {
			return present, full
		}
		return present, p.q.cacheIn(p, a.Layer, value, present)
	}
	var keys, vals string
	c.key, keys = update(p.in(n, 1), PastKey(a.Layer), false)
	c.val, vals = update(p.in(n, 2), PastValue(a.Layer), true)
	q := p.transpose(p.reshape(p.in(n, 0), 1, rows, H, E), 0, 2, 1, 3) // [1,H,N,E]
	q = p.reshape(q, 1, G, group*rows, E)
	s := p.op("MatMul", []string{q, p.transpose(keys, 0, 1, 3, 2)}) // [1,G,grp*N,ctx]
	s = p.op("Mul", []string{s, p.scalar(a.Scale)})
	s = p.reshape(s, 1, H, rows, p.ctx)
	s = p.op("Where", []string{p.mask(a.Window), s, p.scalar(negBig)})
	pr := p.op("Softmax", []string{s}, intAttr("axis", -1))
	pr = p.reshape(pr, 1, G, group*rows, p.ctx)
	o := p.op("MatMul", []string{pr, vals}) // [1,G,grp*N,E]
	o = p.transpose(p.reshape(o, 1, H, rows, E), 0, 2, 1, 3)
	return p.reshape(o, 1, rows, H*E)
}
