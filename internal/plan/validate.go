package plan

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/op"
)

// Limits a plan must respect; they keep every size computation within int
// on 64- and 32-bit machines.
const (
	MaxRows  = 1 << 16   // tokens per pass
	MaxCols  = 1 << 24   // columns of a buffer or a cache row
	MaxArena = 1<<31 - 1 // floats in the arena
	MaxCtx   = 1 << 24   // cache positions
	maxKV    = 1<<31 - 1 // floats in one cache layer
	maxSteps = 1 << 20   // steps in a plan
	maxBufs  = 1 << 20   // buffers in a plan
	maxLayer = 1 << 16   // cache layers
	// arenaSlack is how far the arena may extend past its last buffer
	// (alignment padding).
	arenaSlack = 64
)

// Error reports an invalid plan; Field names the offending part, such as
// "steps[3].in[1]" or "buffers[2].offset".
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return "plan: " + e.Field + ": " + e.Msg }

func errf(field, f string, args ...any) *Error {
	return &Error{Field: field, Msg: fmt.Sprintf(f, args...)}
}

// Validate checks that every buffer lies inside the arena and is written
// by exactly one step, every step's ids
// are in range, its op is known, its shapes agree with the op, each buffer
// is written exactly once before it is read, no step's output overlaps
// its inputs, and no input is overwritten between its write and its read.
func (p *Plan) Validate() error {
	if p.Version != Version {
		return errf("version", "%d is not the supported version %d", p.Version, Version)
	}
	if p.Rows < 1 || p.Rows > MaxRows {
		return errf("rows", "%d is outside [1, %d]", p.Rows, MaxRows)
	}
	if err := p.KV.validate(); err != nil {
		return err
	}
	if err := p.validateState(); err != nil {
		return err
	}
	if p.Arena < 0 || p.Arena > MaxArena {
		return errf("arena", "%d floats is outside [0, %d]", p.Arena, MaxArena)
	}
	if len(p.Buffers) == 0 || len(p.Buffers) > maxBufs {
		return errf("buffers", "%d buffers is outside [1, %d]", len(p.Buffers), maxBufs)
	}
	for i, b := range p.Buffers {
		f := fmt.Sprintf("buffers[%d]", i)
		if b.Rows < 1 || b.Rows > p.Rows {
			return errf(f+".rows", "%d is outside [1, %d]", b.Rows, p.Rows)
		}
		if b.Cols < 1 || b.Cols > MaxCols {
			return errf(f+".cols", "%d is outside [1, %d]", b.Cols, MaxCols)
		}
		if b.Offset < 0 || int64(b.Offset)+int64(b.Rows)*int64(b.Cols) > int64(p.Arena) {
			return errf(f+".offset", "%d floats + %dx%d does not fit the arena of %d floats",
				b.Offset, b.Rows, b.Cols, p.Arena)
		}
	}
	if p.Output < 0 || p.Output >= len(p.Buffers) {
		return errf("output", "buffer %d does not exist (%d buffers)", p.Output, len(p.Buffers))
	}
	if len(p.Steps) == 0 || len(p.Steps) > maxSteps {
		return errf("steps", "%d steps is outside [1, %d]", len(p.Steps), maxSteps)
	}
	def := make([]int, len(p.Buffers)) // step that writes each buffer, -1 none
	for i := range def {
		def[i] = -1
	}
	for s := range p.Steps {
		if err := p.checkStep(s, def); err != nil {
			return err
		}
		def[p.Steps[s].Out] = s
	}
	for b, s := range def {
		if s < 0 {
			return errf(fmt.Sprintf("buffers[%d]", b), "no step writes it")
		}
	}
	if err := p.checkShared(); err != nil {
		return err
	}
	if err := p.checkTight(); err != nil {
		return err
	}
	if def[p.Output] < 0 {
		return errf("output", "buffer %d is never written", p.Output)
	}
	if q := p.clobbered(p.Output, def[p.Output], len(p.Steps)); q >= 0 {
		return errf("output", "buffer %d is overwritten by step %d", p.Output, q)
	}
	if h := p.Hidden; h != nil {
		if *h < 0 || *h >= len(p.Buffers) || *h == p.Output {
			return errf("hidden", "buffer %d is not a buffer apart from the output", *h)
		}
		if p.Buffers[*h].Rows != p.Rows {
			return errf("hidden", "buffer %d has %d rows, not the pass's %d", *h, p.Buffers[*h].Rows, p.Rows)
		}
		if q := p.clobbered(*h, def[*h], len(p.Steps)); q >= 0 {
			return errf("hidden", "buffer %d is overwritten by step %d", *h, q)
		}
	}
	return nil
}

func (kv KV) validate() error {
	if kv.Layers < 0 || kv.Layers > maxLayer {
		return errf("kv.layers", "%d is outside [0, %d]", kv.Layers, maxLayer)
	}
	if kv.Cols < 0 || kv.Cols > MaxCols {
		return errf("kv.cols", "%d is outside [0, %d]", kv.Cols, MaxCols)
	}
	if kv.Ctx < 1 || kv.Ctx > MaxCtx {
		return errf("kv.ctx", "%d is outside [1, %d]", kv.Ctx, MaxCtx)
	}
	if int64(kv.Ctx)*int64(kv.Cols) > maxKV {
		return errf("kv", "%d positions of %d columns exceed %d floats per layer", kv.Ctx, kv.Cols, maxKV)
	}
	return nil
}

// overlap reports whether buffers a and b share arena floats.
func (p *Plan) overlap(a, b int) bool {
	x, y := p.Buffers[a], p.Buffers[b]
	return x.Offset < y.Offset+y.Size() && y.Offset < x.Offset+x.Size()
}

// clobbered returns the first step in (from, to) whose output overlaps
// buffer b, or -1.
func (p *Plan) clobbered(b, from, to int) int {
	for q := from + 1; q < to; q++ {
		if o := p.Steps[q].Out; o != b && p.overlap(o, b) {
			return q
		}
	}
	return -1
}

func (p *Plan) checkStep(s int, def []int) error {
	st := &p.Steps[s]
	f := fmt.Sprintf("steps[%d]", s)
	if st.Op == op.Invalid || st.Op == op.Tokens || st.Op >= op.Count {
		return errf(f+".op", "unknown op %v", st.Op)
	}
	a := st.Op.Arity()
	if len(st.In) != a.In {
		return errf(f+".in", "%v takes %d inputs, has %d", st.Op, a.In, len(st.In))
	}
	if len(st.Weights) < a.WMin || len(st.Weights) > a.WMax {
		return errf(f+".weights", "%v takes %d..%d weights, has %d", st.Op, a.WMin, a.WMax, len(st.Weights))
	}
	for i, w := range st.Weights {
		if w == "" {
			return errf(fmt.Sprintf("%s.weights[%d]", f, i), "empty name")
		}
	}
	if st.Out < 0 || st.Out >= len(p.Buffers) {
		return errf(f+".out", "buffer %d does not exist (%d buffers)", st.Out, len(p.Buffers))
	}
	if def[st.Out] >= 0 {
		return errf(f+".out", "buffer %d is already written by step %d", st.Out, def[st.Out])
	}
	for i, b := range st.In {
		fi := fmt.Sprintf("%s.in[%d]", f, i)
		if b < 0 || b >= len(p.Buffers) {
			return errf(fi, "buffer %d does not exist (%d buffers)", b, len(p.Buffers))
		}
		if def[b] < 0 {
			return errf(fi, "buffer %d is read before it is written", b)
		}
		if p.overlap(b, st.Out) {
			return errf(fi, "buffer %d overlaps the output buffer %d", b, st.Out)
		}
		if q := p.clobbered(b, def[b], s); q >= 0 {
			return errf(fi, "buffer %d is overwritten by step %d before this read", b, q)
		}
	}
	if err := p.checkShapes(st); err != nil {
		err.Field = f + err.Field
		return err
	}
	return nil
}

func finite32(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

// checkShapes checks the op's shape rules; the returned Field is relative
// to the step.
func (p *Plan) checkShapes(st *Step) *Error {
	o := p.Buffers[st.Out]
	in := make([]Buffer, len(st.In))
	for i, b := range st.In {
		in[i] = p.Buffers[b]
	}
	same := func(b Buffer) bool { return b.Rows == o.Rows && b.Cols == o.Cols }
	switch st.Op {
	case op.Embed, op.Rows:
		if o.Rows != p.Rows {
			return errf(".out", "%v writes %d rows, the pass has %d", st.Op, o.Rows, p.Rows)
		}
	case op.GroupRows:
		if st.Lo < 0 || st.Lo > in[0].Rows {
			return errf(".lo", "%d rows skipped of %d", st.Lo, in[0].Rows)
		}
		if st.Group < 1 || (in[0].Rows-st.Lo)%st.Group != 0 {
			return errf(".group", "%d does not divide %d rows", st.Group, in[0].Rows-st.Lo)
		}
		if in[0].Rows != p.Rows || o.Rows != (in[0].Rows-st.Lo)/st.Group || int64(o.Cols) != int64(in[0].Cols)*int64(st.Group) {
			return errf(".out", "groups of %d rows of %dx%d write %dx%d", st.Group, in[0].Rows, in[0].Cols, o.Rows, o.Cols)
		}
	case op.Linear:
		if in[0].Rows != o.Rows {
			return errf(".out", "linear of %d rows writes %d rows", in[0].Rows, o.Rows)
		}
	case op.RMSNorm, op.Scale, op.SiLU, op.GELUTanh, op.GELUF16, op.HeadRMSNorm, op.LayerNorm, op.Sigmoid, op.Tanh, op.ReLU, op.Hadamard:
		if st.Op == op.HeadRMSNorm && (st.HeadDim < 1 || in[0].Cols%st.HeadDim != 0) {
			return errf(".head_dim", "%d does not divide %d columns", st.HeadDim, in[0].Cols)
		}
		if st.Op == op.Hadamard && (st.HeadDim < 1 || st.HeadDim&(st.HeadDim-1) != 0 || in[0].Cols%st.HeadDim != 0) {
			return errf(".head_dim", "hadamard block %d is not a power of two dividing %d columns", st.HeadDim, in[0].Cols)
		}
		if !same(in[0]) {
			return errf(".out", "%v of %dx%d writes %dx%d", st.Op, in[0].Rows, in[0].Cols, o.Rows, o.Cols)
		}
		if !finite32(st.Eps) || st.Eps < 0 || !finite32(st.Offset) || !finite32(st.Scale) {
			return errf(".attrs", "eps %v, offset %v, scale %v must be finite (eps >= 0)", st.Eps, st.Offset, st.Scale)
		}
	case op.Add, op.Mul, op.Sub, op.Mix:
		if !same(in[0]) || !same(in[1]) {
			return errf(".in", "%v of %dx%d and %dx%d writes %dx%d", st.Op,
				in[0].Rows, in[0].Cols, in[1].Rows, in[1].Cols, o.Rows, o.Cols)
		}
	case op.RoPE:
		return p.checkRope(st, in[0], o)
	case op.Attention:
		return p.checkAttn(st, in, o)
	case op.SharedAttention:
		return p.checkSharedAttn(st, in[0], o)
	case op.TokenShift, op.WKV7, op.CausalConv:
		return p.checkRecurrent(st, in, o)
	case op.SSMScan:
		return p.checkSSMScan(st, in, o)
	case op.GatedDelta:
		return p.checkDeltaNet(st, in, o)
	case op.Columns:
		block := in[0].Cols
		if st.Group != 0 {
			block = st.Group
		}
		if block < 1 || in[0].Cols%block != 0 || st.Lo < 0 || st.Hi > block || st.Lo >= st.Hi {
			return errf(".lo", "columns [%d,%d) of blocks of %d in %d", st.Lo, st.Hi, block, in[0].Cols)
		}
		if o.Rows != in[0].Rows || o.Cols != in[0].Cols/block*(st.Hi-st.Lo) {
			return errf(".out", "columns [%d,%d) of %d rows write %dx%d", st.Lo, st.Hi, in[0].Rows, o.Rows, o.Cols)
		}
	case op.GatherCols, op.ZeroCols:
		for i, c := range st.Index {
			if c < 0 || c >= in[0].Cols || (i > 0 && c <= st.Index[i-1]) {
				return errf(".index", "column list is not ascending within [0, %d)", in[0].Cols)
			}
		}
		want := in[0].Cols
		if st.Op == op.GatherCols {
			want = len(st.Index)
		}
		if len(st.Index) == 0 || o.Rows != in[0].Rows || o.Cols != want {
			return errf(".out", "%v of %d columns of %dx%d writes %dx%d", st.Op, len(st.Index), in[0].Rows, in[0].Cols, o.Rows, o.Cols)
		}
	case op.SelectRows:
		if in[0].Rows != p.Rows || o.Rows < 1 || o.Rows > p.Rows || o.Cols != in[0].Cols {
			return errf(".out", "selected rows of %dx%d write %dx%d", in[0].Rows, in[0].Cols, o.Rows, o.Cols)
		}
	}
	return nil
}

func (p *Plan) checkRope(st *Step, x, o Buffer) *Error {
	r := st.Rope
	if r == nil {
		return errf(".rope", "missing")
	}
	if x.Rows != p.Rows || x.Rows != o.Rows || x.Cols != o.Cols {
		return errf(".out", "rope of %dx%d writes %dx%d in a pass of %d rows", x.Rows, x.Cols, o.Rows, o.Cols, p.Rows)
	}
	if r.HeadDim < 1 || x.Cols%r.HeadDim != 0 {
		return errf(".rope.head_dim", "%d does not divide %d columns", r.HeadDim, x.Cols)
	}
	if r.RotDim < 0 || r.RotDim > r.HeadDim || r.RotDim%2 != 0 {
		return errf(".rope.rot_dim", "%d is not even in [0, %d]", r.RotDim, r.HeadDim)
	}
	if len(r.InvFreq) != r.RotDim/2 {
		return errf(".rope.inv_freq", "%d frequencies for rotary size %d", len(r.InvFreq), r.RotDim)
	}
	for _, f := range r.InvFreq {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return errf(".rope.inv_freq", "holds %v", f)
		}
	}
	if s := r.Scale; s < 0 || math.IsNaN(s) || math.IsInf(s, 0) || s > 1e6 || (s != 0 && s < 1e-6) {
		return errf(".rope.scale", "%v is not a finite positive magnitude", s)
	}
	if len(r.Sections) > 0 {
		sum := 0
		for _, n := range r.Sections {
			if n <= 0 || n > r.RotDim {
				return errf(".rope.sections", "%v holds a length out of range", r.Sections)
			}
			sum += n
		}
		if sum != r.RotDim/2 || len(r.Sections) > 8 {
			return errf(".rope.sections", "%v do not split %d pairs", r.Sections, r.RotDim/2)
		}
	}
	return nil
}

func (p *Plan) checkAttn(st *Step, in []Buffer, o Buffer) *Error {
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
	if a.Layer < 0 || (!a.Bidirectional && a.Layer >= p.KV.Layers) {
		return errf(".attn.layer", "%d is outside the %d cache layers", a.Layer, p.KV.Layers)
	}
	if a.Tile > 0 && a.Window != 0 {
		return errf(".attn.window", "attention within tiles has no window")
	}
	if a.Tile < 0 || a.Tile > MaxCols || (a.Tile > 0 && !a.Bidirectional) {
		return errf(".attn.tile", "%d (tiles are for bidirectional attention, up to %d)", a.Tile, MaxCols)
	}
	if a.Window < 0 || !finite32(a.Scale) {
		return errf(".attn", "window %d, scale %v", a.Window, a.Scale)
	}
	q, k, v := in[0], in[1], in[2]
	qc, kc := int64(a.Heads)*int64(a.HeadDim), int64(a.KVHeads)*int64(a.HeadDim)
	if int64(q.Cols) != qc || int64(k.Cols) != kc || int64(v.Cols) != kc {
		return errf(".in", "q %d, k %d, v %d columns for %d/%d heads of %d", q.Cols, k.Cols, v.Cols,
			a.Heads, a.KVHeads, a.HeadDim)
	}
	if !a.Bidirectional && kc > int64(p.KV.Cols) {
		return errf(".attn", "%d key/value columns exceed the cache's %d", kc, p.KV.Cols)
	}
	if q.Rows != p.Rows || k.Rows != p.Rows || v.Rows != p.Rows || o.Rows != p.Rows || o.Cols != q.Cols {
		return errf(".out", "attention rows q %d k %d v %d out %dx%d in a pass of %d rows",
			q.Rows, k.Rows, v.Rows, o.Rows, o.Cols, p.Rows)
	}
	return nil
}

// CheckWeights checks that every weight a step names exists with a shape
// its op accepts; shape returns a weight's shape (outermost first) and
// whether it exists.
func (p *Plan) CheckWeights(shape func(name string) ([]int64, bool)) error {
	for s := range p.Steps {
		st := &p.Steps[s]
		o := p.Buffers[st.Out]
		for i, name := range st.Weights {
			f := fmt.Sprintf("steps[%d].weights[%d]", s, i)
			sh, ok := shape(name)
			if !ok {
				return errf(f, "weight %q does not exist", name)
			}
			var want string
			switch {
			case st.Op == op.Embed:
				if len(sh) != 2 || sh[0] < 1 || sh[1] != int64(o.Cols) {
					want = fmt.Sprintf("[V, %d]", o.Cols)
				}
			case st.Op == op.Linear && i == 0:
				k := p.Buffers[st.In[0]].Cols
				if len(sh) != 2 || sh[0] != int64(o.Cols) || sh[1] != int64(k) {
					want = fmt.Sprintf("[%d, %d]", o.Cols, k)
				}
			case st.Op == op.SSMScan: // A, D, dt_bias: one per head
				if h := p.Buffers[st.In[1]].Cols; len(sh) != 1 || sh[0] != int64(h) {
					want = fmt.Sprintf("[%d]", h)
				}
			case st.Op == op.CausalConv && i == 0:
				if len(sh) != 2 || sh[0] != int64(o.Cols) || sh[1] != int64(st.HeadDim) {
					want = fmt.Sprintf("[%d, %d]", o.Cols, st.HeadDim)
				}
			case st.Op == op.Scale:
				if len(sh) != 1 || sh[0] != 1 {
					want = "[1]"
				}
			case st.Op == op.GatedDelta:
				want = deltaNetWeight(st, sh)
			case st.Op == op.HeadRMSNorm:
				if len(sh) != 1 || sh[0] != int64(st.HeadDim) {
					want = fmt.Sprintf("[%d]", st.HeadDim)
				}
			default: // linear bias, rms_norm gain
				if len(sh) != 1 || sh[0] != int64(o.Cols) {
					want = fmt.Sprintf("[%d]", o.Cols)
				}
			}
			if want != "" {
				return errf(f, "weight %q has shape %v, %v needs %s", name, sh, st.Op, want)
			}
		}
	}
	return nil
}

// checkTight refuses memory a plan declares but does not use, so a
// corrupt plan cannot make the engine allocate far more than its steps
// need: the arena ends within arenaSlack floats of the last buffer, every
// cache layer is used by an attention step, and the cache is no wider than
// the widest attention step.
func (p *Plan) checkTight() error {
	end := 0
	for _, b := range p.Buffers {
		end = max(end, b.Offset+b.Size())
	}
	if p.Arena > end+arenaSlack {
		return errf("arena", "%d floats, but the buffers end at %d", p.Arena, end)
	}
	used := make([]bool, p.KV.Layers)
	cols := 0
	for _, st := range p.Steps {
		if st.Op == op.Attention && !st.Attn.Bidirectional {
			used[st.Attn.Layer] = true
			cols = max(cols, st.Attn.KVHeads*st.Attn.HeadDim)
		}
	}
	for l, u := range used {
		if !u {
			return errf("kv.layers", "cache layer %d of %d has no attention step", l, p.KV.Layers)
		}
	}
	if p.KV.Cols != cols {
		return errf("kv.cols", "%d, but the widest attention step uses %d", p.KV.Cols, cols)
	}
	return p.checkStateUse()
}
