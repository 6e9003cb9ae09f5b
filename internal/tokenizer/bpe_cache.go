package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// bpeCache remembers the ids of recently seen words. It is a fixed table
// of bpeCacheSets sets of two entries, indexed by a hash of the word: a
// new word replaces the older entry of its set. Entries are immutable and
// published with atomic stores, so lookups take no lock, memory stays
// bounded, and concurrent Encode calls share the cache safely.
type bpeCache struct {
	seed  maphash.Seed
	slots *[2 * bpeCacheSets]atomic.Pointer[bpeCacheEntry]
	clock atomic.Uint32 // picks the entry to replace
}

type bpeCacheEntry struct {
	word string
	ids  []int32
}

const (
	bpeCacheSets    = 1 << 14
	bpeCacheWordMax = 64 // longer words are not cached
)

func newBPECache() bpeCache {
	return bpeCache{seed: maphash.MakeSeed(), slots: new([2 * bpeCacheSets]atomic.Pointer[bpeCacheEntry])}
}

// set returns the index of the first entry of word's set.
func (c *bpeCache) set(word string) int {
	return int(maphash.String(c.seed, word)&(bpeCacheSets-1)) * 2
}

func (c *bpeCache) get(word string) ([]int32, bool) {
	if c.slots == nil || len(word) > bpeCacheWordMax {
		return nil, false
	}
	i := c.set(word)
	if e := c.slots[i].Load(); e != nil && e.word == word {
		return e.ids, true
	}
	if e := c.slots[i+1].Load(); e != nil && e.word == word {
		return e.ids, true
	}
	return nil, false
}

func (c *bpeCache) put(word string, ids []int32) {
	if c.slots == nil || len(word) > bpeCacheWordMax {
		return
	}
	e := &bpeCacheEntry{word: strings.Clone(word), ids: append([]int32(nil), ids...)}
	i := c.set(word)
	switch {
	case c.slots[i].Load() == nil:
	case c.slots[i+1].Load() == nil:
		i++
	default:
		i += int(c.clock.Add(1) & 1)
	}
	c.slots[i].Store(e)
}
