package graph

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
)

// Weights maps weight names to their values, row-major.
type Weights map[string][]float32

// ErrContextFull is returned when a pass would write past the cache.
var ErrContextFull = errors.New("context is full")

// State is the attention cache of one sequence: for each layer, Ctx rows of
// keys and values of KVCols columns, and the next position to write.
type State struct {
	Ctx  int
	Pos  int         // positions 0..Pos-1 hold valid entries
	K, V [][]float32 // [layer][Ctx*KVCols]
	// Rec holds the recurrent state slots (Graph.States), zero at Pos 0.
	Rec  [][]float32
	cols int
	// once: the layers share one buffer (NewPassState); one pass only
	once bool
}

// Reset empties the cache and zeroes the recurrent state (the buffers are
// kept).
func (s *State) Reset() {
	s.Pos = 0
	for _, r := range s.Rec {
		clear(r)
	}
}

// Interpreter evaluates a graph with plain loops. It is slow and exact: the
// reference every compiled plan and kernel is tested against.
type Interpreter struct {
	g       *Graph
	w       Weights
	threads int
	hook    InputHook
}

// InputHook sees each input of every OpLinear and OpAttention node before
// the node runs: slot is the input's position in Node.In and x its value,
// rows by cols. It may return a replacement of the same length, used by
// this node only (a fake-quantized copy, say), or nil to keep x. It must
// not modify x. Calibration and quantization simulation use it.
type InputHook func(n *Node, slot int, x []float32, rows, cols int) []float32

// SetInputHook installs h (nil removes it).
func (in *Interpreter) SetInputHook(h InputHook) { in.hook = h }

// NewInterpreter checks that w holds every weight g names with the declared
// number of values, and returns an interpreter using up to threads goroutines
// for the larger ops (threads < 1 means 1).
func NewInterpreter(g *Graph, w Weights, threads int) (*Interpreter, error) {
	if g.Output < 0 || g.Output >= len(g.Nodes) {
		return nil, errors.New("graph: no output node")
	}
	for name, shape := range g.Weights {
		v, ok := w[name]
		if !ok {
			return nil, fmt.Errorf("graph: weight %q %v is missing", name, shape)
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		if len(v) != n {
			return nil, fmt.Errorf("graph: weight %q has %d values, want %v = %d", name, len(v), shape, n)
		}
	}
	if threads < 1 {
		threads = 1
	}
	return &Interpreter{g: g, w: w, threads: threads}, nil
}

// Graph returns the interpreted graph.
func (in *Interpreter) Graph() *Graph { return in.g }

// NewState allocates a cache for ctx positions.
func (in *Interpreter) NewState(ctx int) *State {
	s := &State{Ctx: ctx, cols: in.g.KVCols}
	s.K = make([][]float32, in.g.Layers)
	s.V = make([][]float32, in.g.Layers)
	for l := range s.K {
		s.K[l] = make([]float32, ctx*in.g.KVCols)
		s.V[l] = make([]float32, ctx*in.g.KVCols)
	}
	for _, n := range in.g.States {
		s.Rec = append(s.Rec, make([]float32, n))
	}
	return s
}

// NewPassState allocates a state for a single pass of up to ctx rows (a
// vision encoder): the causal attention layers, if any, share one key and
// one value buffer, since a layer's rows are not read after the next layer
// writes its own (bidirectional ones use no cache). A second pass on it
// is refused.
func (in *Interpreter) NewPassState(ctx int) *State {
	s := &State{Ctx: ctx, cols: in.g.KVCols, once: true}
	s.K = make([][]float32, in.g.Layers)
	s.V = make([][]float32, in.g.Layers)
	if in.g.Layers > 0 {
		k, v := make([]float32, ctx*in.g.KVCols), make([]float32, ctx*in.g.KVCols)
		for l := range s.K {
			s.K[l], s.V[l] = k, v
		}
	}
	for _, n := range in.g.States {
		s.Rec = append(s.Rec, make([]float32, n))
	}
	return s
}

// Run evaluates the graph for ids at positions st.Pos.. and advances st.Pos.
// It returns the output matrix and its row count. On error the state is
// unchanged.
func (in *Interpreter) Run(st *State, ids []int) (out []float32, rows int, err error) {
	return in.RunInput(st, Input{IDs: ids})
}

// Input is what one pass of the interpreter reads.
type Input struct {
	// IDs are the T token ids (a vision encoder's position ids). With
	// Embeds set, an id of -1 takes its row from Embeds instead of the
	// embedding table.
	IDs []int
	// Embeds holds T rows of the embedding width; only the rows whose id
	// is -1 are read (image embeddings placed in a text prompt).
	Embeds []float32
	// Rows holds T rows of the graph's op.Rows input (pixel patches).
	Rows []float32
	// Positions, when set, holds the rotary position of each row:
	// Graph.PosComponents values per row (Rope.Sections), row-major. nil
	// means each row's cache position for every component. Attention
	// still orders the rows by their cache position (causal masks, the
	// cache slot written), so positions may repeat or jump (Qwen2-VL's
	// image rows).
	Positions []int
}

// RunInput is Run with embedding rows in place of some token ids, or with
// the float rows of a graph that reads them.
func (in *Interpreter) RunInput(st *State, inp Input) (out []float32, rows int, err error) {
	ids := inp.IDs
	T := len(ids)
	if T == 0 {
		return nil, 0, errors.New("graph: run with no tokens")
	}
	for i := range in.g.Nodes {
		n := &in.g.Nodes[i]
		switch n.Op {
		case op.Rows:
			if len(inp.Rows) != T*n.Cols {
				return nil, 0, fmt.Errorf("graph: input rows hold %d values, want %d rows of %d", len(inp.Rows), T, n.Cols)
			}
		case op.Embed:
			if inp.Embeds != nil && len(inp.Embeds) != T*n.Cols {
				return nil, 0, fmt.Errorf("graph: embedding rows hold %d values, want %d rows of %d", len(inp.Embeds), T, n.Cols)
			}
		case op.GroupRows:
			if T < n.Lo || (T-n.Lo)%n.Group != 0 {
				return nil, 0, fmt.Errorf("graph: %d rows after the first %d do not group by %d", T-n.Lo, n.Lo, n.Group)
			}
		}
	}
	if inp.Positions != nil {
		if P := in.g.PosComponents(); len(inp.Positions) != T*P {
			return nil, 0, fmt.Errorf("graph: %d position values for %d rows of %d components", len(inp.Positions), T, P)
		}
	}
	for i := range in.g.Nodes {
		if a := in.g.Nodes[i].Attn; a != nil && a.Tile > 0 && (inp.Positions == nil || in.g.PosComponents() < 2) {
			return nil, 0, errors.New("graph: attention within tiles needs each row's 2-D position")
		}
	}
	if st.cols != in.g.KVCols || len(st.K) != in.g.Layers {
		return nil, 0, errors.New("graph: state was made for another graph")
	}
	if len(st.Rec) != len(in.g.States) {
		return nil, 0, errors.New("graph: state was made for another graph")
	}
	for i, n := range in.g.States {
		if len(st.Rec[i]) != n {
			return nil, 0, errors.New("graph: state was made for another graph")
		}
	}
	if st.once && st.Pos > 0 {
		return nil, 0, errors.New("graph: a single-pass state was used for a second pass")
	}
	if st.Pos+T > st.Ctx {
		return nil, 0, fmt.Errorf("%w: %d positions used, %d more requested, context is %d",
			ErrContextFull, st.Pos, T, st.Ctx)
	}
	vals := make([][]float32, len(in.g.Nodes))
	nrows := make([]int, len(in.g.Nodes))
	for i := range in.g.Nodes {
		n := &in.g.Nodes[i]
		r := T
		switch {
		case n.Op == op.SelectRows:
			r = 1
		case n.Op == op.GroupRows:
			r = (nrows[n.In[0]] - n.Lo) / n.Group
		case len(n.In) > 0:
			r = nrows[n.In[0]]
		}
		nrows[i] = r
		if n.Op == op.Tokens {
			continue
		}
		if n.Op == op.Rows {
			vals[i] = inp.Rows
			continue
		}
		dst := make([]float32, r*n.Cols)
		restore, err := in.hookInputs(n, vals, nrows)
		if err == nil {
			err = in.eval(n, dst, vals, nrows, inp, st)
		}
		for k := len(restore) - 1; k >= 0; k-- {
			vals[restore[k].id] = restore[k].v
		}
		if err != nil {
			return nil, 0, fmt.Errorf("graph: node %d (%v %s): %w", i, n.Op, n.Name, err)
		}
		vals[i] = dst
	}
	st.Pos += T
	return vals[in.g.Output], nrows[in.g.Output], nil
}

type savedVal struct {
	id int
	v  []float32
}

// hookInputs applies the input hook to n's inputs, replacing them in vals,
// and returns what to put back after n runs.
func (in *Interpreter) hookInputs(n *Node, vals [][]float32, nrows []int) ([]savedVal, error) {
	if in.hook == nil || (n.Op != op.Linear && n.Op != op.Attention) {
		return nil, nil
	}
	var saved []savedVal
	for slot, id := range n.In {
		r := in.hook(n, slot, vals[id], nrows[id], in.g.cols(id))
		if r == nil {
			continue
		}
		if len(r) != len(vals[id]) {
			return saved, fmt.Errorf("input hook returned %d values for input %d of %d", len(r), slot, len(vals[id]))
		}
		saved = append(saved, savedVal{id, vals[id]})
		vals[id] = r
	}
	return saved, nil
}

func (in *Interpreter) eval(n *Node, dst []float32, vals [][]float32, nrows []int, inp Input, st *State) error {
	ids := inp.IDs
	T := len(ids)
	var x []float32
	if len(n.In) > 0 {
		x = vals[n.In[0]]
	}
	switch n.Op {
	case op.Embed:
		table := in.w[n.Weight]
		vocab := len(table) / n.Cols
		for t, id := range ids {
			if id == -1 && inp.Embeds != nil {
				copy(dst[t*n.Cols:(t+1)*n.Cols], inp.Embeds[t*n.Cols:(t+1)*n.Cols])
				continue
			}
			if id < 0 || id >= vocab {
				return fmt.Errorf("token id %d out of range [0,%d)", id, vocab)
			}
			copy(dst[t*n.Cols:(t+1)*n.Cols], table[id*n.Cols:(id+1)*n.Cols])
		}
	case op.Linear:
		var b []float32
		if n.Bias != "" {
			b = in.w[n.Bias]
		}
		linear(dst, x, in.w[n.Weight], b, nrows[n.In[0]], in.g.cols(n.In[0]), n.Cols, in.threads)
	case op.RMSNorm:
		rmsNorm(dst, x, in.w[n.Weight], n.Cols, n.Eps, n.Offset)
	case op.HeadRMSNorm:
		// a [T, heads*E] matrix is a [T*heads, E] one: each head is a row
		if n.Weight == "" {
			unitRMSNorm(dst, x, n.HeadDim, n.Eps, n.Offset)
			break
		}
		rmsNorm(dst, x, in.w[n.Weight], n.HeadDim, n.Eps, n.Offset)
	case op.Add:
		y := vals[n.In[1]]
		for i := range dst {
			dst[i] = x[i] + y[i]
		}
	case op.Mul:
		y := vals[n.In[1]]
		for i := range dst {
			dst[i] = x[i] * y[i]
		}
	case op.Scale:
		s := n.Scale
		if n.Weight != "" {
			s *= in.w[n.Weight][0]
		}
		for i := range dst {
			dst[i] = x[i] * s
		}
	case op.Hadamard:
		op.HadamardRows(dst, x, n.HeadDim)
	case op.SiLU:
		for i := range dst {
			dst[i] = silu(x[i])
		}
	case op.GELUTanh:
		for i := range dst {
			dst[i] = geluTanh(x[i])
		}
	case op.GELUF16:
		kernel.GELUF16(dst, x)
	case op.RoPE:
		copy(dst, x)
		ropeAt(dst, T, n.Cols, st.Pos, n.Rope, inp.Positions, in.g.PosComponents())
	case op.Attention:
		attention(dst, x, vals[n.In[1]], vals[n.In[2]], T, st, n.Attn, inp.Positions, in.g.PosComponents())
	case op.SharedAttention:
		attention(dst, x, nil, nil, T, st, n.Attn, inp.Positions, in.g.PosComponents())
	case op.Columns:
		op.ColumnsRows(dst, x, nrows[n.In[0]], in.g.cols(n.In[0]), n.Lo, n.Hi, n.Group)
	case op.GatherCols:
		c := in.g.cols(n.In[0])
		for t := 0; t < nrows[n.In[0]]; t++ {
			for i, j := range n.Index {
				dst[t*n.Cols+i] = x[t*c+j]
			}
		}
	case op.ZeroCols:
		copy(dst, x)
		for t := 0; t < nrows[n.In[0]]; t++ {
			for _, j := range n.Index {
				dst[t*n.Cols+j] = 0
			}
		}
	case op.SelectRows:
		r := nrows[n.In[0]]
		copy(dst, x[(r-1)*n.Cols:r*n.Cols])
	case op.GroupRows:
		copy(dst, x[n.Lo*in.g.cols(n.In[0]):]) // row-major: k consecutive rows are one longer row
	default:
		if ok, err := in.evalRecurrent(n, dst, vals, nrows, st); ok {
			return err
		}
		if in.evalDeltaNet(n, dst, vals, nrows, st) {
			return nil
		}
		return fmt.Errorf("op %v cannot be evaluated", n.Op)
	}
	return nil
}
