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
	// tiled: a's items are those of the tiled attention (attendFlash),
	// flash each worker's scratch for it, grown on first use.
	tiled bool
	flash []flashScratch
	// split: a's items are those of the split attention of a decode row
	// (attendSplitItems), its parts in parts.
	split bool
	parts splitScratch
}

func (t *attnTask) run(w, lo, hi int) {
	if t.tiled {
		attendFlash(t.a, lo, hi, &t.flash[w])
		return
	}
	if t.split {
		attendSplitItems(t.a, &t.parts, lo, hi, t.parts.sc[w])
		return
	}
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
// the store runs on the caller alone: a decode step's store is a row of E
// values per key/value head, a few cache lines each, not worth a dispatch.
const minParallelStore = 1 << 14

// attend runs the attention step s.attn: the new rows go into the cache,
// then the workers share the (row, head) items. A layer's cache is
// head-major, [G][slots][E] (storeTask), so that the keys and values a
// head's row attends to are one contiguous run of slots: its scores are
// dot products with the key rows, its outputs one update by the value
// rows, both streaming the run once.
func (s *Session) attend() {
	a := &s.attn
	if a.k != nil { // nil: a shared_attention step reads a slot written already
		s.storeTask.a, s.storeTask.rows = a, nil
		stores := a.T * a.G
		s.pool.do(&s.storeTask, stores, 1, stores*a.E >= minParallelStore, s.threads)
	}
	s.attnTask.a, s.attnTask.rows = a, nil
	if a.useFlash() {
		if len(s.attnTask.flash) < s.threads {
			s.attnTask.flash = make([]flashScratch, s.threads)
		}
		s.attnTask.tiled = true
		s.pool.do(&s.attnTask, a.flashItems(), 1, a.flashCost() >= minParallelCost, s.threads)
		s.attnTask.tiled = false
		return
	}
	if a.useSplit() {
		s.attendSplit()
		return
	}
	items := a.T * a.H
	cost := items * (a.pos + a.T) * a.E
	s.pool.doParts(&s.attnTask, items, 1, cost >= minParallelCost, s.threads, attnParts(a.T, a.H, a.G, s.threads))
}

// attendSplit runs the split attention of the decode row s.attn: its
// (key/value head, chunk) items over the workers, then the merge of each
// head's chunks on the caller.
func (s *Session) attendSplit() {
	a := &s.attn
	nc := a.splitChunks()
	s.attnTask.parts.grow(a.H, nc, a.E, s.threads)
	s.attnTask.split = true
	s.pool.do(&s.attnTask, a.G*nc, 1, true, s.threads)
	s.attnTask.split = false
	mergeSplit(a, &s.attnTask.parts)
}

// attnParts is the parts per thread of a pass's attention items. A
// one-row pass's items are its heads, and the heads that share a
// key/value head attend together in one pass over its rows (attendTile)
// only when one claim of the pool holds them: so a part holds a group at
// least where the heads allow. SmolLM2-135M's 9 heads over 3 key/value
// heads were claimed one head at a time at 2 threads (4 parts a thread
// of 9 items), every head reading its keys and values alone; in one part
// a thread, 4 and 5 heads, they read them 4 times a layer instead of 9,
// and attention at positions 448-512 took 1/1.17-1/1.19 of the time
// (clock around the step, two runs of 16 alternating blocks of 64
// tokens; Intel Xeon). Qwen3-0.6B's and Llama-3.2-1B's parts already
// held whole groups (2 and 4 heads).
func attnParts(T, H, G, threads int) int {
	if T > 1 || threads <= 1 {
		return partsPerThread
	}
	return min(max(H/(threads*(H/G)), 1), partsPerThread)
}

// attendRows runs the attention step of a batched pass, whose rows
// s.attnRows are one-row passes over the caches of their own sessions.
func (s *Session) attendRows() {
	rows := s.attnRows
	a := &rows[0]
	if a.k != nil { // nil: a shared_attention step
		s.storeTask.a, s.storeTask.rows = nil, rows
		s.pool.do(&s.storeTask, a.G, 1, a.G*a.E*len(rows) >= minParallelStore, s.threads)
	}
	s.attnTask.a, s.attnTask.rows = nil, rows
	items, cost := len(rows)*a.H, 0
	for i := range rows {
		cost += a.H * (rows[i].pos + 1) * a.E
	}
	s.pool.do(&s.attnTask, items, 1, cost >= minParallelCost, s.threads)
}

// storeTask writes a pass's keys and values into a head-major float32,
// binary16 or uint8 cache, split across the workers by (row, key/value
// head) items, item i being row i/G, head i%G: each item is a row of E
// values in the head's run of slots. A batched pass's rows (one each)
// go into their own sessions' caches, split by head.
type storeTask struct {
	a    *attnArgs
	rows []attnArgs // a batched pass's rows, else nil
}

func (st *storeTask) run(_, lo, hi int) {
	if st.rows == nil {
		storeRows(st.a, lo, hi)
		return
	}
	for i := range st.rows {
		storeRows(&st.rows[i], lo, hi)
	}
}

// storeRows stores (row, head) items [lo, hi) of a's T*G: row t's
// values of key/value head g go into slot pos+t of head g,
// [(g*stride+pos+t)*E, +E), in a ring layer into its slot (pos+t) mod
// ring and the mirror ring slots after it.
func storeRows(a *attnArgs, lo, hi int) {
	for i := lo; i < hi; i++ {
		slot := a.slotAt(a.pos + i/a.G)
		storeRow(a, i, slot)
		if a.ring > 0 {
			storeRow(a, i, slot+a.ring)
		}
	}
}

// storeRow stores item i of a's T*G (row i/G, key/value head i%G) into
// cache slot slot of its head.
func storeRow(a *attnArgs, i, slot int) {
	E, G := a.E, a.G
	t, g := i/G, i%G
	src := t*G*E + g*E
	k, v := a.k[src:src+E], a.v[src:src+E]
	at := (g*a.stride + slot) * E
	switch {
	case a.Kq != nil:
		R := kernel.KVQ4RowBytes(E)
		at = (g*a.stride + slot) * R
		storeQ4(a.Kq[at:at+R], k, headCenter(a.kmu, g, E), a.rotK)
		storeQ4(a.Vq[at:at+R], v, headCenter(a.vmu, g, E), true)
	case a.Ku != nil:
		sk, sv := headScale(a.ks, g), headScale(a.vs, g)
		kr, vr := a.Ku[at:at+E], a.Vu[at:at+E]
		for j := range kr {
			kr[j] = quantizeKV(k[j], sk)
			vr[j] = quantizeKV(v[j], sv)
		}
	case a.Kh != nil:
		kernel.StoreF16(a.Kh[at:at+E], k)
		kernel.StoreF16(a.Vh[at:at+E], v)
	default:
		copy(a.K[at:at+E], k)
		copy(a.V[at:at+E], v)
	}
}

// attendItems computes items [lo, hi) of the H*T (head, row) items over
// the head-major cache, head-major so that a head's rows reuse its keys
// from cache. A row's scores are P dot products of its query with the key
// rows of the slots it sees (kernel.DotRows and its binary16 and uint8
// forms), its outputs one update by the P value rows (kernel.AxpyRows); a
// uint8 cache's scales multiply the scores and the outputs once, after
// the sums over codes.
func attendItems(a *attnArgs, lo, hi int, scores []float32) {
	E, H, stride := a.E, a.H, a.stride
	group := H / a.G
	for i := lo; i < hi; i++ {
		h, t := i/a.T, i%a.T
		if m := a.tile(i, hi, len(scores)); m > 1 {
			attendTile(a, i, m, hi, scores)
			i += m - 1
			continue
		}
		last, first := a.pos+t, a.first(t) // slots [first, last]
		qh := a.q[t*H*E+h*E : t*H*E+(h+1)*E]
		g := h / group
		from := (g*stride + a.slotAt(first)) * E
		sc := scores[:last+1-first]
		oh := a.out[t*H*E+h*E : t*H*E+(h+1)*E]
		clear(oh)
		switch {
		case a.Kq != nil:
			a.attendQ4(oh, qh, sc, g*stride+a.slotAt(first), t, first)
		case a.Ku != nil:
			a.keyScores(sc, qh, E, 1, len(sc), from)
			kernel.Scale(sc, sc, a.scale*headScale(a.ks, g))
			inv := 1 / a.softmax(sc, t, first)
			kernel.AxpyRowsU8(oh, sc, a.Vu[from:], E)
			kernel.Scale(oh, oh, inv*headScale(a.vs, g))
		case a.Kh != nil:
			a.keyScores(sc, qh, E, 1, len(sc), from)
			kernel.Scale(sc, sc, a.scale)
			inv := 1 / a.softmax(sc, t, first)
			kernel.AxpyRowsF16(oh, sc, a.Vh[from:], E)
			kernel.Scale(oh, oh, inv)
		default:
			if a.T == 1 { // keyScores asks for the values as it goes for the other caches
				kernel.PrefetchRun(a.V, from, len(sc)*E)
			}
			kernel.DotRows(sc, qh, a.K[from:], E)
			kernel.Scale(sc, sc, a.scale)
			inv := 1 / a.softmax(sc, t, first)
			kernel.AxpyRows(oh, sc, a.V[from:], E)
			kernel.Scale(oh, oh, inv)
		}
	}
}

// kvq4Stack is the head dimension up to which the 4-bit cache's rotated
// rows are kept on the stack.
const kvq4Stack = 256

// headScratch returns E floats of buf, or new ones when E is larger.
func headScratch(buf *[kvq4Stack]float32, E int) []float32 {
	if E <= kvq4Stack {
		return buf[:E]
	}
	return make([]float32, E)
}

// headCenter returns key/value head g's E values of the centers mu, or
// nil when there are none.
func headCenter(mu []float32, g, E int) []float32 {
	if mu == nil {
		return nil
	}
	return mu[g*E : (g+1)*E]
}

// storeQ4 stores the E values x as the 4-bit row dst, less the center mu
// (when not nil) and rotated (kernel.RotateHead) when rotate is set, on a
// copy.
func storeQ4(dst []uint8, x, mu []float32, rotate bool) {
	if !rotate && mu == nil {
		kernel.QuantizeKVQ4(dst, x)
		return
	}
	var buf [kvq4Stack]float32
	y := headScratch(&buf, len(x))
	copy(y, x)
	if mu != nil {
		kernel.Axpy(y, -1, mu)
	}
	if rotate {
		kernel.RotateHead(y)
	}
	kernel.QuantizeKVQ4(dst, y)
}

// attendQ4 sets oh to the attention output of the query qh over the
// len(sc) rows of a 4-bit cache from row row (of its layer's rows) of row
// t, whose slots start at first: the query is rotated as the keys were
// (when they were, rotK), so its scores are those of the unrotated
// values; the softmax-weighted sum of the rotated value rows is rotated
// back, and the values' center added (a.vmu). oh starts at zero.
func (a *attnArgs) attendQ4(oh, qh, sc []float32, row, t, first int) {
	E := a.E
	R := kernel.KVQ4RowBytes(E)
	var buf [kvq4Stack]float32
	qr := qh
	if a.rotK {
		qr = headScratch(&buf, E)
		copy(qr, qh)
		kernel.RotateHead(qr)
	}
	for j := range sc {
		at := (row + j) * R
		sc[j] = kernel.DotKVQ4(qr, a.Kq[at:at+R])
	}
	kernel.Scale(sc, sc, a.scale)
	inv := 1 / a.softmax(sc, t, first)
	for j, p := range sc {
		if p != 0 {
			at := (row + j) * R
			kernel.AxpyKVQ4(oh, p, a.Vq[at:at+R])
		}
	}
	kernel.RotateHead(oh)
	kernel.Scale(oh, oh, inv)
	if a.vmu != nil {
		g := row / a.stride
		kernel.Add(oh, oh, a.vmu[g*E:(g+1)*E])
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
// binary16 or uint8 cache: their scores in one kernel.DotRowsF16Multi
// (DotRowsU8Multi) pass over the key rows and their outputs in one
// AxpyRowsF16Multi (AxpyRowsU8Multi) pass over the value rows, each
// element of the cache widened once for the m. Each item's softmax runs
// over its own slots; its scores past them are zero in the value pass,
// so every output is bit-identical to the item attended alone.
//
// In a one-row pass whose claim holds more items after the tile (the
// next key/value head's), the value pass asks for that head's key rows
// as it reads (kernel.AxpyRowsF16MultiAhead): the values arrived during
// the key pass, the next keys then arrive during this value pass. One
// token's attention over 28 binary16 layers of the Qwen3-0.6B shape at
// 3,968 positions from memory, one thread: median 45.8 ms of CPU time
// against 51.0 without (9 runs each, alternating, spread 41-60 ms on a
// busy AMD EPYC); the sums are the same bits.
func attendTile(a *attnArgs, i, m, hi int, scores []float32) {
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
	ld := E // one-row pass: consecutive heads, E apart in q and out
	if a.T > 1 {
		ld = H * E // one head's consecutive rows
	}
	base := t0*H*E + h0*E
	g := h0 / (H / a.G)
	from := (g*stride + a.slotAt(first)) * E
	scale, vscale := a.scale, float32(1)
	a.keyScores(sc, a.q[base:], ld, m, n, from)
	if a.Ku != nil {
		scale, vscale = a.scale*headScale(a.ks, g), headScale(a.vs, g)
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
	for k := range m {
		clear(out[k*ld : k*ld+E])
	}
	next := a.nextKeys(i+m, hi, first)
	switch {
	case a.Ku != nil && next >= 0:
		kernel.AxpyRowsU8MultiAhead(out, ld, E, sc, n, n, m, a.Vu[from:], E, a.Ku[next:])
	case a.Ku != nil:
		kernel.AxpyRowsU8Multi(out, ld, E, sc, n, n, m, a.Vu[from:], E)
	case next >= 0:
		kernel.AxpyRowsF16MultiAhead(out, ld, E, sc, n, n, m, a.Vh[from:], E, a.Kh[next:])
	default:
		kernel.AxpyRowsF16Multi(out, ld, E, sc, n, n, m, a.Vh[from:], E)
	}
	for k := range m {
		oh := out[k*ld : k*ld+E]
		kernel.Scale(oh, oh, inv[k]*vscale)
	}
}

// nextKeys returns the element where the key rows of item j's head
// start, from slot first, when a is a one-row pass and j < hi is an item
// of another key/value head than j-1's; else -1.
func (a *attnArgs) nextKeys(j, hi, first int) int {
	group := a.H / a.G
	if a.T != 1 || j >= hi || j/group == (j-1)/group {
		return -1
	}
	return ((j/group)*a.stride + a.slotAt(first)) * a.E
}

// keyScores sets the scores of the m queries at q (ldq apart) against
// the n key rows from element from of a binary16 or uint8 cache layer,
// into sc (n apart). In a one-row pass both the keys and the values come
// from memory (the weights streamed since the last token have evicted
// them), so the key pass asks for the value rows as it reads the keys
// (kernel.DotRowsF16MultiAhead): they arrive while the keys are summed
// rather than in a burst before or after. One key/value head of 483
// binary16 positions from memory: 22-24 us, against 26-30 asking for the
// values first (Intel Xeon; docs/lab/kernels-notes.md).
func (a *attnArgs) keyScores(sc, q []float32, ldq, m, n, from int) {
	E := a.E
	switch {
	case a.Ku != nil && a.T == 1:
		kernel.DotRowsU8MultiAhead(sc, n, n, q, ldq, E, m, a.Ku[from:], E, a.Vu[from:])
	case a.Ku != nil:
		kernel.DotRowsU8Multi(sc, n, n, q, ldq, E, m, a.Ku[from:], E)
	case a.T == 1:
		kernel.DotRowsF16MultiAhead(sc, n, n, q, ldq, E, m, a.Kh[from:], E, a.Vh[from:])
	default:
		kernel.DotRowsF16Multi(sc, n, n, q, ldq, E, m, a.Kh[from:], E)
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
