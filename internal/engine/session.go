package engine

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/plan"
)

// Mode selects how Prefill feeds a prompt.
type Mode uint8

const (
	// ModeHybrid feeds the prompt in passes of the largest AR-N plan, the
	// last one padded (AR-1 when the artifact has no other plan).
	ModeHybrid Mode = iota
	// ModeKV feeds the prompt one token at a time through the AR-1 plan.
	ModeKV
)

func (m Mode) String() string {
	if m == ModeKV {
		return "kv"
	}
	return "hybrid"
}

// SessionOptions configures NewSession.
type SessionOptions struct {
	Mode    Mode
	Threads int // worker goroutines, counting the caller's (< 1: 1)
	// ARLen picks the prefill plan of ModeHybrid; 0 means the largest.
	ARLen int
}

// Session is one sequence: an activation arena, the KV cache and a worker
// pool. It implements decoding.Session. It is not safe for concurrent use;
// Close stops its workers.
type Session struct {
	e         *Engine
	mode      Mode
	decode    *program // AR-1
	prefill   *program // AR-N used by ModeHybrid
	pool      *pool
	arena     []float32
	k, v      [][]float32 // [layer][C*Ctx] (transposed); nil with another cache type
	ku, vu    [][]uint8   // [layer][C*Ctx] uint8 cache, else nil
	kh, vh    [][]uint16  // [layer][C*Ctx] binary16 cache, else nil
	kvCols    int
	ctx       int
	pos       int
	rope      ropeTable
	attn      attnArgs
	rec       recState
	q8        q8Buf // int8 activations of packed linears
	q8In      int   // buffer whose rows s.q8 holds, or -1
	attnTask  attnTask
	storeTask storeTask
	quantTask quantizeTask
	rowTask   rowTask
}

// NewSession allocates a session's arena and cache and starts its workers.
func (e *Engine) NewSession(opts SessionOptions) (*Session, error) {
	if opts.Mode != ModeHybrid && opts.Mode != ModeKV {
		return nil, fmt.Errorf("engine: unknown mode %d", opts.Mode)
	}
	kv := e.plans[0].p.KV
	s := &Session{e: e, mode: opts.Mode, decode: e.plans[0], prefill: e.plans[len(e.plans)-1],
		arena: make([]float32, e.arena), kvCols: kv.Cols, ctx: kv.Ctx}
	if s.decode.p.Rows != 1 {
		return nil, errors.New("engine: the artifact has no AR-1 plan")
	}
	if opts.ARLen > 0 {
		s.prefill = nil
		for _, p := range e.plans {
			if p.p.Rows == opts.ARLen {
				s.prefill = p
			}
		}
		if s.prefill == nil {
			return nil, fmt.Errorf("engine: no plan for AR length %d (the artifact has %v)", opts.ARLen, e.ARLens())
		}
	}
	if opts.Mode == ModeKV {
		s.prefill = s.decode
	}
	switch {
	case e.manifest.KVCache != nil && e.manifest.KVCache.DType == plan.KVCacheF16:
		s.kh = make([][]uint16, kv.Layers)
		s.vh = make([][]uint16, kv.Layers)
		for l := range s.kh {
			s.kh[l] = make([]uint16, kv.Ctx*kv.Cols)
			s.vh[l] = make([]uint16, kv.Ctx*kv.Cols)
		}
	case e.manifest.KVCache != nil:
		s.ku = make([][]uint8, kv.Layers)
		s.vu = make([][]uint8, kv.Layers)
		for l := range s.ku {
			s.ku[l] = make([]uint8, kv.Ctx*kv.Cols)
			s.vu[l] = make([]uint8, kv.Ctx*kv.Cols)
		}
	default:
		s.k = make([][]float32, kv.Layers)
		s.v = make([][]float32, kv.Layers)
		for l := range s.k {
			s.k[l] = make([]float32, kv.Ctx*kv.Cols)
			s.v[l] = make([]float32, kv.Ctx*kv.Cols)
		}
	}
	s.rec = newRecState(s.decode.p.State, e.wkvTemp)
	s.q8 = newQ8Buf(e.q8Max)
	s.pool = newPool(opts.Threads)
	rows := 0
	for _, p := range e.plans {
		rows = max(rows, p.p.Rows)
	}
	s.rope.cos, s.rope.sin = make([]float32, rows*e.scratch), make([]float32, rows*e.scratch)
	s.attnTask.scores = make([][]float32, s.pool.threads)
	for w := range s.attnTask.scores {
		s.attnTask.scores[w] = make([]float32, kv.Ctx)
	}
	return s, nil
}

// Close stops the session's workers.
func (s *Session) Close() { s.pool.close() }

// Pos is the number of positions filled.
func (s *Session) Pos() int { return s.pos }

// Context is the capacity of the cache.
func (s *Session) Context() int { return s.ctx }

// Reset empties the sequence; the cache memory is kept.
func (s *Session) Reset() {
	s.pos = 0
	s.rec.reset()
}

// check refuses ids that do not fit the cache or the vocabulary.
func (s *Session) check(ids []int) error {
	if len(ids) == 0 {
		return errors.New("engine: no tokens")
	}
	if s.pos+len(ids) > s.ctx {
		return fmt.Errorf("engine: %w: %d positions used, %d more requested, context is %d",
			ErrContextFull, s.pos, len(ids), s.ctx)
	}
	for i, id := range ids {
		if id < 0 || id >= s.e.vocab {
			return fmt.Errorf("engine: token %d: id %d is outside the vocabulary [0, %d)", i, id, s.e.vocab)
		}
	}
	return nil
}

// Prefill feeds ids at the current position and returns the logits after
// the last of them, valid until the next call. On error nothing changes.
func (s *Session) Prefill(ids []int) ([]float32, error) {
	if err := s.check(ids); err != nil {
		return nil, err
	}
	n := s.prefill.p.Rows
	var out []float32
	for lo := 0; lo < len(ids); lo += n {
		out = s.run(s.prefill, ids[lo:min(lo+n, len(ids))])
	}
	return out, nil
}

// Decode feeds one id with the AR-1 plan and returns the logits after it,
// valid until the next call. It allocates nothing.
func (s *Session) Decode(id int) ([]float32, error) {
	if s.pos >= s.ctx {
		return nil, fmt.Errorf("engine: %w: all %d positions are used", ErrContextFull, s.ctx)
	}
	if id < 0 || id >= s.e.vocab {
		return nil, fmt.Errorf("engine: id %d is outside the vocabulary [0, %d)", id, s.e.vocab)
	}
	var one [1]int
	one[0] = id
	return s.run(s.decode, one[:]), nil
}

// run executes one pass of prog over the valid rows ids (len(ids) <= its
// AR length) at the current position and advances it. The caller has
// checked ids and the context.
func (s *Session) run(prog *program, ids []int) []float32 {
	p := prog.p
	valid := len(ids)
	buf := func(id int) ([]float32, int, int) {
		b := p.Buffers[id]
		r := b.Rows
		if r == p.Rows {
			r = valid
		}
		return s.arena[b.Offset : b.Offset+r*b.Cols], r, b.Cols
	}
	s.q8In = -1
	for i := range prog.steps {
		st := &prog.steps[i]
		if st.Op != plan.OpLinear {
			s.q8In = -1 // only consecutive linears share quantized inputs
		}
		out, rows, cols := buf(st.Out)
		var x []float32
		xcols := 0
		if len(st.In) > 0 {
			x, _, xcols = buf(st.In[0])
		}
		switch st.Op {
		case plan.OpEmbed:
			for t, id := range ids {
				if st.qw != nil {
					st.qw.row(out[t*cols:(t+1)*cols], id)
					continue
				}
				copy(out[t*cols:(t+1)*cols], st.w[id*cols:(id+1)*cols])
			}
		case plan.OpLinear:
			s.linear(st, out, x, rows, xcols, cols)
		case plan.OpRMSNorm, plan.OpHeadRMSNorm, plan.OpScale, plan.OpSiLU, plan.OpGELUTanh, plan.OpRoPE:
			s.rowWise(st, out, x, nil, rows, cols)
		case plan.OpAdd, plan.OpMul:
			y, _, _ := buf(st.In[1])
			s.rowWise(st, out, x, y, rows, cols)
		case plan.OpAttention:
			k, _, _ := buf(st.In[1])
			v, _, _ := buf(st.In[2])
			a := st.Attn
			s.attn = attnArgs{out: out, q: x, k: k, v: v, C: s.kvCols, ctx: s.ctx,
				T: rows, pos: s.pos, H: a.Heads, G: a.KVHeads, E: a.HeadDim, scale: a.Scale,
				window: a.Window}
			switch {
			case s.ku != nil:
				kc := s.e.manifest.KVCache
				s.attn.Ku, s.attn.Vu, s.attn.ks, s.attn.vs = s.ku[a.Layer], s.vu[a.Layer], kc.K[a.Layer], kc.V[a.Layer]
			case s.kh != nil:
				s.attn.Kh, s.attn.Vh = s.kh[a.Layer], s.vh[a.Layer]
			default:
				s.attn.K, s.attn.V = s.k[a.Layer], s.v[a.Layer]
			}
			s.attend()
		case plan.OpColumns:
			for t := 0; t < rows; t++ {
				copy(out[t*cols:(t+1)*cols], x[t*xcols+st.Lo:t*xcols+st.Hi])
			}
		case plan.OpLastRow:
			copy(out, x[(valid-1)*cols:valid*cols])
		default:
			var in [5][]float32
			for j, b := range st.In {
				in[j], _, _ = buf(b)
			}
			s.rec.run(st, out, in[:len(st.In)], rows, cols)
		}
	}
	s.pos += valid
	out, rows, cols := buf(p.Output)
	return out[(rows-1)*cols : rows*cols]
}
