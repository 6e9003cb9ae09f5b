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
// and B [Out, Rank] row-major (an artifact's adapter blobs hold these).
type AdapterLinear = plan.AdapterLinear

// Adapter is a low-rank adapter the engine applies beside its linears at
// run time, without changing the stored weights: a session chooses one
// (Session.SetAdapter), and each row of a batched pass uses its own
// session's. It is immutable once made.
type Adapter struct {
	name    string
	half    bool
	linears map[string]*adapterLinear
	bytes   int64
}

// adapterLinear is an AdapterLinear in the layout the products read: A's
// rows and Bᵀ's rows (one per rank), in float32 or binary16.
type adapterLinear struct {
	rank, in, out int
	scale         float32
	a, bt         []float32 // [rank][in], [rank][out]
	ah, bth       []uint16  // the same in binary16 (half adapters)
}

// NewAdapter makes an adapter named name from its linears, stored in
// binary16 when half (half the memory and bandwidth of float32, the
// values rounded), else float32.
func NewAdapter(name string, linears []AdapterLinear, half bool) (*Adapter, error) {
	if name == "" {
		return nil, errors.New("engine: an adapter needs a name")
	}
	if len(linears) == 0 {
		return nil, fmt.Errorf("engine: adapter %q has no linears", name)
	}
	a := &Adapter{name: name, half: half, linears: map[string]*adapterLinear{}}
	for _, l := range linears {
		switch {
		case l.Rank <= 0 || l.In <= 0 || l.Out <= 0:
			return nil, fmt.Errorf("engine: adapter %q: %s: rank %d, in %d, out %d", name, l.Weight, l.Rank, l.In, l.Out)
		case len(l.A) != l.Rank*l.In || len(l.B) != l.Out*l.Rank:
			return nil, fmt.Errorf("engine: adapter %q: %s: A holds %d values and B %d, want %d and %d", name, l.Weight, len(l.A), len(l.B), l.Rank*l.In, l.Out*l.Rank)
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
		for _, vs := range [][]float32{al.a, al.bt} {
			for i, v := range vs {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return nil, fmt.Errorf("engine: adapter %q: %s holds %v at index %d", name, l.Weight, v, i)
				}
			}
		}
		n := int64(len(al.a) + len(al.bt))
		if half {
			al.ah, al.bth = toHalf(al.a), toHalf(al.bt)
			al.a, al.bt = nil, nil
			a.bytes += 2 * n
		} else {
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
			case op.ZeroCols, op.GatherCols, op.Hadamard:
				return fmt.Errorf("engine: adapter %q: the artifact computes some linears in parts or on rotated inputs (%s steps): adapters apply only to plain linears; merge it when compiling instead", a.name, st.Op)
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
	e.adapters.mu.Lock()
	defer e.adapters.mu.Unlock()
	if e.adapters.set == nil {
		e.adapters.set = map[string]*Adapter{}
	}
	e.adapters.set[a.name] = a
	return nil
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
		a.out[m], a.n[m] = o, N
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
		a.u[a.uOff[tm]+r] = a.scale[tm] * l.dotA(r, a.x[t*a.K:(t+1)*a.K])
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
		for r, c := range a.u[a.uOff[tm] : a.uOff[tm]+l.rank] {
			l.axpyB(y, c, r, c0)
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
	a, bt := l.a, l.bt
	if l.ah != nil {
		a, bt = make([]float32, len(l.ah)), make([]float32, len(l.bth))
		for i, h := range l.ah {
			a[i] = tensor.F16ToF32(h)
		}
		for i, h := range l.bth {
			bt[i] = tensor.F16ToF32(h)
		}
	}
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
		a, err := NewAdapter(r.Name, ls, false)
		if err == nil {
			err = e.AddAdapter(a)
		}
		if err != nil {
			return fmt.Errorf("engine: manifest.adapters[%d]: %w", i, err)
		}
	}
	return nil
}
