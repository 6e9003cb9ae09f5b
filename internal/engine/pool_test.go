package engine

import (
	"sync/atomic"
	"testing"
)

// TestAttnParts: a one-row pass's attention is cut so that each claim
// (the pool's step: a thread's share over its parts) holds the heads of
// a whole key/value group where threads times the group fit in the
// heads, at most partsPerThread a thread; passes of several rows and one
// thread keep partsPerThread.
func TestAttnParts(t *testing.T) {
	for _, c := range []struct{ T, H, G, threads, want int }{
		{1, 9, 3, 2, 1},                // SmolLM2-135M: 4 and 5 heads
		{1, 16, 8, 2, partsPerThread},  // Qwen3-0.6B: claims of 2 heads, a group
		{1, 32, 8, 2, partsPerThread},  // Llama-3.2-1B: claims of 4
		{1, 14, 2, 2, 1},               // Qwen2-0.5B: 7 heads a group
		{1, 32, 32, 2, partsPerThread}, // no grouping
		{1, 9, 3, 4, 1},                // more threads than groups fit
		{8, 9, 3, 2, partsPerThread},   // a prefill's items are (head, row)
		{1, 9, 3, 1, partsPerThread},   // one thread: no split
	} {
		got := attnParts(c.T, c.H, c.G, c.threads)
		if got != c.want {
			t.Errorf("attnParts(T=%d, H=%d, G=%d, threads=%d) = %d, want %d", c.T, c.H, c.G, c.threads, got, c.want)
		}
		if group, step := c.H/c.G, max(1, c.T*c.H/(c.threads*got)); c.T == 1 && c.threads > 1 && c.threads*group <= c.H && step < group {
			t.Errorf("attnParts(T=1, H=%d, G=%d, threads=%d) = %d: claims of %d heads split groups of %d", c.H, c.G, c.threads, got, step, group)
		}
	}
}

// countTask counts, per index, the times run covered it, and checks that
// each range it gets is within [0, n) and starts on a grain.
type countTask struct {
	hits  []atomic.Int32
	grain int
	bad   atomic.Int32
}

func (c *countTask) run(_, lo, hi int) {
	if lo < 0 || hi > len(c.hits) || lo >= hi || lo%c.grain != 0 {
		c.bad.Add(1)
		return
	}
	for i := lo; i < hi; i++ {
		c.hits[i].Add(1)
	}
}

// TestPoolCoversEveryIndexOnce: whatever the size, grain, threads and
// parts per thread, a dispatch runs every index exactly once, in ranges
// that start on a grain, with the threads taking from each other's
// shares (many dispatches, so that the takes race); per 0 is guided
// claims (doGuided).
func TestPoolCoversEveryIndexOnce(t *testing.T) {
	for _, threads := range []int{2, 3, 4} {
		p := newPool(threads)
		for n := 1; n <= 200; n += 7 {
			for _, grain := range []int{1, 16} {
				for per := 0; per <= partsPerThread; per++ {
					c := &countTask{hits: make([]atomic.Int32, n), grain: grain}
					for range 20 {
						if per == 0 { // guided claims
							p.doGuided(c, n, grain, true, threads)
							continue
						}
						p.doParts(c, n, grain, true, threads, per)
					}
					if c.bad.Load() != 0 {
						t.Fatalf("threads %d, n %d, grain %d, %d a thread: %d ranges out of bounds or off the grain", threads, n, grain, per, c.bad.Load())
					}
					for i := range c.hits {
						if got := c.hits[i].Load(); got != 20 {
							t.Fatalf("threads %d, n %d, grain %d, %d a thread: index %d run %d times in 20 dispatches", threads, n, grain, per, i, got)
						}
					}
				}
			}
		}
		p.close()
	}
}

// TestPackSpan: a span's bounds come back as they went in.
func TestPackSpan(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {0, 1}, {5, 9}, {1<<31 - 2, 1<<31 - 1}, {123456, 7654321}} {
		if lo, hi := unpackSpan(packSpan(c[0], c[1])); lo != c[0] || hi != c[1] {
			t.Errorf("packSpan(%d, %d) comes back as %d, %d", c[0], c[1], lo, hi)
		}
	}
}
