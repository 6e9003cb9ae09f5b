package engine

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// ErrContextFull is returned when a call would write past the KV cache.
var ErrContextFull = errors.New("context is full")

// UnsupportedError reports an artifact this engine cannot run, such as a
// weight layout it has no kernel for.
type UnsupportedError struct{ Msg string }

func (e *UnsupportedError) Error() string { return "engine: unsupported: " + e.Msg }

// Engine is an opened artifact ready to run, with one pool of worker
// goroutines that its sessions share (one pass at a time). It is safe for
// concurrent use by several sessions; each session owns its arena and
// cache. Close stops the workers and unmaps the file.
type Engine struct {
	pool     *pool
	passMu   *sync.Mutex // held by the session whose pass uses the pool (shared with mtp)
	closed   atomic.Bool
	art      *artifact.Artifact // nil when built from memory in tests
	tensor   tensorFunc
	manifest plan.Manifest
	plans    []*program // sorted by AR length; plans[0] is AR-1
	weights  map[string][]float32
	qweights map[string]*qweight
	vocab    int // token ids must be below this (rows of every embedding table)
	arena    int // floats: the largest plan arena
	scratch  int // floats of rope scratch: max rot_dim/2
	posComps int // position components a row carries (rope sections; 0 or 1: plain)
	q8Max    int // values: the largest T*K input of a packed linear
	wkvTemp  int // floats of wkv7 scratch: max 4*head_dim
	vision   []*visionProgram
	// mtp is the multi-token-prediction draft head (Manifest.MTP) as an
	// engine of its own plans over the same pool, weights and mutex; nil
	// without one. head marks such an engine.
	mtp  *Engine
	head bool
	// ctx is the most positions a session may hold: the manifest's Ctx,
	// or Options.Context when it extends it.
	ctx int
	// encoder marks a text encoder: its plans' attention is bidirectional,
	// so a pass holds a whole sequence and the engine only gives hidden
	// rows (PrefillHidden).
	encoder bool
	// adapters are the low-rank adapters sessions may choose.
	adapters adapters
}

// program is a validated plan with its weights resolved.
type program struct {
	p     *plan.Plan
	steps []step
	// selCap is how many rows of logits a pass can select (the rows of
	// the select_rows output; 1 in artifacts of format 1's first plans).
	selCap int
	// selectLast tells that no step after select_rows touches the cache
	// or a state, so a pass that wants no logits stops there.
	selectLast bool
	// hidden is the buffer of the rows the classifier reads (Plan.Hidden),
	// -1 when the plan does not keep them; rowsIn the columns of a rows
	// step's input rows, 0 without one.
	hidden, rowsIn int
}

// Options configures OpenWith.
type Options struct {
	// Threads is the size of the worker pool, counting a pass's caller
	// (0: runtime.GOMAXPROCS); each session uses up to this many. The
	// pool leaves threads out while other processes hold the cores they
	// would run on (see pool and bench).
	Threads int
	// HugePages makes sure the artifact sits in huge pages (Linux; see
	// mmapfile.OpenHugePages): the page cache's 2 MiB folios mapped where
	// it has them, else a copy in memory advised for transparent huge
	// pages (faster decode, slower load, memory the kernel cannot page out).
	HugePages bool
	// Context, when above the manifest's Ctx, lets sessions hold that
	// many positions, up to the model's trained context
	// (plan.Manifest.Extend): caches are sized as sessions are made, and
	// rotary frequencies that a scaling picks by the context are those
	// a compile for Context gives. 0 or at most Ctx: the compiled context.
	Context int
}

// step is a plan step with its weights as float32 views.
type step struct {
	plan.Step
	w, b []float32
	qw   *qweight    // a quantized w (then w is nil)
	ws   [][]float32 // every weight in order (recurrent ops)

	// runQ4 and runW8 tell whether this linear and those right after it
	// on the same input (q, k, v; gate, up) include 4-bit and 8-bit
	// packed products: the first of them lays its quantized input out
	// once for those kinds.
	runQ4, runW8 bool

	// fuse is how many linears right after this one join it in one
	// dispatch to the workers (fuseLinears): packed products of the same
	// input, such as q, k and v, or gate and up.
	fuse int

	// slotLayer, when positive, is 1 + the layer whose cache slot a
	// one-row chain pass stores at its attention step, asked for right
	// after this step's dispatch (slotPrefetches): this step is the lead
	// of the last linear dispatch before that attention step (q, k and v).
	slotLayer int
}

// Open maps the artifact at path with a pool of runtime.GOMAXPROCS
// workers (see OpenWith).
func Open(path string) (*Engine, error) { return OpenWith(path, Options{}) }

// OpenWith maps the artifact at path, validates its manifest, every plan
// it lists, and every weight the plans read, and starts its worker pool.
func OpenWith(path string, opts Options) (*Engine, error) {
	if opts.Threads > 0 {
		if err := limits.CheckThreads("engine: threads", opts.Threads); err != nil {
			return nil, err
		}
	}
	// the kernels' walk as stored by a tune: a load never times one
	if _, err := kernel.StoredTune(); err != nil {
		return nil, err
	}
	art, err := artifact.Open(path, artifact.OpenOptions{HugePages: opts.HugePages})
	if err != nil {
		return nil, err
	}
	var m plan.Manifest
	if err := art.Manifest(&m); err != nil {
		art.Close()
		return nil, err
	}
	e, err := load(m, art.Blob, art.Tensor, opts)
	if err != nil {
		art.Close()
		return nil, fmt.Errorf("engine: %s: %w", path, err)
	}
	e.art = art
	if err := e.loadCarriedAdapters(); err != nil {
		e.Close()
		return nil, fmt.Errorf("engine: %s: %w", path, err)
	}
	return e, nil
}

// start starts the worker pool.
func (e *Engine) start(opts Options) {
	n := opts.Threads
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	e.pool = newPool(n)
	e.pool.sampleStart()
}

// Threads returns the size of the worker pool.
func (e *Engine) Threads() int { return e.pool.threads }

// tensorFunc returns a tensor's descriptor and bytes (Artifact.Tensor).
type tensorFunc func(name string) (artifact.TensorInfo, []byte, error)

// load builds an engine from a manifest, the blobs it names and tensors.
func load(m plan.Manifest, blob func(name string) ([]byte, error), tensor tensorFunc, opts Options) (*Engine, error) {
	e := &Engine{manifest: m, tensor: tensor, weights: map[string][]float32{}, qweights: map[string]*qweight{}, vocab: -1,
		passMu: &sync.Mutex{}}
	if err := e.manifest.Validate(); err != nil {
		return nil, err
	}
	if e.manifest.Weights != "f32" && e.manifest.Weights != plan.WeightsMixed {
		return nil, &UnsupportedError{Msg: fmt.Sprintf("weights layout %q", e.manifest.Weights)}
	}
	for _, ref := range e.manifest.Plans {
		b, err := blob(ref.Blob)
		if err != nil {
			return nil, err
		}
		p, err := plan.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref.Blob, err)
		}
		if p.Rows != ref.ARLen || p.KV.Ctx != e.manifest.Ctx {
			return nil, fmt.Errorf("%s: plan of %d rows and context %d, manifest says %d and %d",
				ref.Blob, p.Rows, p.KV.Ctx, ref.ARLen, e.manifest.Ctx)
		}
		if len(e.plans) > 0 && p.KV != e.plans[0].p.KV {
			return nil, fmt.Errorf("%s: cache layout %+v differs from %+v", ref.Blob, p.KV, e.plans[0].p.KV)
		}
		if len(e.plans) > 0 && !slices.Equal(p.State, e.plans[0].p.State) {
			return nil, fmt.Errorf("%s: state slots %v differ from %v", ref.Blob, p.State, e.plans[0].p.State)
		}
		prog, err := e.resolve(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref.Blob, err)
		}
		e.plans = append(e.plans, prog)
		e.arena = max(e.arena, p.Arena)
	}
	slices.SortFunc(e.plans, func(a, b *program) int { return a.p.Rows - b.p.Rows })
	if err := e.loadVision(blob); err != nil {
		return nil, err
	}
	if err := e.loadMTP(blob); err != nil {
		return nil, err
	}
	if err := e.extend(opts.Context); err != nil {
		return nil, err
	}
	e.start(opts)
	if e.mtp != nil {
		e.mtp.pool = e.pool
	}
	return e, nil
}

// resolve checks a text plan's weights against the artifact and binds
// them.
func (e *Engine) resolve(p *plan.Plan) (*program, error) {
	rowsIn := 0
	for i, st := range p.Steps {
		if st.Op == op.Rows && e.head && rowsIn == 0 {
			rowsIn = p.Buffers[st.Out].Cols
			continue
		}
		if st.Op == op.Rows || st.Op == op.GroupRows || (st.Op == op.Attention && st.Attn.Bidirectional && st.Attn.Tile != 0) {
			return nil, fmt.Errorf("step %d (%s): %v belongs to a vision plan", i, st.Name, st.Op)
		}
	}
	bidi, causal := false, false
	for _, st := range p.Steps {
		if st.Op == op.Attention || st.Op == op.SharedAttention {
			bidi = bidi || st.Attn.Bidirectional
			causal = causal || !st.Attn.Bidirectional
		}
	}
	switch {
	case bidi && (causal || e.head || p.Hidden == nil):
		return nil, errors.New("a text plan with bidirectional attention must be an encoder's: all its attention bidirectional, its hidden rows kept")
	case bidi:
		e.encoder = true
	case e.encoder:
		return nil, errors.New("an encoder's plans mix bidirectional and causal attention")
	}
	prog, err := e.resolveSteps(p, false)
	if err != nil {
		return nil, err
	}
	prog.rowsIn = rowsIn
	return prog, nil
}

// resolveSteps binds p's weights; a vision plan's embed steps (position
// tables) and packed linears do not size the text sessions.
func (e *Engine) resolveSteps(p *plan.Plan, vision bool) (*program, error) {
	shapes := map[string][]int64{}
	for _, st := range p.Steps {
		for _, name := range st.Weights {
			if _, ok := shapes[name]; ok {
				continue
			}
			info, data, err := e.tensor(name)
			if err != nil {
				return nil, err
			}
			shapes[name] = info.Shape
			if info.Layout != "" {
				if _, ok := e.qweights[name]; !ok {
					qw, err := newQWeight(info, data)
					if err != nil {
						return nil, err
					}
					e.qweights[name] = qw
				}
				continue
			}
			if info.DType != tensor.F32 {
				return nil, &UnsupportedError{Msg: fmt.Sprintf("tensor %q: dtype %v layout %q", name, info.DType, info.Layout)}
			}
			if _, ok := e.weights[name]; !ok {
				e.weights[name] = floats(data)
			}
		}
	}
	err := p.CheckWeights(func(n string) ([]int64, bool) { s, ok := shapes[n]; return s, ok })
	if err != nil {
		return nil, err
	}
	prog := &program{p: p, steps: make([]step, len(p.Steps)), hidden: -1}
	if p.Hidden != nil {
		prog.hidden = *p.Hidden
	}
	sel := -1
	for i, st := range p.Steps {
		s := step{Step: st}
		if len(st.Weights) > 0 {
			s.w, s.qw = e.weights[st.Weights[0]], e.qweights[st.Weights[0]]
			if s.qw != nil && st.Op != op.Embed && st.Op != op.Linear {
				return nil, fmt.Errorf("step %d (%v %s): a quantized weight %q can only feed embed or linear", i, st.Op, st.Name, st.Weights[0])
			}
		}
		if len(st.Weights) > 1 {
			if e.qweights[st.Weights[1]] != nil {
				return nil, fmt.Errorf("step %d (%s): the bias %q is quantized", i, st.Name, st.Weights[1])
			}
			s.b = e.weights[st.Weights[1]]
		}
		if st.Op == op.Attention && st.Attn != nil && !st.Attn.Bidirectional && e.manifest.KVCache != nil && plan.IsKVQ4(e.manifest.KVCache.DType) {
			if err := kernel.CheckKVQ4(st.Attn.HeadDim); err != nil {
				return nil, fmt.Errorf("step %d (%s): manifest.kv_cache: %w", i, st.Name, err)
			}
			if err := checkKVMeans(e.manifest.KVCache, st.Attn.Layer, p.KV.Layers, st.Attn.KVHeads*st.Attn.HeadDim); err != nil {
				return nil, fmt.Errorf("step %d (%s): %w", i, st.Name, err)
			}
		}
		if st.Op == op.Attention && e.manifest.KVCache != nil && e.manifest.KVCache.DType == plan.KVCacheU8 {
			kc, a := e.manifest.KVCache, st.Attn
			if len(kc.K) != p.KV.Layers {
				return nil, fmt.Errorf("manifest.kv_cache: %d layers, the plan has %d", len(kc.K), p.KV.Layers)
			}
			for _, sc := range [][]float32{kc.K[a.Layer], kc.V[a.Layer]} {
				if len(sc) != 1 && len(sc) != a.KVHeads {
					return nil, fmt.Errorf("manifest.kv_cache: layer %d has %d scales for %d key/value heads", a.Layer, len(sc), a.KVHeads)
				}
			}
		}
		switch st.Op {
		case op.Embed:
			v := int(shapes[st.Weights[0]][0])
			if !vision && (e.vocab < 0 || v < e.vocab) {
				e.vocab = v
			}
		case op.Linear:
			if !vision && s.qw != nil && s.qw.packed() {
				e.q8Max = max(e.q8Max, p.Rows*s.qw.K)
			}
		case op.RoPE:
			e.scratch = max(e.scratch, st.Rope.RotDim/2)
			if !vision { // an encoder's positions are its own (Encoder.EncodeAt)
				e.posComps = max(e.posComps, st.Rope.Components())
			}
		case op.SelectRows:
			if sel >= 0 {
				return nil, fmt.Errorf("step %d: a second select_rows step", i)
			}
			sel, prog.selCap, prog.selectLast = i, p.Buffers[st.Out].Rows, true
		case op.Attention, op.SharedAttention:
			if sel >= 0 {
				prog.selectLast = false
			}
		case op.WKV7:
			e.wkvTemp = max(e.wkvTemp, 4*st.HeadDim)
		}
		if st.Op.Stateful() && sel >= 0 {
			prog.selectLast = false
		}
		if st.Op.Recurrent() {
			for _, name := range st.Weights {
				s.ws = append(s.ws, e.weights[name])
			}
		}
		prog.steps[i] = s
	}
	if e.vocab < 0 && !vision {
		return nil, errors.New("plan has no embed step")
	}
	if sel < 0 {
		// every row's logits: the output has the pass's rows
		prog.selCap = p.Buffers[p.Output].Rows
	}
	for i := len(prog.steps) - 1; i >= 0; i-- {
		st := &prog.steps[i]
		if st.Op != op.Linear || st.qw == nil || !st.qw.packed() {
			continue
		}
		st.runQ4, st.runW8 = st.qw.forQ4, st.qw.forW8
		if i+1 < len(prog.steps) {
			if next := &prog.steps[i+1]; next.Op == op.Linear && next.In[0] == st.In[0] {
				st.runQ4, st.runW8 = st.runQ4 || next.runQ4, st.runW8 || next.runW8
			}
		}
	}
	fuseLinears(prog.steps, p.Buffers)
	slotPrefetches(prog.steps)
	return prog, nil
}

// slotPrefetches marks, for each attention step, the lead of the last
// linear dispatch before it (its q, k and v), after which the engine asks
// for the lines of the cache slot the attention step's one-row store will
// write (Session.prefetchSlot). No weights stream between there and the
// store (only RoPE and norms of one row), so the lines are still near when
// it comes. Asked for a layer ahead, as before, the whole layer's weights
// streamed in between and often evicted them: the store then waited on
// memory (kernel.rowF16 took up to 3% of a Qwen3-0.6B-shape decode's CPU
// at 1 thread).
func slotPrefetches(steps []step) {
	for j := range steps {
		if steps[j].Op != op.Attention || steps[j].Attn.Bidirectional {
			continue
		}
		k := j - 1
		for k >= 0 && steps[k].Op != op.Linear && steps[k].Op != op.Attention {
			k--
		}
		if k < 0 || steps[k].Op != op.Linear {
			continue
		}
		lead := k
		for i := k - 1; i >= max(0, k-maxFuse); i-- {
			if steps[i].Op == op.Linear && i+steps[i].fuse >= k {
				lead = i
			}
		}
		steps[lead].slotLayer = steps[j].Attn.Layer + 1
	}
}

// maxFuse is the most linears one dispatch runs (q, k and v take 3).
const maxFuse = 4

// fuseLimit is the most linears fuseLinears puts in a group (a variable so
// that tests can compare with every linear dispatched alone).
var fuseLimit = maxFuse

// fuseLinears marks groups of consecutive packed linears that read the same
// input, so that each group is one dispatch to the workers instead of one
// per linear: on a small model's decode, where a linear is a few
// microseconds of work, every dispatch ends with workers waiting for the
// slowest, and q, k, v and gate, up are 5 of a layer's 7. A group needs
// outputs that do not overlap one another or the input in the arena (each
// member reads only the input quantized once before the group) and row
// counts that are multiples of the dispatch grain but the last, so that
// each member's rows split on the same boundaries as when run alone.
func fuseLinears(steps []step, bufs []plan.Buffer) {
	packed := func(st *step) bool { return st.Op == op.Linear && st.qw != nil && st.qw.packed() }
	span := func(id int) (int, int) { b := bufs[id]; return b.Offset, b.Offset + b.Rows*b.Cols }
	overlaps := func(a, b int) bool {
		a0, a1 := span(a)
		b0, b1 := span(b)
		return a0 < b1 && b0 < a1
	}
	for i := 0; i < len(steps); i++ {
		lead := &steps[i]
		if !packed(lead) || overlaps(lead.Out, lead.In[0]) {
			continue
		}
		n := 0
	grow:
		for j := i + 1; j < len(steps) && j-i < fuseLimit; j++ {
			st := &steps[j]
			if !packed(st) || st.In[0] != lead.In[0] || steps[j-1].qw.N%linearGrain != 0 {
				break
			}
			for k := i; k < j; k++ {
				if overlaps(st.Out, steps[k].Out) {
					break grow
				}
			}
			if overlaps(st.Out, lead.In[0]) {
				break
			}
			n = j - i
		}
		lead.fuse = n
		i += n
	}
}

// littleEndian reports whether this machine stores float32 as the file does.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// floats views little-endian float32 bytes as []float32 without copying
// when the bytes are aligned and the machine is little-endian, else
// decodes a copy.
func floats(b []byte) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]float32, n)
	for i := range out {
		u := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		out[i] = math.Float32frombits(u)
	}
	return out
}

// Manifest returns the artifact's manifest.
func (e *Engine) Manifest() plan.Manifest { return e.manifest }

// ARLens returns the AR lengths of the artifact's plans, ascending.
func (e *Engine) ARLens() []int {
	var n []int
	for _, p := range e.plans {
		n = append(n, p.p.Rows)
	}
	return n
}

// Close stops the worker pool and releases the artifact; sessions must
// not be used afterwards. It waits for a pass in progress to end.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	if e.mtp != nil {
		e.mtp.closed.Store(true)
	}
	e.passMu.Lock()
	defer e.passMu.Unlock()
	e.pool.close()
	if e.art == nil {
		return nil
	}
	return e.art.Close()
}

// HugePages reports whether the weights sit in memory advised for
// transparent huge pages (Options.HugePages, honoured on Linux).
func (e *Engine) HugePages() bool { return e.art != nil && e.art.HugePages() }

// HugeShare returns the share (0-1) of the artifact's bytes that the
// kernel maps with huge pages now, among the pages read so far: after a
// decode it tells whether the weights streamed through 2 MiB pages.
func (e *Engine) HugeShare() float64 {
	if e.art == nil || e.art.Size() <= 0 {
		return 0
	}
	return float64(e.art.HugeBytes()) / float64(e.art.Size())
}

// Blob returns a named blob of the artifact (such as the tokenizer), a view
// of the mapped file valid until Close.
func (e *Engine) Blob(name string) ([]byte, error) { return e.art.Blob(name) }

// PosComponents is the number of rotary position components a row of a
// pass carries in Pass.Positions: the most any RoPE step reads (3 for
// Qwen2-VL's M-RoPE; 1 for plain RoPE).
func (e *Engine) PosComponents() int { return max(e.posComps, 1) }

// checkKVMeans checks a 4-bit cache's centers, when it has them: one row
// per cache layer of the plan (layers), and n = G*E values in layer's.
func checkKVMeans(kc *plan.KVCache, layer, layers, n int) error {
	if len(kc.KMean) == 0 && len(kc.VMean) == 0 {
		return nil
	}
	if len(kc.KMean) != layers || len(kc.VMean) != layers {
		return fmt.Errorf("manifest.kv_cache: %d key and %d value center layers, the plan has %d", len(kc.KMean), len(kc.VMean), layers)
	}
	if layer < 0 || layer >= layers {
		return fmt.Errorf("manifest.kv_cache: layer %d is outside the plan's %d", layer, layers)
	}
	if len(kc.KMean[layer]) != n || len(kc.VMean[layer]) != n {
		return fmt.Errorf("manifest.kv_cache: layer %d has %d key and %d value centers for %d key/value head channels", layer, len(kc.KMean[layer]), len(kc.VMean[layer]), n)
	}
	return nil
}
