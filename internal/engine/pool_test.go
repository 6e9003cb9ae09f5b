package engine

import (
	"sync/atomic"
	"testing"
	"time"
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

// TestPoolDoesNotWaitForLateWorker: while worker 1 is held between its
// seeing a dispatch and its first claim (a worker kept off its core),
// dispatches on 2 threads still end, the caller running every index;
// once released, the worker takes part again, and every index ran once
// per dispatch throughout.
func TestPoolDoesNotWaitForLateWorker(t *testing.T) {
	hold := make(chan struct{})
	var held atomic.Int32
	hook := func(w int) {
		if w == 1 && held.Add(1) == 1 {
			<-hold
		}
	}
	beforeClaim.Store(&hook)
	defer beforeClaim.Store(nil)
	p := newPool(2)
	defer p.close()
	const n, dispatches = 256, 200
	c := &whoTask{countTask: countTask{hits: make([]atomic.Int32, n), grain: 1}}
	for deadline := time.Now().Add(5 * time.Second); held.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("worker 1 saw no dispatch in 5 s")
		}
		p.doGuided(c, n, 1, true, 2)
	}
	for range dispatches {
		p.doGuided(c, n, 1, true, 2)
	}
	if got := c.byWorker[1].Load(); got != 0 {
		t.Fatalf("worker 1, held before its first claim, ran %d indices", got)
	}
	close(hold)
	for i := 0; c.byWorker[1].Load() == 0; i++ {
		if i == 100000 {
			t.Fatal("worker 1 took no part in 100000 dispatches after its release")
		}
		p.doGuided(c, n, 1, true, 2)
	}
	want := c.hits[0].Load()
	for i := range c.hits {
		if got := c.hits[i].Load(); got != want {
			t.Fatalf("index %d ran %d times, index 0 %d times", i, got, want)
		}
	}
	if c.bad.Load() != 0 {
		t.Fatalf("%d ranges out of bounds", c.bad.Load())
	}
}

// whoTask is a countTask that also counts the indices each worker ran.
type whoTask struct {
	countTask
	byWorker [4]atomic.Int64
}

func (c *whoTask) run(w, lo, hi int) {
	c.countTask.run(w, lo, hi)
	c.byWorker[w].Add(int64(hi - lo))
}

// TestPoolBenchesSlowWorker: when every part worker 1 runs takes
// milliseconds (a worker that shares its core with another process),
// the dispatches soon run on the caller alone (a thread benched), and
// the benched thread comes back to try later.
func TestPoolBenchesSlowWorker(t *testing.T) {
	p := newPool(2)
	defer p.close()
	const n = 64
	c := &slowTask{whoTask: whoTask{countTask: countTask{hits: make([]atomic.Int32, n), grain: 1}}}
	deadline := time.Now().Add(5 * time.Second)
	for p.bench.benched == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no thread benched in 5 s of dispatches with a worker 1 that sleeps 2 ms a part (%d indices by worker 1)", c.byWorker[1].Load())
		}
		p.doGuided(c, n, 1, true, 2)
	}
	before := c.byWorker[1].Load()
	for range 50 {
		p.doGuided(c, n, 1, true, 2)
	}
	if got := c.byWorker[1].Load(); got != before {
		t.Fatalf("benched worker 1 ran %d indices", got-before)
	}
	for deadline = time.Now().Add(5 * time.Second); c.byWorker[1].Load() == before; {
		if time.Now().After(deadline) {
			t.Fatalf("benched worker 1 took no part in 5 s of dispatches (period %v)", p.bench.period)
		}
		p.doGuided(c, n, 1, true, 2)
	}
}

// slowTask is a whoTask whose parts on worker 1 sleep 2 ms and on the
// caller spin for 20 µs.
type slowTask struct{ whoTask }

func (c *slowTask) run(w, lo, hi int) {
	if w == 1 {
		time.Sleep(2 * time.Millisecond)
	} else {
		for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
		}
	}
	c.whoTask.run(w, lo, hi)
}

// TestBenchWindows: windows where the threads beat the caller alone
// bench nothing; one where they do not benches a thread for benchBase,
// after which it comes back; benched again soon after, it stays out
// twice as long, up to benchMax; never more than all but the caller.
func TestBenchWindows(t *testing.T) {
	var b bench
	now := time.Unix(1000, 0)
	for range 100 { // the threads halve the time
		b.record(time.Millisecond, 2*time.Millisecond, 2, now)
		now = now.Add(time.Millisecond)
	}
	if b.benched != 0 {
		t.Fatalf("benched %d with threads twice as fast as the caller alone", b.benched)
	}
	bad := func() {
		for range 16 { // two windows no faster than alone
			b.record(time.Millisecond, time.Millisecond, 2, now)
			now = now.Add(time.Millisecond)
		}
	}
	bad()
	if b.benched != 1 || b.period != benchBase {
		t.Fatalf("after a window no faster than alone: %d benched for %v, want 1 for %v", b.benched, b.period, benchBase)
	}
	if got := b.admit(2, now); got != 1 {
		t.Fatalf("admit while benched = %d threads, want 1", got)
	}
	want := benchBase
	for range 10 {
		now = now.Add(b.period)
		if got := b.admit(2, now); got != 2 {
			t.Fatalf("admit after the period = %d threads, want 2", got)
		}
		bad()
		want = min(2*want, benchMax)
		if b.period != want || b.benched != 1 {
			t.Fatalf("benched again on coming back: %d for %v, want 1 for %v", b.benched, b.period, want)
		}
	}
	if want != benchMax {
		t.Fatalf("period stopped at %v below benchMax %v", want, benchMax)
	}
	bad()
	if b.benched != 1 {
		t.Fatalf("a pool of 2 benched %d threads", b.benched)
	}
	// a bad window long after a thread came back starts from benchBase
	now = now.Add(b.period)
	b.admit(2, now)
	for range 10 * benchWindow / time.Millisecond { // good windows
		b.record(time.Millisecond, 2*time.Millisecond, 2, now)
		now = now.Add(time.Millisecond)
	}
	bad()
	if b.period != benchBase {
		t.Fatalf("benched long after coming back for %v, want %v", b.period, benchBase)
	}
}

// TestAlone: the caller's time alone scales its own time by the share of
// the chunks it ran.
func TestAlone(t *testing.T) {
	for _, c := range []struct {
		own    time.Duration
		ran, n int
		want   time.Duration
	}{{time.Millisecond, 4, 8, 2 * time.Millisecond}, {time.Millisecond, 8, 8, time.Millisecond}, {3 * time.Millisecond, 0, 8, 6 * time.Millisecond}} {
		if got := alone(c.own, c.ran, c.n); got != c.want {
			t.Errorf("alone(%v, %d, %d) = %v, want %v", c.own, c.ran, c.n, got, c.want)
		}
	}
}

// TestPoolStartBench: a start sample that found a CPU busy leaves a
// thread out of the first dispatches (the caller runs them alone), and
// the thread comes back after benchBase.
func TestPoolStartBench(t *testing.T) {
	p := newPool(2)
	defer p.close()
	p.startBench.Store(-1)
	p.bench.pending = true
	c := &whoTask{countTask: countTask{hits: make([]atomic.Int32, 64), grain: 1}}
	p.doGuided(c, 64, 1, true, 2) // the sample is not in yet
	if !p.bench.pending || p.bench.benched != 0 {
		t.Fatalf("before the sample: pending %v, %d benched", p.bench.pending, p.bench.benched)
	}
	p.startBench.Store(1)
	before := c.byWorker[1].Load()
	for range 50 {
		p.doGuided(c, 64, 1, true, 2)
	}
	if p.bench.pending || c.byWorker[1].Load() != before {
		t.Fatalf("after a sample of 1 busy CPU: pending %v, worker 1 ran %d indices", p.bench.pending, c.byWorker[1].Load()-before)
	}
	time.Sleep(benchBase)
	p.doGuided(c, 64, 1, true, 2)
	if p.bench.back.IsZero() {
		t.Fatalf("the thread left out at the start did not come back after %v", benchBase)
	}
}
