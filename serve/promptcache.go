package serve

import (
	"bytes"
	"sync"
	"time"
)

// minStash is the fewest cached positions a request must be about to
// drop from a session for the session to be stashed in the prompt cache.
const minStash = 64

// promptCache keeps saved sessions in memory within a byte budget, so
// that a conversation whose session was taken by another one continues
// without prefilling its history again. It is safe for concurrent use.
type promptCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries []*cacheEntry
}

// cacheEntry is one saved session: whose it is, the ids it holds, its
// state as Session.SaveState wrote it.
type cacheEntry struct {
	scope string
	ids   []int
	data  []byte
	last  time.Time
}

// stash saves sl's session in the cache when a request is about to drop
// at least minStash of its cached positions (keep of them stay).
func (c *promptCache) stash(sl *slot, keep int) {
	hist := sl.s.History()
	if c == nil || len(hist)-keep < minStash {
		return
	}
	var buf bytes.Buffer
	if err := sl.s.SaveState(&buf); err != nil || int64(buf.Len()) > c.budget {
		return
	}
	e := &cacheEntry{scope: sl.scope, ids: append([]int(nil), hist...), data: buf.Bytes(), last: time.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	// an entry this one extends is replaced
	kept := c.entries[:0]
	for _, old := range c.entries {
		if old.scope == e.scope && len(old.ids) <= len(e.ids) && commonPrefix(old.ids, e.ids) == len(old.ids) {
			c.used -= int64(len(old.data))
			continue
		}
		kept = append(kept, old)
	}
	c.entries = append(kept, e)
	c.used += int64(len(e.data))
	for c.used > c.budget && len(c.entries) > 0 {
		oldest := 0
		for i, x := range c.entries {
			if x.last.Before(c.entries[oldest].last) {
				oldest = i
			}
		}
		c.used -= int64(len(c.entries[oldest].data))
		c.entries = append(c.entries[:oldest], c.entries[oldest+1:]...)
	}
}

// restore loads into sl the longest entry of scope that ids extend, when
// it holds more of ids than sl does; it reports whether it did.
func (c *promptCache) restore(sl *slot, scope string, ids []int) bool {
	if c == nil {
		return false
	}
	have := commonPrefix(sl.s.History(), ids)
	c.mu.Lock()
	var best *cacheEntry
	for _, e := range c.entries {
		if e.scope == scope && len(e.ids) > have && len(e.ids) < len(ids) && commonPrefix(e.ids, ids) == len(e.ids) &&
			(best == nil || len(e.ids) > len(best.ids)) {
			best = e
		}
	}
	if best != nil {
		best.last = time.Now()
	}
	c.mu.Unlock()
	if best == nil {
		return false
	}
	if err := sl.s.LoadState(bytes.NewReader(best.data)); err != nil {
		sl.s.Reset()
		return false
	}
	return true
}

// size is the bytes and entries the cache holds.
func (c *promptCache) size() (int64, int) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.entries)
}
