package engine

import (
	"github.com/aotlm/aotlm/internal/kernel"
)

// attnTask is one attention step split across the workers by (row, head)
// items; scores holds each worker's scratch row. In a batched pass (rows
// set) each row is a one-row pass of its own session: items are then
// row-major, row t's heads being items t*H..t*H+H-1.
type attnTask struct {
	a      *attnArgs
	rows   []attnArgs  // a batched pass's rows, else nil
	scores [][]float32 // [worker][ctx]
}

func (t *attnTask) run(w, lo, hi int) {
	if t.rows == nil {
		attendItems(t.a, lo, hi, t.scores[w])
		return
	}
	H := t.rows[0].H
	for i := lo; i < hi; {
		r := i / H
		end := min(hi, (r+1)*H)
		attendItems(&t.rows[r], i-r*H, end-r*H, t.scores[w])
		i = end
	}
}

// minParallelStore is the number of cache values written below which
// the store runs on the caller alone. It is low because a decode step's
// store is bound by latency, not arithmetic: each of its columns lands in
// a cache line of its own that the weights streamed since the last token
// have evicted, so two workers take the misses in half the time (Qwen3-0.6B
// shape, 1024 columns: 4% faster decode at 2 threads).
const minParallelStore = 512

// attend runs the attention step s.attn: the new rows go into the cache,
// then the workers share the (row, head) items. Caches are stored
// transposed, [C][Ctx] (storeTask), so that a row's scores and outputs
// are long contiguous dot products and updates.
func (s *Session) attend() {
	a := &s.attn
	s.storeTask.a, s.storeTask.rows = a, nil
	cols := a.G * a.E
	s.pool.do(&s.storeTask, cols, 16, cols*a.T >= minParallelStore, s.threads)
	s.attnTask.a, s.attnTask.rows = a, nil
	items := a.T * a.H
	cost := items * (a.pos + a.T) * a.E
	s.pool.do(&s.attnTask, items, 1, cost >= minParallelCost, s.threads)
}

// attendRows runs the attention step of a batched pass, whose rows
// s.attnRows are one-row passes over the caches of their own sessions.
func (s *Session) attendRows() {
	rows := s.attnRows
	a := &rows[0]
	cols := a.G * a.E
	s.storeTask.a, s.storeTask.rows = nil, rows
	s.pool.do(&s.storeTask, cols, 16, cols*len(rows) >= minParallelStore, s.threads)
	s.attnTask.a, s.attnTask.rows = nil, rows
	items, cost := len(rows)*a.H, 0
	for i := range rows {
		cost += a.H * (rows[i].pos + 1) * a.E
	}
	s.pool.do(&s.attnTask, items, 1, cost >= minParallelCost, s.threads)
}

// storeTask writes a pass's keys and values into a transposed float32,
// binary16 or uint8 cache, split across the workers by cache column:
// each column's T new positions are contiguous. A batched pass's rows
// each go into their own session's cache.
type storeTask struct {
	a    *attnArgs
	rows []attnArgs // a batched pass's rows, else nil
}

func (st *storeTask) run(_, lo, hi int) {
	if st.rows == nil {
		storeColumns(st.a, lo, hi)
		return
	}
	for i := range st.rows {
		storeColumns(&st.rows[i], lo, hi)
	}
}

// storeColumns stores cache columns [lo, hi) of a's T rows.
func storeColumns(a *attnArgs, lo, hi int) {
	kvc := a.G * a.E
	if a.Kh != nil && a.Ku == nil {
		at := lo*a.stride + a.pos
		kernel.ColumnsF16(a.Kh[at:], a.stride, a.k[lo:], kvc, a.T, hi-lo)
		kernel.ColumnsF16(a.Vh[at:], a.stride, a.v[lo:], kvc, a.T, hi-lo)
		return
	}
	for c := lo; c < hi; c++ {
		at := c*a.stride + a.pos
		switch {
		case a.Ku != nil:
			g := c / a.E
			sk, sv := headScale(a.ks, g), headScale(a.vs, g)
			kr, vr := a.Ku[at:at+a.T], a.Vu[at:at+a.T]
			for t := range kr {
				kr[t] = quantizeKV(a.k[t*kvc+c], sk)
				vr[t] = quantizeKV(a.v[t*kvc+c], sv)
			}
		default:
			kr, vr := a.K[at:at+a.T], a.V[at:at+a.T]
			for t := range kr {
				kr[t] = a.k[t*kvc+c]
				vr[t] = a.v[t*kvc+c]
			}
		}
	}
}

// attendItems computes items [lo, hi) of the H*T (head, row) items over
// the transposed cache, head-major so that a head's rows reuse its keys
// from cache. A row's scores are one update of its P scores by the E key
// columns (kernel.AxpyRows and its binary16 and uint8 forms), its outputs
// E dot products of length P (kernel.DotRows); a uint8 cache's scales
// multiply the scores and the outputs once, after the sums over codes.
func attendItems(a *attnArgs, lo, hi int, scores []float32) {
	E, H, stride := a.E, a.H, a.stride
	group := H / a.G
	for i := lo; i < hi; i++ {
		h, t := i/a.T, i%a.T
		if m := a.tile(i, hi, len(scores)); m > 1 {
			attendTile(a, i, m, scores)
			i += m - 1
			continue
		}
		last, first := a.pos+t, a.first(t) // slots [first, last]
		qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
		g := h / group
		from := g*E*stride + first
		sc := scores[:last+1-first]
		clear(sc)
		oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
		switch {
		case a.Ku != nil:
			kernel.AxpyRowsU8(sc, qh, a.Ku[from:], stride)
			kernel.Scale(sc, sc, a.scale*headScale(a.ks, g))
			inv := 1 / a.softmax(sc, t, first)
			kernel.DotRowsU8(oh, sc, a.Vu[from:], stride)
			kernel.Scale(oh, oh, inv*headScale(a.vs, g))
		case a.Kh != nil:
			kernel.AxpyRowsF16(sc, qh, a.Kh[from:], stride)
			kernel.Scale(sc, sc, a.scale)
			inv := 1 / a.softmax(sc, t, first)
			kernel.DotRowsF16(oh, sc, a.Vh[from:], stride)
			kernel.Scale(oh, oh, inv)
		default:
			kernel.AxpyRows(sc, qh, a.K[from:], stride)
			kernel.Scale(sc, sc, a.scale)
			inv := 1 / a.softmax(sc, t, first)
			kernel.DotRows(oh, sc, a.V[from:], stride)
			kernel.Scale(oh, oh, inv)
		}
	}
}

// attnTile is the most (head, row) items attendTile takes at once: the
// row kernels' largest multi-vector form.
const attnTile = 4

// tile returns how many items from i (below hi) attend together over a
// binary16 or uint8 cache: consecutive rows of one head, or in a one-row pass the
// consecutive heads that share a key/value head, whose first visible
// slots agree and whose scores fit in the scratch of have floats; 1 when
// the item goes alone.
func (a *attnArgs) tile(i, hi, have int) int {
	if a.Kh == nil && a.Ku == nil || !kernel.RowsMulti() {
		return 1 // float32 cache, or no multi-query kernels: one query a call
	}
	h, t := i/a.T, i%a.T
	group := a.H / a.G
	first := a.first(t)
	m := 1
	for m < attnTile && i+m < hi {
		h2, t2 := (i+m)/a.T, (i+m)%a.T
		switch {
		case a.T == 1 && h2/group != h/group:
			return m
		case a.T > 1 && h2 != h:
			return m
		}
		if a.first(t2) != first || (m+1)*(a.pos+t2+1-first) > have {
			return m
		}
		m++
	}
	return m
}

// attendTile computes the m items from i that tile chose, over the
// binary16 or uint8 cache: their scores in one kernel.AxpyRowsF16Multi
// (AxpyRowsU8Multi) pass over the key columns and their outputs in one
// DotRowsF16Multi (DotRowsU8Multi) pass over the value columns, each
// element of the cache widened once for the m. Each item's softmax runs
// over its own slots; its scores past them are zero in the value pass,
// so every output is bit-identical to the item attended alone.
func attendTile(a *attnArgs, i, m int, scores []float32) {
	E, H, stride := a.E, a.H, a.stride
	h0, t0 := i/a.T, i%a.T
	at := func(k int) (h, t int) {
		if a.T == 1 {
			return h0 + k, 0
		}
		return h0, t0 + k
	}
	_, tl := at(m - 1)
	first := a.first(t0)
	n := a.pos + tl + 1 - first // the last item's slots, the most
	sc := scores[:m*n]
	clear(sc)
	ld := E // one-row pass: consecutive heads, E apart in q and out
	if a.T > 1 {
		ld = H * E // one head's consecutive rows
	}
	base := t0*H*E + h0*E
	g := h0 / (H / a.G)
	from := g*E*stride + first
	scale, vscale := a.scale, float32(1)
	if a.Ku != nil {
		kernel.AxpyRowsU8Multi(sc, n, n, a.q[base:], ld, E, m, a.Ku[from:], stride)
		scale, vscale = a.scale*headScale(a.ks, g), headScale(a.vs, g)
	} else {
		kernel.AxpyRowsF16Multi(sc, n, n, a.q[base:], ld, E, m, a.Kh[from:], stride)
	}
	var inv [attnTile]float32
	for k := range m {
		_, t := at(k)
		nk := a.pos + t + 1 - first
		row := sc[k*n : k*n+nk]
		kernel.Scale(row, row, scale)
		inv[k] = 1 / a.softmax(row, t, first)
		clear(sc[k*n+nk : (k+1)*n])
	}
	out := a.out[base:]
	if a.Ku != nil {
		kernel.DotRowsU8Multi(out, ld, E, sc, n, n, m, a.Vu[from:], stride)
	} else {
		kernel.DotRowsF16Multi(out, ld, E, sc, n, n, m, a.Vh[from:], stride)
	}
	for k := range m {
		oh := out[k*ld : k*ld+E]
		kernel.Scale(oh, oh, inv[k]*vscale)
	}
}

// softmax sets the scores sc of row t over slots first.. to their
// exponentials less the largest and returns their sum. In a pass that is
// not a chain, the slots the row may not see (committed ones before its
// window, pass rows the mask hides) get MaskValue before the maximum and
// exactly 0 after, so they weigh nothing.
func (a *attnArgs) softmax(sc []float32, t, first int) float32 {
	if a.mask == nil {
		return expSub(sc, maxOf(sc))
	}
	p := a.rowPos[t]
	for j := range sc {
		if a.hiddenSlot(t, p, first+j) {
			sc[j] = MaskValue
		}
	}
	expSub(sc, maxOf(sc))
	var sum float32
	for j := range sc {
		if a.hiddenSlot(t, p, first+j) {
			sc[j] = 0
		}
		sum += sc[j]
	}
	return sum
}

// hiddenSlot reports whether row t at position p may not see cache slot q.
func (a *attnArgs) hiddenSlot(t, p, q int) bool {
	if q < a.pos {
		return a.window > 0 && q <= p-a.window
	}
	return a.hidden(t, q-a.pos)
}

// maxOf returns the largest of x (-MaxFloat32 when x is empty).
func maxOf(x []float32) float32 { return kernel.Max(x) }

// expSub sets x[i] = exp(x[i] - m) and returns their sum.
func expSub(x []float32, m float32) float32 { return kernel.ExpSub(x, m) }
