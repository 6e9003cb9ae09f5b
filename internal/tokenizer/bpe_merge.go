package tokenizer

import (
	"math"
	"sync"
)

// bpeMerge is one merge rule: the pair it applies to becomes id; lower rank
// merges first.
type bpeMerge struct {
	rank int32
	id   int32
}

// bpePairKey packs a pair of token ids into the key of the merge table.
func bpePairKey(left, right int32) uint64 {
	return uint64(uint32(left))<<32 | uint64(uint32(right))
}

// bpeHeapMin is the symbol count from which a word is merged with a heap and
// a linked list (O(n log n)) instead of rescanning an array (O(n^2), faster
// for the short words that make up almost all text).
const bpeHeapMin = 48

// bpeScratch holds the reusable buffers of one merge; it lives in a
// sync.Pool so the merge loop allocates nothing per token.
type bpeScratch struct {
	ranks []int32
	prev  []int32
	next  []int32
	heap  []bpeCand
}

var bpeScratchPool = sync.Pool{New: func() any { return new(bpeScratch) }}

const bpeNoRank = math.MaxInt32

// bpeMergeSymbols applies the merge rules to syms in place and returns the
// merged prefix of it.
func bpeMergeSymbols(merges map[uint64]bpeMerge, syms []int32) []int32 {
	if len(syms) < 2 {
		return syms
	}
	sc := bpeScratchPool.Get().(*bpeScratch)
	defer bpeScratchPool.Put(sc)
	if len(syms) >= bpeHeapMin {
		return bpeMergeHeap(merges, syms, sc)
	}
	return bpeMergeScan(merges, syms, sc)
}

// bpeMergeScan is the reference merge: repeatedly merge the adjacent pair with
// the lowest rank, leftmost first. The rank of each adjacent pair is kept in
// ranks so the map is read O(n) times in total.
func bpeMergeScan(merges map[uint64]bpeMerge, syms []int32, sc *bpeScratch) []int32 {
	n := len(syms)
	ranks := sc.ranks[:0]
	for i := 0; i+1 < n; i++ {
		ranks = append(ranks, bpePairRank(merges, syms[i], syms[i+1]))
	}
	sc.ranks = ranks
	for n > 1 {
		best, bi := int32(bpeNoRank), -1
		for i := 0; i+1 < n; i++ {
			if ranks[i] < best {
				best, bi = ranks[i], i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi] = merges[bpePairKey(syms[bi], syms[bi+1])].id
		copy(syms[bi+1:n-1], syms[bi+2:n])
		copy(ranks[bi:n-2], ranks[bi+1:n-1])
		n--
		if bi > 0 {
			ranks[bi-1] = bpePairRank(merges, syms[bi-1], syms[bi])
		}
		if bi+1 < n {
			ranks[bi] = bpePairRank(merges, syms[bi], syms[bi+1])
		}
	}
	return syms[:n]
}

func bpePairRank(merges map[uint64]bpeMerge, a, b int32) int32 {
	if m, ok := merges[bpePairKey(a, b)]; ok {
		return m.rank
	}
	return bpeNoRank
}

// bpeCand is a merge candidate in the heap: the pair starting at symbol pos,
// valid while that symbol still has id left and its right neighbour id right.
type bpeCand struct {
	rank, pos   int32
	left, right int32
	id          int32
}

func bpeCandLess(a, b bpeCand) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

func bpeHeapPush(h []bpeCand, c bpeCand) []bpeCand {
	h = append(h, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !bpeCandLess(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func bpeHeapPop(h []bpeCand) (bpeCand, []bpeCand) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && bpeCandLess(h[l], h[m]) {
			m = l
		}
		if r < len(h) && bpeCandLess(h[r], h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}

// bpeMergeHeap gives the same result as bpeMergeScan in O(n log n): symbols form
// a linked list, candidates sit in a min-heap by (rank, position) and stale
// ones are dropped when popped.
func bpeMergeHeap(merges map[uint64]bpeMerge, syms []int32, sc *bpeScratch) []int32 {
	n := len(syms)
	prev, next := sc.prev[:0], sc.next[:0]
	for i := 0; i < n; i++ {
		prev = append(prev, int32(i-1))
		next = append(next, int32(i+1))
	}
	next[n-1] = -1
	h := sc.heap[:0]
	push := func(pos int32) {
		if pos < 0 || next[pos] < 0 {
			return
		}
		l, r := syms[pos], syms[next[pos]]
		if m, ok := merges[bpePairKey(l, r)]; ok {
			h = bpeHeapPush(h, bpeCand{rank: m.rank, pos: pos, left: l, right: r, id: m.id})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(int32(i))
	}
	for len(h) > 0 {
		var c bpeCand
		c, h = bpeHeapPop(h)
		r := next[c.pos]
		if syms[c.pos] != c.left || r < 0 || syms[r] != c.right {
			continue
		}
		syms[c.pos] = c.id
		syms[r] = -1
		next[c.pos] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = c.pos
		}
		push(prev[c.pos])
		push(c.pos)
	}
	sc.prev, sc.next, sc.heap = prev, next, h
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}
