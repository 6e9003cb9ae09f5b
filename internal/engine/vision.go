package engine

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// A vision plan (plan.Vision) encodes one image: a pass of exactly its
// rows, each an input row of floats (a patch's pixels, the rows step) and
// an id (the patch's position, read by the embed step of the position
// table), through bidirectional attention that uses no cache, to the
// output buffer's embedding rows. It runs on the engine's worker pool and
// kernels, one pass of any session or encoder at a time.

// visionProgram is a validated vision plan with its weights resolved.
type visionProgram struct {
	ref   plan.VisionPlanRef
	prog  *program
	in    int  // floats per input row (0: the plan reads no rows)
	table int  // rows of the position table (ids must be below it), -1: none
	q8Max int  // values: the largest T*K input of a packed linear
	comps int  // rotary position components a row carries (rope sections), 0: no RoPE step
	tiled bool // an attention step is limited to tiles of the 2-D positions (plan.Attn.Tile)
}

// loadVision decodes, validates and resolves the manifest's vision plans.
func (e *Engine) loadVision(blob func(name string) ([]byte, error)) error {
	v := e.manifest.Vision
	if v == nil {
		return nil
	}
	for _, ref := range v.Plans {
		b, err := blob(ref.Blob)
		if err != nil {
			return err
		}
		p, err := plan.Decode(b)
		if err != nil {
			return fmt.Errorf("%s: %w", ref.Blob, err)
		}
		if out := p.Buffers[p.Output].Rows; out != ref.Tokens {
			return fmt.Errorf("%s: a vision plan of %d output rows, the manifest says %d tokens", ref.Blob, out, ref.Tokens)
		}
		if p.KV.Layers != 0 || len(p.State) != 0 {
			return fmt.Errorf("%s: a vision plan with %d cache layers and %d state slots (it may have none)", ref.Blob, p.KV.Layers, len(p.State))
		}
		vp := &visionProgram{ref: ref, table: -1}
		if vp.prog, err = e.resolveVision(p, vp); err != nil {
			return fmt.Errorf("%s: %w", ref.Blob, err)
		}
		e.vision = append(e.vision, vp)
	}
	return nil
}

// resolveVision resolves a vision plan's weights and checks its steps:
// at most one rows step, attention only bidirectional, no select_rows,
// recurrent or state ops.
func (e *Engine) resolveVision(p *plan.Plan, vp *visionProgram) (*program, error) {
	for i, st := range p.Steps {
		switch {
		case st.Op == op.Rows:
			if vp.in > 0 {
				return nil, fmt.Errorf("step %d: a second rows step", i)
			}
			vp.in = p.Buffers[st.Out].Cols
		case st.Op == op.Attention && !st.Attn.Bidirectional:
			return nil, fmt.Errorf("step %d (%s): causal attention in a vision plan", i, st.Name)
		case st.Op == op.SelectRows, st.Op.Stateful(), st.Op == op.WKV7:
			return nil, fmt.Errorf("step %d (%s): %v in a vision plan", i, st.Name, st.Op)
		}
	}
	prog, err := e.resolveSteps(p, true)
	if err != nil {
		return nil, err
	}
	for _, st := range prog.steps {
		switch {
		case st.Op == op.Embed:
			v := st.qwRows()
			if v < 0 {
				v = len(st.w) / p.Buffers[st.Out].Cols
			}
			if vp.table < 0 || v < vp.table {
				vp.table = v
			}
		case st.Op == op.Linear && st.qw != nil && st.qw.packed():
			vp.q8Max = max(vp.q8Max, p.Rows*st.qw.K)
		case st.Op == op.RoPE:
			vp.comps = max(vp.comps, st.Rope.Components())
		case st.Op == op.Attention && st.Attn.Tile > 0:
			vp.tiled = true
		}
	}
	return prog, nil
}

// qwRows returns the rows of a quantized weight, or -1.
func (s *step) qwRows() int {
	if s.qw == nil {
		return -1
	}
	return s.qw.N
}

// VisionPlans returns the artifact's vision plans (nil for a text model).
func (e *Engine) VisionPlans() []plan.VisionPlanRef {
	var r []plan.VisionPlanRef
	for _, v := range e.vision {
		r = append(r, v.ref)
	}
	return r
}

// Encoder runs one vision plan; it owns its arena. It is not safe for
// concurrent use; distinct encoders (and sessions) of one engine are.
type Encoder struct {
	s  *Session // its arena and scratch; it has no cache
	vp *visionProgram
}

// NewEncoder allocates an encoder for the vision plan named name
// (plan.VisionPlanName) using up to threads of the engine's workers.
func (e *Engine) NewEncoder(name string, threads int) (*Encoder, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	var vp *visionProgram
	for _, v := range e.vision {
		if v.ref.Name == name {
			vp = v
		}
	}
	if vp == nil {
		return nil, fmt.Errorf("engine: the artifact has no vision plan %q", name)
	}
	p := vp.prog.p
	mem, err := limits.Reserve("an image encoder's activations", 4*int64(p.Arena))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	th := min(max(threads, 1), e.pool.threads)
	s := &Session{e: e, threads: th, pool: e.pool, arena: make([]float32, p.Arena), ctx: p.Rows,
		rowPos: make([]int, p.Rows), bufRows: make([]int, len(p.Buffers)), q8: newQ8Buf(vp.q8Max), chain: true}
	for i := range s.rowPos {
		s.rowPos[i] = i
	}
	s.rope.cos, s.rope.sin = make([]float32, p.Rows*e.scratch), make([]float32, p.Rows*e.scratch)
	s.attnTask.scores = make([][]float32, th)
	for w := range s.attnTask.scores {
		s.attnTask.scores[w] = make([]float32, p.Rows)
	}
	s.hold(mem)
	return &Encoder{s: s, vp: vp}, nil
}

// Rows is the number of rows a pass of the encoder reads.
func (c *Encoder) Rows() int { return c.vp.prog.p.Rows }

// InputCols is the number of floats of each input row.
func (c *Encoder) InputCols() int { return c.vp.in }

// Output returns the shape of what Encode returns.
func (c *Encoder) Output() (rows, cols int) {
	b := c.vp.prog.p.Buffers[c.vp.prog.p.Output]
	return b.Rows, b.Cols
}

// Encode runs the plan over Rows() input rows (rows, [Rows(), InputCols()]
// row-major) with their ids (non-negative positions; rows of the position
// table when the plan has one) and returns the output rows, a view valid
// until the next call. A RoPE step turns row i by position i.
func (c *Encoder) Encode(rows []float32, ids []int) ([]float32, error) {
	return c.EncodeAt(rows, ids, nil)
}

// PosComponents is the number of rotary position components a row takes
// in EncodeAt (2 for a 2-D vision RoPE: row and column); 0 when the plan
// has no RoPE step.
func (c *Encoder) PosComponents() int { return c.vp.comps }

// EncodeAt is Encode with each row's rotary position apart from its id:
// positions holds PosComponents() values a row (a patch's row and column
// for a 2-D RoPE, each turning its section of the rotary pairs), or is
// nil for row i at position i.
func (c *Encoder) EncodeAt(rows []float32, ids, positions []int) ([]float32, error) {
	s, p := c.s, c.vp.prog.p
	if s.closed || c.s.e.closed.Load() {
		return nil, ErrClosed
	}
	if len(ids) != p.Rows {
		return nil, fmt.Errorf("engine: %d ids for a vision plan of %d rows", len(ids), p.Rows)
	}
	if len(rows) != p.Rows*c.vp.in {
		return nil, fmt.Errorf("engine: %d input values, the vision plan reads %d rows of %d", len(rows), p.Rows, c.vp.in)
	}
	for i, id := range ids {
		if id < 0 || (c.vp.table >= 0 && id >= c.vp.table) {
			return nil, fmt.Errorf("engine: row %d: id %d is outside the position table [0, %d)", i, id, c.vp.table)
		}
	}
	if c.vp.tiled && (positions == nil || c.vp.comps < 2) {
		return nil, fmt.Errorf("engine: the vision plan attends within tiles of the patch grid and needs each row's row and column")
	}
	if positions != nil {
		P := c.vp.comps
		if P == 0 {
			return nil, fmt.Errorf("engine: rotary positions for a vision plan without a RoPE step")
		}
		if len(positions) != p.Rows*P {
			return nil, fmt.Errorf("engine: %d rotary position values for a vision plan of %d rows of %d components", len(positions), p.Rows, P)
		}
		for i, q := range positions {
			if q < 0 || q > 1<<30 {
				return nil, fmt.Errorf("engine: row %d: rotary position %d out of range", i/P, q)
			}
		}
	}
	s.e.passMu.Lock()
	s.rowsIn, s.ropePos, s.ropeP = rows, positions, c.vp.comps
	out := s.exec(c.vp.prog, ids, nil)
	s.rowsIn, s.ropePos = nil, nil
	s.e.passMu.Unlock()
	return out.data, nil
}

// Close releases the encoder's memory.
func (c *Encoder) Close() { c.s.Close() }

// biAttnTask is bidirectional attention over the T rows of a pass, with
// no cache: q [T, H*E], k, v [T, G*E], out [T, H*E]; split across the
// workers by (head, row) items, head-major so that a head's keys stay in
// cache. A row's scores are T dot products of its query with the key
// rows (kernel.DotRows at the k row stride), its output an update of E
// values by the T value rows (kernel.AxpyRows).
//
// With tiles (plan.Attn.Tile), a row attends only the rows of its tile,
// tile[t] (row indices, ascending): the same sums over fewer rows, one
// kernel.Dot and kernel.Axpy a row. With a window (plan.Attn.Window), row
// t attends the rows at most window/2 away on either side.
type biAttnTask struct {
	out, q, k, v []float32
	T, H, G, E   int
	scale        float32
	scores       [][]float32 // [worker][T]
	tile         [][]int     // [T] the rows each row attends; nil: all
	window       int         // 0: no window
}

func (b *biAttnTask) run(w, lo, hi int) {
	T, E := b.T, b.E
	qc, kc, group := b.H*E, b.G*E, b.H/b.G
	sc := b.scores[w][:T]
	for i := lo; i < hi; i++ {
		h, t := i/T, i%T
		g := h / group
		qh := b.q[t*qc+h*E : t*qc+(h+1)*E]
		if b.tile != nil {
			b.runTile(sc, qh, b.out[t*qc+h*E:t*qc+(h+1)*E], b.tile[t], g*E, kc)
			continue
		}
		first, sc := 0, sc // the rows attended: first.. (len(sc) of them)
		if b.window > 0 {
			half := b.window / 2
			first = max(0, t-half)
			sc = sc[:min(T, t+half+1)-first]
		}
		kernel.DotRows(sc, qh, b.k[first*kc+g*E:], kc)
		kernel.Scale(sc, sc, b.scale)
		inv := 1 / expSub(sc, maxOf(sc))
		oh := b.out[t*qc+h*E : t*qc+(h+1)*E]
		clear(oh)
		kernel.AxpyRows(oh, sc, b.v[first*kc+g*E:], kc)
		kernel.Scale(oh, oh, inv)
	}
}

// runTile is one (head, row) item of attention within a tile: q's
// scores against the key rows rows (columns off.. of stride kc), softmax,
// out the weighted sum of the value rows.
func (b *biAttnTask) runTile(sc, qh, oh []float32, rows []int, off, kc int) {
	E := b.E
	sc = sc[:len(rows)]
	for m, j := range rows {
		sc[m] = kernel.Dot(qh, b.k[j*kc+off:j*kc+off+E])
	}
	kernel.Scale(sc, sc, b.scale)
	inv := 1 / expSub(sc, maxOf(sc))
	clear(oh)
	for m, j := range rows {
		kernel.Axpy(oh, sc[m], b.v[j*kc+off:j*kc+off+E])
	}
	kernel.Scale(oh, oh, inv)
}

// attendAll runs a bidirectional attention step of T rows.
func (s *Session) attendAll(a *plan.Attn, out, q, k, v []float32, T int) {
	t := &s.biAttn
	*t = biAttnTask{out: out, q: q, k: k, v: v, T: T, H: a.Heads, G: a.KVHeads, E: a.HeadDim, scale: a.Scale,
		scores: s.attnTask.scores, window: a.Window}
	cost := T
	if a.Window > 0 {
		cost = min(T, a.Window+1)
	}
	if a.Tile > 0 {
		t.tile = s.tiles(T, a.Tile)
		cost = 0
		for _, r := range t.tile {
			cost = max(cost, len(r))
		}
	}
	items := T * a.Heads
	s.pool.do(t, items, 1, items*cost*a.HeadDim >= minParallelCost, s.threads)
}

// tiles groups the T rows of the running pass by their Tile x Tile
// square of the 2-D rotary positions (EncodeAt checked they are there):
// for each row, the rows of its square in ascending order.
func (s *Session) tiles(T, tile int) [][]int {
	P := s.ropeP
	groups := map[int64][]int{}
	keys := make([]int64, T)
	for t := range keys {
		keys[t] = int64(s.ropePos[t*P]/tile)<<32 | int64(s.ropePos[t*P+1]/tile)
		groups[keys[t]] = append(groups[keys[t]], t)
	}
	out := make([][]int, T)
	for t, key := range keys {
		out[t] = groups[key]
	}
	return out
}
