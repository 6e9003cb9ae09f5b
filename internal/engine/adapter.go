package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// AdapterLinear is the low-rank update of one linear step's weight W
// [Out, In]: the step's output rows gain Scale·(x·Aᵀ)·Bᵀ, A [Rank, In]
// and B [Out, Rank] row-major (an artifact's adapter blobs hold these),
// x being the step's input as the plan computes it (rotated, when a
// Hadamard step precedes the linear).
type AdapterLinear = plan.AdapterLinear

// AdapterStorage is how an adapter holds its matrices in memory.
type AdapterStorage uint8

const (
	// AdapterF16 holds them in binary16: half the memory and bandwidth
	// of float32, each value rounded to 11 significant bits.
	AdapterF16 AdapterStorage = iota
	// AdapterF32 holds them in float32, exactly.
	AdapterF32
	// AdapterQ8 holds them in 8 bits with one float32 scale per row of A
	// and per row of Bᵀ (per rank): a quarter of float32's memory and
	// bandwidth, each value within half a step (the row's largest
	// |value|/127) of its own.
	AdapterQ8
)

// String names the storage as the command line does: f16, f32 or q8.
func (s AdapterStorage) String() string {
	switch s {
	case AdapterF16:
		return "f16"
	case AdapterF32:
		return "f32"
	case AdapterQ8:
		return "q8"
	}
	return fmt.Sprintf("AdapterStorage(%d)", uint8(s))
}

// Adapter is a low-rank adapter the engine applies beside its linears at
// run time, without changing the stored weights: a session chooses one
// (Session.SetAdapter), and each row of a batched pass uses its own
// session's. Its matrices are immutable once made; a DoRA adapter's
// column norms are computed from the weights of the engine it is added
// to (AddAdapter), so it serves that engine only.
type Adapter struct {
	name    string
	storage AdapterStorage
	linears map[string]*adapterLinear
	bytes   int64
	// bound is the engine a DoRA adapter's norms were computed for.
	bound *Engine
}

// adapterLinear is an AdapterLinear in the layout the products read: A's
// rows and Bᵀ's rows (one per rank), in float32, binary16 or 8 bits.
type adapterLinear struct {
	rank, in, out int
	scale         float32
	a, bt         []float32 // [rank][in], [rank][out]
	ah, bth       []uint16  // the same in binary16 (AdapterF16)
	// aq and btq are the same in biased bytes (kernel.U8Bias), row r
	// standing for (byte-128)·as[r] and (byte-128)·bs[r] (AdapterQ8)
	aq, btq []uint8
	as, bs  []float32
	dora    *doraNorms // nil for plain LoRA
}

// doraNorms is what a DoRA linear needs beside its low-rank product:
// output row o of the linear is rescaled by mag[o] / ‖W_o + t·(BA)_o‖,
// t the whole scale applied. The squared norm is w2 + 2t·wd + t²·d2,
// so any scale costs one square root per row.
type doraNorms struct {
	mag        []float32
	w2, wd, d2 []float64 // ‖W_o‖², W_o·(BA)_o, ‖(BA)_o‖²
	// k is mag/‖W + scale·BA‖ at the adapter's own scale (a session
	// choosing it at 1).
	k []float32
}

// NewAdapter makes an adapter named name from its linears, holding its
// matrices as storage says.
func NewAdapter(name string, linears []AdapterLinear, storage AdapterStorage) (*Adapter, error) {
	if name == "" {
		return nil, errors.New("engine: an adapter needs a name")
	}
	if len(linears) == 0 {
		return nil, fmt.Errorf("engine: adapter %q has no linears", name)
	}
	if storage > AdapterQ8 {
		return nil, fmt.Errorf("engine: adapter %q: unknown storage %v", name, storage)
	}
	a := &Adapter{name: name, storage: storage, linears: map[string]*adapterLinear{}}
	for _, l := range linears {
		switch {
		case l.Rank <= 0 || l.In <= 0 || l.Out <= 0:
			return nil, fmt.Errorf("engine: adapter %q: %s: rank %d, in %d, out %d", name, l.Weight, l.Rank, l.In, l.Out)
		case len(l.A) != l.Rank*l.In || len(l.B) != l.Out*l.Rank:
			return nil, fmt.Errorf("engine: adapter %q: %s: A holds %d values and B %d, want %d and %d", name, l.Weight, len(l.A), len(l.B), l.Rank*l.In, l.Out*l.Rank)
		case l.Magnitude != nil && len(l.Magnitude) != l.Out:
			return nil, fmt.Errorf("engine: adapter %q: %s: DoRA magnitude holds %d values, want %d", name, l.Weight, len(l.Magnitude), l.Out)
		case math.IsNaN(float64(l.Scale)) || math.IsInf(float64(l.Scale), 0):
			return nil, fmt.Errorf("engine: adapter %q: %s: scale %v", name, l.Weight, l.Scale)
		case a.linears[l.Weight] != nil:
			return nil, fmt.Errorf("engine: adapter %q: %s appears twice", name, l.Weight)
		}
		al := &adapterLinear{rank: l.Rank, in: l.In, out: l.Out, scale: l.Scale, a: slices.Clone(l.A), bt: make([]float32, l.Rank*l.Out)}
		for o := 0; o < l.Out; o++ {
			for r := 0; r < l.Rank; r++ {
				al.bt[r*l.Out+o] = l.B[o*l.Rank+r]
			}
		}
		for _, vs := range [][]float32{al.a, al.bt, l.Magnitude} {
			for i, v := range vs {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return nil, fmt.Errorf("engine: adapter %q: %s holds %v at index %d", name, l.Weight, v, i)
				}
			}
		}
		if l.Magnitude != nil {
			al.dora = &doraNorms{mag: slices.Clone(l.Magnitude)}
			a.bytes += 4 * int64(l.Out)
		}
		n := int64(len(al.a) + len(al.bt))
		switch storage {
		case AdapterF16:
			al.ah, al.bth = toHalf(al.a), toHalf(al.bt)
			al.a, al.bt = nil, nil
			a.bytes += 2 * n
		case AdapterQ8:
			al.aq, al.as = toQ8Rows(al.a, l.Rank)
			al.btq, al.bs = toQ8Rows(al.bt, l.Rank)
			al.a, al.bt = nil, nil
			a.bytes += n + 4*2*int64(l.Rank)
		default:
			a.bytes += 4 * n
		}
		a.linears[l.Weight] = al
	}
	return a, nil
}

func toHalf(v []float32) []uint16 {
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = tensor.F32ToF16(x)
	}
	return h
}

// toQ8Rows stores v, rows rows, in biased bytes with one scale per row:
// the row's largest |value|/127, each value rounded to the nearest step.
func toQ8Rows(v []float32, rows int) ([]uint8, []float32) {
	q, sc := make([]uint8, len(v)), make([]float32, rows)
	n := len(v) / rows
	for r := range rows {
		row := v[r*n : (r+1)*n]
		var m float32
		for _, x := range row {
			m = max(m, float32(math.Abs(float64(x))))
		}
		if m == 0 {
			for i := range row {
				q[r*n+i] = kernel.U8Bias
			}
			continue
		}
		s := m / 127
		sc[r] = s
		for i, x := range row {
			c := math.Round(float64(x / s))
			q[r*n+i] = uint8(int32(max(-127, min(127, c))) + kernel.U8Bias)
		}
	}
	return q, sc
}

// matrices returns the linear's A [rank][in] and Bᵀ [rank][out] as the
// products read them, in float32.
func (l *adapterLinear) matrices() (a, bt []float32) {
	switch {
	case l.ah != nil:
		a, bt = make([]float32, len(l.ah)), make([]float32, len(l.bth))
		for i, h := range l.ah {
			a[i] = tensor.F16ToF32(h)
		}
		for i, h := range l.bth {
			bt[i] = tensor.F16ToF32(h)
		}
	case l.aq != nil:
		a, bt = fromQ8Rows(l.aq, l.as), fromQ8Rows(l.btq, l.bs)
	default:
		a, bt = l.a, l.bt
	}
	return a, bt
}

func fromQ8Rows(q []uint8, sc []float32) []float32 {
	v := make([]float32, len(q))
	n := len(q) / len(sc)
	for i, b := range q {
		v[i] = float32(int32(b)-kernel.U8Bias) * sc[i/n]
	}
	return v
}

// Storage returns how the adapter holds its matrices.
func (a *Adapter) Storage() AdapterStorage { return a.storage }

// DoRA reports whether the adapter rescales its linears' outputs by
// DoRA magnitudes.
func (a *Adapter) DoRA() bool {
	for _, l := range a.linears {
		if l.dora != nil {
			return true
		}
	}
	return false
}

// Name returns the adapter's name.
func (a *Adapter) Name() string { return a.name }

// Bytes returns the memory the adapter's matrices take.
func (a *Adapter) Bytes() int64 { return a.bytes }

// Linears returns the weight names the adapter changes, sorted.
func (a *Adapter) Linears() []string {
	names := make([]string, 0, len(a.linears))
	for n := range a.linears {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// adapters is an engine's set of loaded adapters.
type adapters struct {
	mu  sync.Mutex
	set map[string]*Adapter
}

// AddAdapter checks a against the engine's linear steps (each weight it
// names must be a linear's, of its shape) and makes it available under
// its name, replacing an adapter of that name (sessions that chose the
// old one keep it until they choose again).
func (e *Engine) AddAdapter(a *Adapter) error {
	if a == nil {
		return errors.New("engine: nil adapter")
	}
	shapes := map[string][2]int{} // weight -> out, in
	for _, p := range e.plans {
		for _, st := range p.p.Steps {
			switch st.Op {
			case op.ZeroCols, op.GatherCols:
				return fmt.Errorf("engine: adapter %q: the artifact computes some linears in parts (%s steps, outlier channels): adapters apply only to whole linears; merge it when compiling instead", a.name, st.Op)
			case op.Linear:
				b := p.p.Buffers
				shapes[st.Weights[0]] = [2]int{b[st.Out].Cols, b[st.In[0]].Cols}
			}
		}
	}
	for _, w := range a.Linears() {
		l := a.linears[w]
		sh, ok := shapes[w]
		if !ok {
			return fmt.Errorf("engine: adapter %q: %s is not the weight of a linear step of this model", a.name, w)
		}
		if sh != [2]int{l.out, l.in} {
			return fmt.Errorf("engine: adapter %q: %s is %dx%d, the model's linear is %dx%d", a.name, w, l.out, l.in, sh[0], sh[1])
		}
	}
	if a.DoRA() {
		if a.bound != nil && a.bound != e {
			return fmt.Errorf("engine: adapter %q: a DoRA adapter's norms were computed from another engine's weights", a.name)
		}
		if a.bound == nil {
			if err := e.doraNorms(a); err != nil {
				return err
			}
			a.bound = e
		}
	}
	e.adapters.mu.Lock()
	defer e.adapters.mu.Unlock()
	if e.adapters.set == nil {
		e.adapters.set = map[string]*Adapter{}
	}
	e.adapters.set[a.name] = a
	return nil
}

// doraNorms computes the row norms of a's DoRA linears from the
// engine's weights (dequantized) and the adapter's matrices as stored.
func (e *Engine) doraNorms(a *Adapter) error {
	for _, w := range a.Linears() {
		l := a.linears[w]
		if l.dora == nil {
			continue
		}
		row := make([]float32, l.in)
		read := func(o int) {}
		if f, ok := e.weights[w]; ok && len(f) == l.out*l.in {
			read = func(o int) { copy(row, f[o*l.in:(o+1)*l.in]) }
		} else if q := e.qweights[w]; q != nil && q.rowOf != nil && q.N == l.out && q.K == l.in {
			read = func(o int) { q.rowOf(row, o) }
		} else {
			return fmt.Errorf("engine: adapter %q: the weight %s cannot be read back by rows for DoRA's norms", a.name, w)
		}
		am, bt := l.matrices()
		d := l.dora
		d.w2, d.wd, d.d2 = make([]float64, l.out), make([]float64, l.out), make([]float64, l.out)
		ba := make([]float64, l.in)
		for o := 0; o < l.out; o++ {
			read(o)
			clear(ba)
			for r := 0; r < l.rank; r++ {
				b := float64(bt[r*l.out+o])
				if b == 0 {
					continue
				}
				for i, v := range am[r*l.in : (r+1)*l.in] {
					ba[i] += b * float64(v)
				}
			}
			var w2, wd, d2 float64
			for i, v := range row {
				w2 += float64(v) * float64(v)
				wd += float64(v) * ba[i]
				d2 += ba[i] * ba[i]
			}
			d.w2[o], d.wd[o], d.d2[o] = w2, wd, d2
		}
		d.k = make([]float32, l.out)
		for o := range d.k {
			k, err := d.factor(o, float64(l.scale))
			if err != nil {
				return fmt.Errorf("engine: adapter %q: %s: %w", a.name, w, err)
			}
			d.k[o] = k
		}
	}
	return nil
}

// factor returns mag[o]/‖W_o + t·(BA)_o‖; a zero norm is an error.
func (d *doraNorms) factor(o int, t float64) (float32, error) {
	n2 := d.w2[o] + 2*t*d.wd[o] + t*t*d.d2[o]
	if !(n2 > 0) {
		return 0, fmt.Errorf("DoRA: row %d of the adapted weight has norm 0", o)
	}
	return float32(float64(d.mag[o]) / math.Sqrt(n2)), nil
}

// RemoveAdapter drops the named adapter; sessions that chose it keep it
// until they choose again. It reports whether there was one.
func (e *Engine) RemoveAdapter(name string) bool {
	e.adapters.mu.Lock()
	defer e.adapters.mu.Unlock()
	_, ok := e.adapters.set[name]
	delete(e.adapters.set, name)
	return ok
}

// LookupAdapter returns the named adapter, or nil.
func (e *Engine) LookupAdapter(name string) *Adapter {
	e.adapters.mu.Lock()
	defer e.adapters.mu.Unlock()
	return e.adapters.set[name]
}

// Adapters returns the names of the loaded adapters, sorted.
func (e *Engine) Adapters() []string {
	e.adapters.mu.Lock()
	defer e.adapters.mu.Unlock()
	names := make([]string, 0, len(e.adapters.set))
	for n := range e.adapters.set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SetAdapter makes the session's passes apply a (nil: none) at scale
// times its own scale. The cache holds keys and values computed with
// the previous choice: a caller that changes it rewinds the positions it
// will compute again (a changed adapter changes every later position).
func (s *Session) SetAdapter(a *Adapter, scale float32) error {
	if a != nil && (math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0)) {
		return fmt.Errorf("engine: adapter %q: scale %v", a.name, scale)
	}
	if a != nil && s.e.LookupAdapter(a.name) != a {
		return fmt.Errorf("engine: adapter %q is not loaded in this engine", a.name)
	}
	s.adapter, s.adapterScale = a, scale
	return nil
}

// Adapter returns the session's adapter (nil: none) and its scale.
func (s *Session) Adapter() (*Adapter, float32) { return s.adapter, s.adapterScale }

// prepareAdapters readies the low-rank products of the chosen adapters
// for the linear steps steps[i..i+n-1], which read x [T, K] (the
// session's adapter for every row, or in a batched pass each row's
// session's): it computes the rank products x·Aᵀ of every row and
// member, on this thread or, for a long pass, split across the workers,
// and returns the task whose addColumns the linears' jobs call on the
// output columns they compute; nil when no row applies an adapter.
func (s *Session) prepareAdapters(steps []step, i, n int, x []float32, T, K int, buf func(id int) ([]float32, int, int)) *adapterTask {
	if s.batch == nil && s.adapter == nil {
		return nil
	}
	a := &s.loraTask
	a.reset(x, T, K)
	work := 0
	for m := 0; m < n; m++ {
		st := &steps[i+m]
		s.bufRows[st.Out] = T // as the linear's run sets it
		o, _, N := buf(st.Out)
		a.out[m], a.n[m], a.bias[m] = o, N, st.b
		w := st.Weights[0]
		for t := 0; t < T; t++ {
			ad, scale := s.adapter, s.adapterScale
			if s.batch != nil {
				ad, scale = s.batch[t].adapter, s.batch[t].adapterScale
			}
			if ad == nil {
				continue
			}
			l := ad.linears[w]
			if l == nil {
				continue
			}
			tm := t*maxFuse + m
			a.lin[tm], a.scale[tm], a.uOff[tm] = l, scale*l.scale, len(a.u)
			for r := 0; r < l.rank; r++ {
				a.items = append(a.items, int32(tm)<<16|int32(r))
				a.u = append(a.u, 0)
			}
			work += l.rank * K
		}
	}
	if len(a.items) == 0 {
		return nil
	}
	s.pool.do(a, len(a.items), 1, work >= minAdapterSplit, s.threads)
	return a
}

// minAdapterSplit is the least multiply-adds of the rank products
// split across the workers: below it (a decode step's) one thread
// computes them sooner than a dispatch would.
var minAdapterSplit = 1 << 20

// adapterTask is the adapters' work on a run of linears: run computes
// u, one item per (row, member, rank); addColumns adds u·Bᵀ to the
// columns of a member's output a linear job computed.
type adapterTask struct {
	x    []float32
	T, K int
	out  [maxFuse][]float32 // each member's output rows
	n    [maxFuse]int       // its columns
	bias [maxFuse][]float32 // its bias (nil: none), which DoRA leaves as is
	// lin, scale and uOff are by row*maxFuse + member: the pair (nil:
	// none), its whole scale and where its rank products start in u.
	lin   []*adapterLinear
	scale []float32
	uOff  []int
	u     []float32
	items []int32 // (row*maxFuse + member) << 16 | rank index
}

// reset prepares the task for a pass of T rows of x [T, K].
func (a *adapterTask) reset(x []float32, T, K int) {
	a.x, a.T, a.K = x, T, K
	if len(a.lin) < T*maxFuse {
		a.lin, a.scale, a.uOff = make([]*adapterLinear, T*maxFuse), make([]float32, T*maxFuse), make([]int, T*maxFuse)
	}
	clear(a.lin[:T*maxFuse])
	a.u, a.items = a.u[:0], a.items[:0]
}

func (a *adapterTask) run(_, lo, hi int) {
	for _, it := range a.items[lo:hi] {
		tm, r := int(it>>16), int(it&0xffff)
		l, t := a.lin[tm], tm/maxFuse
		x := a.x[t*a.K : (t+1)*a.K]
		if l.aq != nil {
			// Bᵀ's row scale folds into the coefficient, so that
			// addColumns adds all ranks in one pass over the bytes
			u := a.u[a.uOff[tm]+r : a.uOff[tm]+r+1]
			kernel.DotRowsU8(u, x, l.aq[r*l.in:(r+1)*l.in], l.in)
			u[0] *= a.scale[tm] * l.as[r] * l.bs[r]
			continue
		}
		a.u[a.uOff[tm]+r] = a.scale[tm] * l.dotA(r, x)
	}
}

// addColumns adds u·Bᵀ to columns [c0, c1) of member m's output rows.
func (a *adapterTask) addColumns(m, c0, c1 int) {
	N := a.n[m]
	for t := 0; t < a.T; t++ {
		tm := t*maxFuse + m
		l := a.lin[tm]
		if l == nil {
			continue
		}
		y := a.out[m][t*N+c0 : t*N+c1]
		u := a.u[a.uOff[tm] : a.uOff[tm]+l.rank]
		if l.btq != nil {
			kernel.AxpyRowsU8(y, u, l.btq[c0:], l.out)
		} else {
			for r, c := range u {
				l.axpyB(y, c, r, c0)
			}
		}
		if l.dora != nil {
			l.dora.rescale(y, a.bias[m], c0, a.scale[tm], l.scale)
		}
	}
}

// rescale multiplies columns [c0, c0+len(y)) of a DoRA linear's output
// row y, bias b (nil: none) left out, by mag/‖W + t·BA‖ at the whole
// scale t (own, the adapter's: the precomputed factors).
func (d *doraNorms) rescale(y, b []float32, c0 int, t, own float32) {
	for j := range y {
		o := c0 + j
		k := d.k[o]
		if t != own {
			// a zero norm at this scale leaves the row unscaled
			k, _ = d.factor(o, float64(t))
			if k == 0 {
				k = 1
			}
		}
		if b != nil {
			y[j] = k*(y[j]-b[o]) + b[o]
		} else {
			y[j] *= k
		}
	}
}

// dotA returns x·A[r].
func (l *adapterLinear) dotA(r int, x []float32) float32 {
	if l.ah != nil {
		return kernel.DotF16(x, l.ah[r*l.in:(r+1)*l.in])
	}
	return kernel.Dot(x, l.a[r*l.in:(r+1)*l.in])
}

// axpyB adds c·Bᵀ[r][c0:c0+len(y)] to y.
func (l *adapterLinear) axpyB(y []float32, c float32, r, c0 int) {
	if l.bth != nil {
		kernel.AxpyF16(y, c, l.bth[r*l.out+c0:r*l.out+c0+len(y)])
		return
	}
	kernel.Axpy(y, c, l.bt[r*l.out+c0:r*l.out+c0+len(y)])
}

// applyReference adds scale·l.scale·(x·Aᵀ)·Bᵀ to y in plain float64
// loops: the definition adapterTask's kernels are tested against.
func (l *adapterLinear) applyReference(y, x []float32, scale float32) {
	a, bt := l.matrices()
	for o := range y {
		var d float64
		for r := 0; r < l.rank; r++ {
			var u float64
			for i, xv := range x {
				u += float64(xv) * float64(a[r*l.in+i])
			}
			d += u * float64(bt[r*l.out+o])
		}
		y[o] += float32(float64(scale) * float64(l.scale) * d)
	}
}

// loadCarriedAdapters loads the adapters the artifact carries
// (Manifest.Adapters), in float32.
func (e *Engine) loadCarriedAdapters() error {
	for i, r := range e.manifest.Adapters {
		b, err := e.Blob(r.Blob)
		if err != nil {
			return fmt.Errorf("engine: manifest.adapters[%d] (%s): %w", i, r.Name, err)
		}
		ls, err := plan.DecodeAdapter(b)
		if err != nil {
			return fmt.Errorf("engine: manifest.adapters[%d] (%s): %w", i, r.Name, err)
		}
		a, err := NewAdapter(r.Name, ls, AdapterF32)
		if err == nil {
			err = e.AddAdapter(a)
		}
		if err != nil {
			return fmt.Errorf("engine: manifest.adapters[%d]: %w", i, err)
		}
	}
	return nil
}
