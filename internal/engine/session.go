package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/aotlm/aotlm/internal/hugemem"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/op"
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
	Mode Mode
	// Threads is how many of the engine's workers a pass of this session
	// uses, counting the caller's goroutine (< 1: 1; at most the engine's
	// pool size).
	Threads int
	// ARLen picks the prefill plan of ModeHybrid; 0 means the largest.
	ARLen int
	// Context is the number of cache positions to allocate: 0 means the
	// engine's context (Engine.Context: the compiled one, or the one
	// Options.Context extended it to); a smaller value shrinks the cache
	// (and the memory it takes), a larger one is refused.
	Context int
	// StateSnapshots is how many pass boundaries a recurrent model's
	// session keeps the state of (its state cache), the committed position
	// included, each a copy of the state in memory (0: as many as
	// DefaultStateSnapshots gives for the model's state, at most 64; 1:
	// none before the committed position, so Rewind goes only to 0 or
	// inside a convolution window).
	StateSnapshots int
	// StateBudget bounds the bytes of the state sets kept when
	// StateSnapshots is 0 (0: DefaultStateBudget; see
	// StateSnapshotsWithin); negative is refused.
	StateBudget int64
	// FullWindowKV keeps a cache slot per position in sliding-window
	// layers too, so that Rewind goes anywhere; by default they keep a
	// ring a few passes longer than their window (ringkv.go), and the
	// cache grows with the context only in the other layers.
	FullWindowKV bool
}

// Session is one sequence over an engine: its activation arena and KV
// cache; passes run on the engine's shared worker pool, one pass of any
// session at a time. A session is not safe for concurrent use; distinct
// sessions of one engine are.
//
// Every step is a pass (Run): up to N rows, each with a token id, a
// position and the rows of the same pass it may attend to (a Mask) on top
// of the committed cache. The pass writes its rows' keys and values into
// the cache slots after the committed ones; Commit then keeps a chosen
// chain of those rows (copied into place, nothing shifted) and Rewind
// drops committed positions. Prefill and Decode are passes committed
// whole.
type Session struct {
	e       *Engine
	mode    Mode
	threads int
	decode  *program // AR-1
	prefill *program // AR-N used by ModeHybrid
	pool    *pool
	arena   []float32
	k, v    [][]float32 // [layer][G][stride][E] (head-major); nil with another cache type
	ku, vu  [][]uint8   // [layer][G][stride][E] uint8 cache, else nil
	kh, vh  [][]uint16  // [layer][G][stride][E] binary16 cache, else nil
	// kq, vq: a 4-bit cache, [layer][G][stride][kernel.KVQ4RowBytes(E)]
	// bytes, else nil
	kq, vq    [][]uint8
	kvCols    int
	ctx       int
	stride    []int // each cache layer's slots per key/value head: ctx, or twice its ring
	ring      []int // each cache layer's ring length (ringkv.go), 0 for a full layer
	window    []int // the window of each ring layer
	wrote     int   // one past the highest slot a pass wrote since Reset
	headDim   []int // each cache layer's E (0 for a layer no step uses)
	kvHeads   []int // each cache layer's G
	pos       int   // committed positions
	rope      ropeTable
	attn      attnArgs
	rec       recState
	q8        q8Buf // int8 activations of packed linears
	q8In      int   // buffer whose rows s.q8 holds, or -1
	attnTask  attnTask
	storeTask storeTask
	quantTask quantizeTask
	rowTask   rowTask
	bufRows   []int // valid rows of each buffer of the running plan

	// The last pass: its rows sit in cache slots pos..pos+pending-1 until
	// Commit or the next pass.
	pending int
	// pendIDs are the pending pass's ids when a recurrent model can
	// replay them (a pass of token rows only), else nil.
	pendIDs []int
	rowPos  []int // positions of its rows (room for the largest plan)
	chain   bool  // rows at pos, pos+1, ... each seeing all earlier rows
	mask    *Mask // when not chain
	passGen uint64
	sel     [1]int // the default logits selection (last row)
	one     [1]int
	closed  bool
	embeds  []float32 // Pass.Embeds of the running pass
	ropePos []int     // Pass.Positions of the running pass
	ropeP   int       // position components a row of ropePos carries
	// rotNext, for a model whose rows carry several rotary position
	// components (M-RoPE), holds the rotary position of the next text row
	// after c committed positions at rotNext[c]: it falls behind the cache
	// position c after an image, whose rows span fewer rotary positions
	// than they take slots. nil for other models (the two are equal).
	rotNext  []int
	passNext []int     // rotNext after each row of the pending pass
	rowsIn   []float32 // an encoder's or draft head's pass's input rows (the rows step)
	// The rows of the last chain pass are at positions hidPos.. hidPos+
	// hidRows-1; hidProg is its plan (nil after a pass of another shape),
	// whose hidden buffer Hidden reads.
	hidProg         *program
	hidPos, hidRows int
	biAttn          biAttnTask

	// A batched pass (Engine.DecodeBatch) that this session drives: row
	// t is the next token of batch[t], over batch[t]'s cache.
	batch    []*Session
	attnRows []attnArgs // the rows of a batched pass's attention step
	batchOff []int      // each row's offset in its session's chain (RunBatch)
	selAll   []int      // 0, 1, ..., the largest plan's rows - 1
	logits   []float32  // this session's logits from a batched pass

	mem *limits.Reservation // the session's share of the memory budget

	// adapter, when set, is applied beside the linears at adapterScale
	// (SetAdapter); loraTask is the work of applying it.
	adapter      *Adapter
	adapterScale float32
	loraTask     adapterTask
}

// NewSession allocates a session's arena and cache.
func (e *Engine) NewSession(opts SessionOptions) (*Session, error) {
	if opts.Mode != ModeHybrid && opts.Mode != ModeKV {
		return nil, fmt.Errorf("engine: unknown mode %d", opts.Mode)
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	kv := e.plans[0].p.KV
	ctx := cmp.Or(e.ctx, kv.Ctx) // the engine's (extended) context
	if opts.Context < 0 || opts.Context > ctx {
		return nil, fmt.Errorf("engine: a context of %d positions: the model was opened for at most %d", opts.Context, ctx)
	}
	if opts.Context > 0 {
		ctx = opts.Context
	}
	if opts.StateBudget < 0 {
		return nil, fmt.Errorf("engine: a state budget of %d bytes", opts.StateBudget)
	}
	s := &Session{e: e, mode: opts.Mode, decode: e.plans[0], prefill: e.plans[len(e.plans)-1],
		arena: make([]float32, e.arena), kvCols: kv.Cols, ctx: ctx, pool: e.pool,
		threads: min(max(opts.Threads, 1), e.pool.threads)}
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
	elem := int64(4)
	if kc := e.manifest.KVCache; kc != nil {
		elem = map[string]int64{plan.KVCacheF16: 2, plan.KVCacheU8: 1, plan.KVCacheQ4: 1, plan.KVCacheQ4V: 1}[kc.DType]
	}
	s.ring, s.window = kvRing(s.decode.p, ctx, s.MaxRows())
	s.stride = KVSlots(s.decode.p, ctx, s.MaxRows())
	if opts.FullWindowKV {
		for l := range s.ring {
			s.ring[l], s.window[l], s.stride[l] = 0, 0, ctx
		}
	}
	s.headDim, s.kvHeads = make([]int, kv.Layers), make([]int, kv.Layers)
	for _, st := range s.decode.p.Steps {
		if a := st.Attn; st.Op == op.Attention && a != nil && !a.Bidirectional && a.Layer < kv.Layers {
			s.headDim[a.Layer], s.kvHeads[a.Layer] = a.HeadDim, a.KVHeads
		}
	}
	var slots int64
	for _, n := range s.stride {
		slots += int64(n)
	}
	q4 := e.manifest.KVCache != nil && plan.IsKVQ4(e.manifest.KVCache.DType)
	kvBytes := 2 * slots * int64(kv.Cols) * elem
	layer := make([]int, kv.Layers) // each layer's values in K (and in V)
	for l, n := range s.stride {
		layer[l] = n * kv.Cols
	}
	if q4 {
		kvBytes = 0
		for l, n := range s.stride {
			layer[l] = 0
			if s.headDim[l] > 0 {
				layer[l] = n * s.kvHeads[l] * kernel.KVQ4RowBytes(s.headDim[l])
			}
			kvBytes += 2 * int64(layer[l])
		}
	}
	need := kvBytes + 4*int64(e.arena) +
		PlanStateMemory(s.decode.p, ctx, opts.StateSnapshots, opts.StateBudget).Total()
	mem, err := limits.Reserve(fmt.Sprintf("a session of %d positions (KV cache, activations and recurrent state)", ctx), need)
	if err != nil {
		return nil, fmt.Errorf("engine: %w; ask for a smaller context", err)
	}
	s.hold(mem)
	// The whole cache is one buffer, in huge pages (hugemem) when each
	// key/value head's share is short: a decode step reads every head of
	// every layer, a run of TLB misses in 4 KiB pages. Long caches stay
	// in 4 KiB pages, which become resident as positions fill them (in
	// huge pages the first token would make the whole cache resident).
	all := 2 * int(slots) * kv.Cols
	huge := int64(ctx)*elem <= maxHugeSlots
	switch {
	case q4:
		s.kq, s.vq = layerSlices(kvAlloc(hugemem.Uint8s, int(kvBytes), huge), layer)
	case e.manifest.KVCache != nil && e.manifest.KVCache.DType == plan.KVCacheF16:
		s.kh, s.vh = layerSlices(kvAlloc(hugemem.Uint16s, all, huge), layer)
	case e.manifest.KVCache != nil:
		s.ku, s.vu = layerSlices(kvAlloc(hugemem.Uint8s, all, huge), layer)
	default:
		s.k, s.v = layerSlices(kvAlloc(hugemem.Float32s, all, huge), layer)
	}
	s.rec = newRecState(s.decode.p.State, e.wkvTemp)
	if err := s.rec.keepSnapshots(opts.StateSnapshots, opts.StateBudget, s.decode.p.Steps); err != nil {
		s.Close()
		return nil, err
	}
	s.rec.conv = newConvHistory(s.decode.p, ctx)
	s.rec.pool, s.rec.threads = s.pool, s.threads
	s.q8 = newQ8Buf(e.q8Max)
	rows, nbuf := 0, 0
	for _, p := range e.plans {
		rows, nbuf = max(rows, p.p.Rows), max(nbuf, len(p.p.Buffers))
	}
	s.rowPos, s.bufRows = make([]int, rows), make([]int, nbuf)
	if e.PosComponents() > 1 {
		s.rotNext, s.passNext = make([]int, ctx+1), make([]int, rows)
	}
	s.attnRows, s.selAll, s.batchOff = make([]attnArgs, 0, rows), make([]int, rows), make([]int, rows)
	for i := range s.selAll {
		s.selAll[i] = i
	}
	s.rope.cos, s.rope.sin = make([]float32, rows*e.scratch), make([]float32, rows*e.scratch)
	s.attnTask.scores = make([][]float32, s.threads)
	for w := range s.attnTask.scores {
		s.attnTask.scores[w] = make([]float32, attnTile*ctx) // attendTile's m rows
	}
	return s, nil
}

// maxHugeSlots bounds the slots times the element size for which a
// session's cache goes in huge pages: 8 KiB, 4096 positions of binary16.
const maxHugeSlots = 8 << 10

// kvAlloc returns n zero values from inHuge when huge, else from make.
func kvAlloc[T any](inHuge func(int) []T, n int, huge bool) []T {
	if huge {
		return inHuge(n)
	}
	return make([]T, n)
}

// layerSlices cuts all, twice the sum of n, into each layer's K and V
// slices of n[l] values.
func layerSlices[T any](all []T, n []int) (k, v [][]T) {
	k, v = make([][]T, len(n)), make([][]T, len(n))
	at := 0
	for l, m := range n {
		k[l] = all[at : at+m : at+m]
		v[l] = all[at+m : at+2*m : at+2*m]
		at += 2 * m
	}
	return k, v
}

// hold keeps mem, the session's share of the process's memory budget,
// until Close, or until the session is collected unclosed.
func (s *Session) hold(mem *limits.Reservation) {
	s.mem = mem
	runtime.AddCleanup(s, func(m *limits.Reservation) { m.Release() }, mem)
}

// Close releases the session's memory and its share of the process's
// memory budget; it must not be used afterwards. The engine's workers are
// the engine's: Engine.Close stops them.
func (s *Session) Close() {
	s.closed = true
	s.mem.Release()
	s.arena, s.k, s.v, s.ku, s.vu, s.kh, s.vh, s.kq, s.vq = nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// Pos is the number of committed positions.
func (s *Session) Pos() int { return s.pos }

// Context is the capacity of the cache.
func (s *Session) Context() int { return s.ctx }

// CacheBytes is the memory of the session's key/value cache: each
// layer's slots (the context, or a sliding-window layer's ring) times the
// cache columns, for keys and values.
func (s *Session) CacheBytes() int64 {
	switch {
	case s.kq != nil:
		return cacheBytes(s.kq, s.vq, 1)
	case s.ku != nil:
		return cacheBytes(s.ku, s.vu, 1)
	case s.kh != nil:
		return cacheBytes(s.kh, s.vh, 2)
	}
	return cacheBytes(s.k, s.v, 4)
}

// cacheBytes is the size of the layers of k and v, of elem bytes each.
func cacheBytes[T any](k, v [][]T, elem int64) int64 {
	var n int64
	for l := range k {
		n += int64(len(k[l]) + len(v[l]))
	}
	return n * elem
}

// MaxRows is the most rows one pass may hold (the largest plan's AR length).
func (s *Session) MaxRows() int { return s.e.plans[len(s.e.plans)-1].p.Rows }

// Recurrent reports whether the model carries recurrent state, which a
// pass advances as it runs: such a session takes only chain passes,
// commits them whole, and rewinds only to 0 or to the last few pass
// boundaries its state cache keeps (SessionOptions.StateSnapshots). A
// model whose only state is short convolutions (LFM2) also rewinds, and
// commits the first rows of a pass, up to a bounded number of positions
// back (convRewind).
func (s *Session) Recurrent() bool { return len(s.rec.slots) > 0 }

// CostKey identifies what a pass of this session costs: the sessions of
// one engine on the same number of threads run passes of equal cost (see
// decoding.CostKeyer).
func (s *Session) CostKey() any {
	return struct {
		e       *Engine
		threads int
	}{s.e, s.threads}
}

// Reset empties the sequence; the cache memory is kept.
func (s *Session) Reset() {
	s.pos, s.pending, s.wrote, s.hidProg = 0, 0, 0, nil
	s.rec.reset()
}

// Pass is one general pass.
type Pass struct {
	// IDs holds one token id per row: at least 1, at most MaxRows.
	IDs []int
	// Pos holds each row's position, each at least Pos() and below the
	// context. nil means Pos()+i for a chain, else Pos() plus the number of
	// earlier rows the row sees (its depth in a tree).
	Pos []int
	// Mask says which earlier rows of the pass each row attends to, on
	// top of the committed cache; nil means a chain (row i sees rows
	// 0..i).
	Mask *Mask
	// Logits lists the rows whose logits are wanted, ascending; nil means
	// the last row, an empty non-nil slice none.
	Logits []int
	// Embeds, when set, holds one row of the embedding width per row of
	// the pass; a row whose id is -1 takes its embedding from here (an
	// image's embedding rows), the others from the table.
	Embeds []float32
	// Positions, when set, holds each row's rotary position apart from
	// its cache position: Engine.PosComponents values a row (M-RoPE's
	// t, h, w). nil means the row's position (Pos) for every component.
	// Attention still orders rows by their cache positions.
	Positions []int
	// Rows holds one input row per row of the pass for a plan that reads
	// rows (a draft head's: rows of the target's hidden state, see
	// Engine.MTP), and is nil for other plans.
	Rows []float32
}

// Logits holds the logits of the rows a pass selected, valid until the
// session's next pass.
type Logits struct {
	data  []float32
	vocab int
}

// Rows returns how many rows of logits there are.
func (l Logits) Rows() int {
	if l.vocab == 0 {
		return 0
	}
	return len(l.data) / l.vocab
}

// Row returns the logits of the i-th selected row.
func (l Logits) Row(i int) []float32 { return l.data[i*l.vocab : (i+1)*l.vocab] }

// errNeedsRows refuses Prefill and Decode on a draft head's session,
// whose passes need input rows (Pass.Rows).
var errNeedsRows = errors.New("engine: the draft head's passes need input rows: use Run with Pass.Rows")

// ErrEncoder refuses the passes of generation on a text encoder's session
// (bidirectional attention): it gives only hidden rows, by PrefillHidden.
var ErrEncoder = errors.New("engine: the model is a text encoder (bidirectional attention): it gives embeddings only")

// ErrClosed is returned by a session or engine used after Close.
var ErrClosed = errors.New("engine: closed")

// Run executes one pass at the committed position and returns the logits
// of the rows p.Logits names. The pass's rows take the cache slots after
// the committed positions until Commit keeps some of them or the next pass
// replaces them; a pass that is not committed leaves the sequence as it
// was (but the state of a recurrent model whose session keeps a single
// state set: see SessionOptions.StateSnapshots). On error nothing changes.
func (s *Session) Run(p *Pass) (Logits, error) {
	if s.closed {
		return Logits{}, ErrClosed
	}
	if s.e.encoder {
		return Logits{}, ErrEncoder
	}
	T := len(p.IDs)
	if T == 0 {
		return Logits{}, errors.New("engine: a pass of no rows")
	}
	prog := s.program(T)
	if prog == nil {
		return Logits{}, fmt.Errorf("engine: a pass of %d rows: the artifact's largest plan has %d", T, s.MaxRows())
	}
	if err := s.checkPassInput(prog, p); err != nil {
		return Logits{}, err
	}
	if len(p.Rows) != T*prog.rowsIn {
		if prog.rowsIn == 0 {
			return Logits{}, errors.New("engine: input rows given to a plan that reads none")
		}
		return Logits{}, fmt.Errorf("engine: %d input values for a pass of %d rows of %d", len(p.Rows), T, prog.rowsIn)
	}
	if p.Mask != nil {
		if p.Mask.rows != T {
			return Logits{}, fmt.Errorf("engine: a mask of %d rows for a pass of %d", p.Mask.rows, T)
		}
		if err := p.Mask.check(); err != nil {
			return Logits{}, err
		}
	}
	chain := p.Mask == nil
	if p.Pos != nil {
		if len(p.Pos) != T {
			return Logits{}, fmt.Errorf("engine: %d positions for a pass of %d rows", len(p.Pos), T)
		}
		for i, q := range p.Pos {
			if q < s.pos || q >= s.ctx {
				return Logits{}, fmt.Errorf("engine: row %d at position %d: positions of a pass are in [%d, %d)", i, q, s.pos, s.ctx)
			}
			chain = chain && q == s.pos+i
		}
	}
	if p.Positions != nil {
		P := s.e.PosComponents()
		if len(p.Positions) != T*P {
			return Logits{}, fmt.Errorf("engine: %d rotary position values for a pass of %d rows of %d components", len(p.Positions), T, P)
		}
		for i, q := range p.Positions {
			if q < 0 || q > 1<<30 {
				return Logits{}, fmt.Errorf("engine: row %d: rotary position %d out of range", i/P, q)
			}
		}
	}
	sel := p.Logits
	if sel == nil {
		s.sel[0] = T - 1
		sel = s.sel[:]
	}
	for i, r := range sel {
		if r < 0 || r >= T || (i > 0 && r <= sel[i-1]) {
			return Logits{}, fmt.Errorf("engine: logits rows %v: want ascending rows of the pass's %d", sel, T)
		}
	}
	if len(sel) > prog.selCap {
		return Logits{}, fmt.Errorf("engine: %d rows of logits asked, the plan of %d rows returns at most %d", len(sel), prog.p.Rows, prog.selCap)
	}
	if s.Recurrent() {
		if !chain {
			return Logits{}, errors.New("engine: a recurrent model takes only chain passes (rows at consecutive positions, each seeing all earlier rows)")
		}
		if s.pending > 0 {
			return Logits{}, errors.New("engine: a recurrent model's previous pass was not committed")
		}
	}
	for i := range T {
		switch {
		case p.Pos != nil:
			s.rowPos[i] = p.Pos[i]
		case p.Mask != nil:
			s.rowPos[i] = s.pos + p.Mask.seen(i) - 1
		default:
			s.rowPos[i] = s.pos + i
		}
	}
	s.chain, s.mask = chain, nil
	if !chain {
		s.mask = p.Mask
		if s.mask == nil {
			s.mask = ChainMask(T)
		}
	}
	s.e.passMu.Lock()
	s.embeds, s.ropePos, s.ropeP = p.Embeds, p.Positions, s.e.PosComponents()
	s.rowsIn = p.Rows
	out := s.exec(prog, p.IDs, sel)
	s.embeds, s.ropePos, s.rowsIn = nil, nil, nil
	s.e.passMu.Unlock()
	s.noteWritten(T)
	s.pending = T
	s.pendIDs = s.pendIDs[:0]
	if s.Recurrent() && p.Embeds == nil && p.Positions == nil && p.Rows == nil {
		s.pendIDs = append(s.pendIDs, p.IDs...)
	}
	if s.rotNext != nil {
		shift := s.rotShift()
		for i := range T {
			if p.Positions == nil {
				s.passNext[i] = s.rowPos[i] + shift + 1
				continue
			}
			P := s.ropeP
			m := p.Positions[i*P]
			for _, q := range p.Positions[i*P+1 : (i+1)*P] {
				m = max(m, q)
			}
			s.passNext[i] = m + 1
		}
	}
	return out, nil
}

// rotShift is how far the rotary position of the next text row is from
// its cache position: 0 but after images of an M-RoPE model.
func (s *Session) rotShift() int {
	if s.rotNext == nil {
		return 0
	}
	return s.rotNext[s.pos] - s.pos
}

// NextPosition is the rotary position the next text row takes. It is
// Pos() but for models whose rows carry several rotary position
// components (Qwen2-VL's M-RoPE): there, once a pass placed rows at
// positions of their own (Pass.Positions), the text after them continues
// from the largest component of those rows plus one, as Hugging Face's
// get_rope_index and llama.cpp's mtmd place text after an image, and
// passes without Positions (Decode, Prefill, tree passes, DecodeBatch)
// take their rows' cache positions shifted by the same amount.
func (s *Session) NextPosition() int { return s.pos + s.rotShift() }

// program returns the smallest plan that holds rows rows, or nil.
func (s *Session) program(rows int) *program {
	for _, p := range s.e.plans {
		if p.p.Rows >= rows {
			return p
		}
	}
	return nil
}

// checkIDs refuses ids outside the vocabulary, and a pass that does not
// fit the cache.
func (s *Session) checkIDs(ids []int) error {
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

// Commit keeps rows of the last pass as the next committed positions:
// rows[k] becomes position Pos()+k, so it must sit at that position and
// see exactly rows[0..k] of its pass (a chain through the pass, such as
// one branch of a tree). Their cache entries are copied into place. An
// empty rows drops the pass.
func (s *Session) Commit(rows []int) error {
	if s.closed {
		return ErrClosed
	}
	if s.pending == 0 {
		if len(rows) == 0 {
			return nil
		}
		return errors.New("engine: no pass to commit")
	}
	for k, r := range rows {
		if r < 0 || r >= s.pending || (k > 0 && r <= rows[k-1]) {
			return fmt.Errorf("engine: commit rows %v: want ascending rows of the last pass's %d", rows, s.pending)
		}
		if s.rowPos[r] != s.pos+k {
			return fmt.Errorf("engine: commit: row %d is at position %d, not %d", r, s.rowPos[r], s.pos+k)
		}
		if !s.chain {
			j := 0
			for c := 0; c <= r; c++ {
				seen := s.mask.Allowed(r, c)
				if seen != (j <= k && rows[j] == c) {
					return fmt.Errorf("engine: commit: row %d does not see exactly the rows %v before it", r, rows[:k+1])
				}
				if seen {
					j++
				}
			}
		} else if r != k {
			return fmt.Errorf("engine: commit: row %d of a chain pass sees rows 0..%d, not %v", r, r, rows[:k+1])
		}
	}
	if s.Recurrent() {
		if len(rows) == s.pending {
			s.rec.commit(s.pos + len(rows))
		} else if err := s.rewindState(s.pos + len(rows)); err != nil {
			if s.replayKept(len(rows)) {
				return nil
			}
			return fmt.Errorf("engine: a recurrent model commits whole passes (%d rows), not %d: %w", s.pending, len(rows), err)
		}
	}
	for k, r := range rows {
		if r != k {
			s.moveSlot(s.pos+r, s.pos+k)
		}
	}
	if s.rotNext != nil {
		for k, r := range rows {
			s.rotNext[s.pos+k+1] = max(s.rotNext[s.pos+k], s.passNext[r])
		}
	}
	s.pos += len(rows)
	s.pending = 0
	return nil
}

// replayKept commits the first n rows of a recurrent model's pending
// chain pass whose state past them is not kept: it returns to the state
// at the pass's start and runs those rows again as a chain pass. It
// reports false, changing nothing, when the pass cannot be replayed (rows
// of embeddings, or a single state set the pass overwrote).
func (s *Session) replayKept(n int) bool {
	if len(s.pendIDs) < n || !s.chain || !s.rec.restore(s.pos) {
		return false
	}
	ids := s.pendIDs[:n]
	s.pending, s.pendIDs = 0, s.pendIDs[n:n]
	s.sel[0] = n - 1
	s.runChain(s.program(n), ids, s.sel[:])
	return true
}

// moveSlot copies cache slot from to slot to in every layer (and to the
// mirror of to in a ring layer).
func (s *Session) moveSlot(from, to int) {
	for l := range max(len(s.k), len(s.kh), len(s.ku), len(s.kq)) {
		E := s.headDim[l]
		if E == 0 {
			continue
		}
		if s.kq != nil {
			E = kernel.KVQ4RowBytes(E) // a row's bytes
		}
		stride, r := s.stride[l], s.ring[l]
		f, d := from, to
		if r > 0 {
			f, d = from%r, to%r
		}
		for g := range s.kvHeads[l] {
			a := (g*stride + f) * E
			for _, b := range [2]int{(g*stride + d) * E, (g*stride + d + r) * E} {
				switch {
				case s.kq != nil:
					copy(s.kq[l][b:b+E], s.kq[l][a:a+E])
					copy(s.vq[l][b:b+E], s.vq[l][a:a+E])
				case s.ku != nil:
					copy(s.ku[l][b:b+E], s.ku[l][a:a+E])
					copy(s.vu[l][b:b+E], s.vu[l][a:a+E])
				case s.kh != nil:
					copy(s.kh[l][b:b+E], s.kh[l][a:a+E])
					copy(s.vh[l][b:b+E], s.vh[l][a:a+E])
				default:
					copy(s.k[l][b:b+E], s.k[l][a:a+E])
					copy(s.v[l][b:b+E], s.v[l][a:a+E])
				}
				if r == 0 {
					break
				}
			}
		}
	}
}

// Rewind drops the committed positions from pos on (and any uncommitted
// pass). A recurrent model rewinds only to 0, to where it is, or to a
// position whose state it keeps or can rebuild (see Recurrent).
func (s *Session) Rewind(pos int) error {
	if s.closed {
		return ErrClosed
	}
	if pos < 0 || pos > s.pos {
		return fmt.Errorf("engine: rewind to %d: %d positions are committed", pos, s.pos)
	}
	if !s.ringKeeps(pos) {
		return fmt.Errorf("engine: rewind to %d: the sliding-window layers keep only the positions a few passes behind %d", pos, s.wrote)
	}
	if s.Recurrent() {
		if err := s.rewindState(pos); err != nil {
			return err
		}
	}
	s.pos, s.pending = pos, 0
	s.hidRows = max(0, min(s.hidRows, pos-s.hidPos)) // the dropped positions' rows are gone
	return nil
}

// Prefill feeds ids at the current position, commits them, and returns
// the logits after the last of them, valid until the next call. On error
// nothing changes.
func (s *Session) Prefill(ids []int) ([]float32, error) {
	return s.PrefillContext(context.Background(), ids)
}

// PrefillContext is Prefill, checking ctx between passes: when it is done,
// the positions fed so far stay committed and ctx's error is returned.
func (s *Session) PrefillContext(ctx context.Context, ids []int) ([]float32, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.e.encoder {
		return nil, ErrEncoder
	}
	if len(ids) == 0 {
		return nil, errors.New("engine: no tokens")
	}
	if s.decode.rowsIn > 0 {
		return nil, errNeedsRows
	}
	if err := s.checkIDs(ids); err != nil {
		return nil, err
	}
	n := s.prefill.p.Rows
	var out Logits
	none := []int{}
	for lo := 0; lo < len(ids); lo += n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chunk := ids[lo:min(lo+n, len(ids))]
		sel := none
		if lo+n >= len(ids) {
			s.sel[0] = len(chunk) - 1
			sel = s.sel[:]
		}
		out = s.runChain(s.prefill, chunk, sel)
	}
	return out.Row(0), nil
}

// Decode feeds one id with the AR-1 plan, commits it, and returns the
// logits after it, valid until the next call. It allocates nothing.
func (s *Session) Decode(id int) ([]float32, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.e.encoder {
		return nil, ErrEncoder
	}
	if s.decode.rowsIn > 0 {
		return nil, errNeedsRows
	}
	s.one[0] = id
	if err := s.checkIDs(s.one[:]); err != nil {
		return nil, err
	}
	s.sel[0] = 0
	return s.runChain(s.decode, s.one[:], s.sel[:]).Row(0), nil
}

// runChain runs a chain pass of checked ids through prog and commits it.
func (s *Session) runChain(prog *program, ids, sel []int) Logits {
	for i := range ids {
		s.rowPos[i] = s.pos + i
	}
	s.chain, s.mask = true, nil
	s.e.passMu.Lock()
	out := s.exec(prog, ids, sel)
	s.e.passMu.Unlock()
	s.noteWritten(len(ids))
	if s.Recurrent() {
		s.rec.commit(s.pos + len(ids))
	}
	if s.rotNext != nil {
		for i := range ids {
			s.rotNext[s.pos+i+1] = s.rotNext[s.pos+i] + 1
		}
	}
	s.pos += len(ids)
	s.pending = 0
	return out
}

// exec executes one pass of prog over the rows ids (len(ids) <= its AR
// length; the rest is padding, never computed) with s.rowPos, s.chain and
// s.mask set, writing the rows into the cache slots from s.pos on, and
// returns the logits of rows sel. The caller has checked everything.
func (s *Session) exec(prog *program, ids, sel []int) Logits {
	s.rec.conv.at = s.pos // the causal_conv history records the pass from here
	p := prog.p
	T := len(ids)
	s.hidProg, s.hidPos, s.hidRows = nil, s.pos, T
	if s.chain && s.batch == nil {
		s.hidProg = prog
	}
	s.passGen++
	s.rec.begin()
	buf := func(id int) ([]float32, int, int) {
		b := p.Buffers[id]
		r := s.bufRows[id]
		return s.arena[b.Offset : b.Offset+r*b.Cols], r, b.Cols
	}
	s.q8In = -1
	for i := 0; i < len(prog.steps); i++ {
		st := &prog.steps[i]
		if st.Op != op.Linear {
			s.q8In = -1 // only consecutive linears share quantized inputs
		}
		switch {
		case st.Op == op.Embed, st.Op == op.Rows:
			s.bufRows[st.Out] = T
		case st.Op == op.GroupRows:
			s.bufRows[st.Out] = (s.bufRows[st.In[0]] - st.Lo) / st.Group
		case st.Op == op.SelectRows:
			if len(sel) == 0 && prog.selectLast {
				return Logits{}
			}
			s.bufRows[st.Out] = len(sel)
		default:
			s.bufRows[st.Out] = s.bufRows[st.In[0]]
		}
		out, rows, cols := buf(st.Out)
		var x []float32
		xcols := 0
		if len(st.In) > 0 {
			x, _, xcols = buf(st.In[0])
		}
		switch st.Op {
		case op.Embed:
			for t, id := range ids {
				if id < 0 { // checked: a row of s.embeds
					copy(out[t*cols:(t+1)*cols], s.embeds[t*cols:(t+1)*cols])
					continue
				}
				if st.qw != nil {
					st.qw.row(out[t*cols:(t+1)*cols], id)
					continue
				}
				copy(out[t*cols:(t+1)*cols], st.w[id*cols:(id+1)*cols])
			}
		case op.Linear:
			lora := s.prepareAdapters(prog.steps, i, st.fuse+1, x, rows, xcols, buf)
			if st.fuse > 0 {
				s.linearGroup(prog.steps, i, x, rows, xcols, buf, lora)
				i += st.fuse
			} else {
				s.linear(st, out, x, rows, xcols, cols, lora)
			}
			if st.slotLayer > 0 && rows == 1 && s.chain {
				s.prefetchSlot(st.slotLayer-1, s.pos)
			}
		case op.RMSNorm, op.HeadRMSNorm, op.Scale, op.SiLU, op.GELUTanh, op.GELUF16, op.RoPE, op.Hadamard, op.LayerNorm:
			s.rowWise(st, out, x, nil, rows, cols)
		case op.Rows:
			copy(out, s.rowsIn) // Encoder.Encode checked its length
		case op.GroupRows:
			// k rows of C are one row of k*C in row-major order, after the
			// Lo rows skipped
			copy(out, x[st.Lo*xcols:st.Lo*xcols+rows*cols])
		case op.Add, op.Mul:
			y, _, _ := buf(st.In[1])
			s.rowWise(st, out, x, y, rows, cols)
		case op.Attention, op.SharedAttention:
			var k, v []float32 // nil: a shared slot, written by an earlier step
			if st.Op == op.Attention {
				k, _, _ = buf(st.In[1])
				v, _, _ = buf(st.In[2])
			}
			a := st.Attn
			if a.Bidirectional {
				s.attendAll(a, out, x, k, v, rows)
				break
			}
			s.attn = attnArgs{out: out, q: x, k: k, v: v, C: s.kvCols,
				T: rows, pos: s.pos, H: a.Heads, G: a.KVHeads, E: a.HeadDim, scale: a.Scale,
				window: a.Window}
			if s.batch != nil {
				s.batchAttention(&s.attn, a.Layer, xcols)
				s.attendRows()
				break
			}
			if !s.chain {
				s.attn.rowPos, s.attn.mask = s.rowPos[:rows], s.mask
			}
			s.cacheLayer(&s.attn, a.Layer)
			s.attend()

		case op.Columns:
			op.ColumnsRows(out, x, rows, xcols, st.Lo, st.Hi, st.Group)
		case op.GatherCols:
			for t := 0; t < rows; t++ {
				o, xr := out[t*cols:(t+1)*cols], x[t*xcols:(t+1)*xcols]
				for i, j := range st.Index {
					o[i] = xr[j]
				}
			}
		case op.ZeroCols:
			copy(out[:rows*cols], x[:rows*cols])
			for t := 0; t < rows; t++ {
				for _, j := range st.Index {
					out[t*cols+j] = 0
				}
			}
		case op.SelectRows:
			for i, r := range sel {
				copy(out[i*cols:(i+1)*cols], x[r*cols:(r+1)*cols])
			}
		default:
			var in [5][]float32
			for j, b := range st.In {
				in[j], _, _ = buf(b)
			}
			s.rec.run(st, out, in[:len(st.In)], rows, cols)
		}
	}
	out, _, cols := buf(p.Output)
	return Logits{data: out, vocab: cols}
}

// cacheLayer points a at layer l of s's cache.
// prefetchSlot asks for the cache lines of slot pos of layer l, which
// the layer's one-row store will write (a row of E values in each
// key/value head), so that the store finds them near rather than in
// memory.
func (s *Session) prefetchSlot(l, pos int) {
	if pos >= s.ctx || l >= len(s.headDim) {
		return
	}
	E := s.headDim[l]
	if E == 0 {
		return
	}
	if r := s.ring[l]; r > 0 {
		pos %= r
	}
	switch {
	case s.kq != nil:
		prefetchRows(s.kq[l], s.vq[l], pos, s.stride[l], s.kvHeads[l], kernel.KVQ4RowBytes(E))
	case s.ku != nil:
		prefetchRows(s.ku[l], s.vu[l], pos, s.stride[l], s.kvHeads[l], E)
	case s.kh != nil:
		prefetchRows(s.kh[l], s.vh[l], pos, s.stride[l], s.kvHeads[l], E)
	case s.k != nil:
		prefetchRows(s.k[l], s.v[l], pos, s.stride[l], s.kvHeads[l], E)
	}
}

// prefetchRows asks for slot pos of every key/value head of a layer's
// caches K and V ([G][slots][E]): a row of E values in each head.
func prefetchRows[T uint8 | uint16 | float32](K, V []T, pos, slots, G, E int) {
	for g := range G {
		at := (g*slots + pos) * E
		kernel.PrefetchRun(K, at, E)
		kernel.PrefetchRun(V, at, E)
	}
}

func (s *Session) cacheLayer(a *attnArgs, l int) {
	a.stride, a.ring = s.stride[l], s.ring[l]
	switch {
	case s.kq != nil:
		a.Kq, a.Vq = s.kq[l], s.vq[l]
		kc := s.e.manifest.KVCache
		a.rotK = kc.DType == plan.KVCacheQ4
		a.kmu, a.vmu = nil, nil
		if len(kc.KMean) > l {
			a.kmu, a.vmu = kc.KMean[l], kc.VMean[l]
		}
	case s.ku != nil:
		kc := s.e.manifest.KVCache
		a.Ku, a.Vu, a.ks, a.vs = s.ku[l], s.vu[l], kc.K[l], kc.V[l]
	case s.kh != nil:
		a.Kh, a.Vh = s.kh[l], s.vh[l]
	default:
		a.K, a.V = s.k[l], s.v[l]
	}
}

// PrefillAll feeds ids, commits them, and returns the logits of every
// position (copies), in chain passes of the largest plan (of one row when
// the artifact's plans return one row of logits each, as artifacts made
// before the general pass do). It checks ctx between passes.
func (s *Session) PrefillAll(ctx context.Context, ids []int) ([][]float32, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.e.encoder {
		return nil, ErrEncoder
	}
	if s.decode.rowsIn > 0 {
		return nil, errNeedsRows
	}
	if err := s.checkIDs(ids); err != nil {
		return nil, err
	}
	prog := s.e.plans[len(s.e.plans)-1]
	n := min(prog.p.Rows, prog.selCap)
	if n < prog.p.Rows {
		prog = s.decode
		n = 1
	}
	sel := make([]int, n)
	for i := range sel {
		sel[i] = i
	}
	out := make([][]float32, 0, len(ids))
	for lo := 0; lo < len(ids); lo += n {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		chunk := ids[lo:min(lo+n, len(ids))]
		l := s.runChain(prog, chunk, sel[:len(chunk)])
		for i := range l.Rows() {
			out = append(out, append([]float32(nil), l.Row(i)...))
		}
	}
	return out, nil
}

// PosComponents is the number of rotary position components a row of a
// pass carries (Engine.PosComponents).
func (s *Session) PosComponents() int { return s.e.PosComponents() }
