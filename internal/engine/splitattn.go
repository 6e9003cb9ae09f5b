package engine

import (
	"github.com/aotlm/aotlm/internal/kernel"
)

// The split attention of a decode row at depth. The per-row path
// (attendItems) gives the workers whole key/value heads: a head's items
// stream its whole run of keys and values on one thread, so the threads
// share the cache only as evenly as the heads divide between them, and a
// run of a few thousand slots leaves the core's caches between its key
// pass and its value pass. Here a one-row pass over a binary16 or uint8
// cache splits each key/value head's slots into chunks of splitKeys: an
// item is one chunk of one key/value head, for every query head of its
// group. An item keeps, per query head, the largest score of its chunk,
// the sum of the exponentials less it and the outputs weighted by them;
// the caller then merges each head's chunks in their order. The chunks
// do not depend on the threads, so neither do the outputs: they are the
// same bits on 1 or N threads.

// splitKeys is the slots of one chunk of the split attention: 512 keys
// and values of a binary16 head of 128 are 256 KiB, which a core's
// second-level cache holds between the key pass and the value pass.
const splitKeys = 512

// splitMinSlots is the fewest slots a decode row must see for the split
// attention; below it the per-row path runs (a variable so that tests
// can send every decode row through either path).
var splitMinSlots = 1024

// splitMaxGroups is the most key/value heads a layer may have for the
// split attention. With more, the per-row path's items (whole groups of
// heads) already share the threads; on the Qwen3-0.6B shape (8
// key/value heads, binary16 cache 3,968 positions deep, 2 threads) the
// split decoded at a median 0.89x the per-row path's rate (16
// alternating rounds of 12 tokens in one process, spread 0.55-1.39x, on
// a busy AMD EPYC, 2 vCPUs). The choice depends on the layer alone, not
// on the threads, so the outputs stay the same bits on any number.
const splitMaxGroups = 2

// splitScratch is the split attention's state beyond the workers'
// scores: each (query head, chunk) part's maximum, sum and weighted
// value sum, [H][chunks] and [H][chunks][E].
type splitScratch struct {
	mx, sum []float32
	o       []float32
	sc      [][]float32 // [worker][attnTile*splitKeys]
}

// grow makes room for H heads of nc chunks of E values on threads workers.
func (s *splitScratch) grow(H, nc, E, threads int) {
	if len(s.mx) < H*nc {
		s.mx, s.sum = make([]float32, H*nc), make([]float32, H*nc)
	}
	if len(s.o) < H*nc*E {
		s.o = make([]float32, H*nc*E)
	}
	for len(s.sc) < threads {
		s.sc = append(s.sc, make([]float32, attnTile*splitKeys))
	}
}

// useSplit reports whether a's pass attends in chunks of slots: one row,
// a chain (no token tree), over a binary16 or uint8 cache, with the
// multi-query row kernels, of at most splitMaxGroups key/value heads,
// seeing at least splitMinSlots slots.
func (a *attnArgs) useSplit() bool {
	if a.T != 1 || a.G > splitMaxGroups || a.mask != nil || a.rowPos != nil || a.Kh == nil && a.Ku == nil || !kernel.RowsMulti() {
		return false
	}
	return a.pos+1-a.first(0) >= splitMinSlots
}

// splitChunks is the number of chunks of a's split attention per
// key/value head.
func (a *attnArgs) splitChunks() int {
	return (a.pos + 1 - a.first(0) + splitKeys - 1) / splitKeys
}

// splitFrom returns where item i's chunk starts in the cache (an
// element) and its slots.
func (a *attnArgs) splitFrom(i int) (from, n int) {
	nc := a.splitChunks()
	g, c := i/nc, i%nc
	first := a.first(0)
	lo := c * splitKeys
	n = min(splitKeys, a.pos+1-first-lo)
	return (g*a.stride + a.slotAt(first) + lo) * a.E, n
}

// attendSplitItems computes items [lo, hi) of a's split attention, item
// i being chunk i%nc of key/value head i/nc, into s's parts; sc is the
// worker's scores.
func attendSplitItems(a *attnArgs, s *splitScratch, lo, hi int, sc []float32) {
	E, grp, nc := a.E, a.H/a.G, a.splitChunks()
	for i := lo; i < hi; i++ {
		g, c := i/nc, i%nc
		from, n := a.splitFrom(i)
		scale := a.scale
		if a.Ku != nil {
			scale *= headScale(a.ks, g)
		}
		for h0 := g * grp; h0 < (g+1)*grp; h0 += attnTile {
			m := min(attnTile, (g+1)*grp-h0)
			s2 := sc[:m*n]
			a.keyScores(s2, a.q[h0*E:], E, m, n, from)
			for k := range m {
				row := s2[k*n : (k+1)*n]
				kernel.Scale(row, row, scale)
				mx := maxOf(row)
				p := (h0+k)*nc + c
				s.mx[p], s.sum[p] = mx, expSub(row, mx)
			}
			p := h0*nc + c
			// the outputs of head h0+k are part (h0+k)*nc+c: nc*E apart
			out := s.o[p*E:]
			for k := range m {
				clear(out[k*nc*E : k*nc*E+E])
			}
			next := -1
			if h0+m == (g+1)*grp && i+1 < hi {
				next, _ = a.splitFrom(i + 1)
			}
			switch {
			case a.Ku != nil && next >= 0:
				kernel.AxpyRowsU8MultiAhead(out, nc*E, E, s2, n, n, m, a.Vu[from:], E, a.Ku[next:])
			case a.Ku != nil:
				kernel.AxpyRowsU8Multi(out, nc*E, E, s2, n, n, m, a.Vu[from:], E)
			case next >= 0:
				kernel.AxpyRowsF16MultiAhead(out, nc*E, E, s2, n, n, m, a.Vh[from:], E, a.Kh[next:])
			default:
				kernel.AxpyRowsF16Multi(out, nc*E, E, s2, n, n, m, a.Vh[from:], E)
			}
		}
	}
}

// mergeSplit sets a's outputs from s's parts: for each query head, its
// chunks in order, each weighted by exp(its maximum less the largest).
func mergeSplit(a *attnArgs, s *splitScratch) {
	E, grp, nc := a.E, a.H/a.G, a.splitChunks()
	for h := range a.H {
		mxs := s.mx[h*nc : (h+1)*nc]
		top := maxOf(mxs)
		oh := a.out[h*E : (h+1)*E]
		clear(oh)
		var sum float32
		for c := range nc {
			w := expOf(mxs[c] - top)
			sum += w * s.sum[h*nc+c]
			kernel.Axpy(oh, w, s.o[(h*nc+c)*E:(h*nc+c+1)*E])
		}
		vscale := float32(1)
		if a.Ku != nil {
			vscale = headScale(a.vs, h/grp)
		}
		kernel.Scale(oh, oh, vscale/sum)
	}
}
