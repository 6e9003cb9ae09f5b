package engine

import (
	"runtime"
	"sync/atomic"
)

// A task is work over an index range [0, n) that workers split: run does
// [lo, hi) on worker w (0 is the caller), so per-worker scratch can be
// indexed by w.
type task interface {
	run(w, lo, hi int)
}

// pool is a fixed set of worker goroutines. The caller publishes a task
// and a new generation number; workers spin briefly on the generation
// (the low-latency path between the consecutive operations of one token),
// then park on a channel until woken. Nothing is allocated per dispatch
// and no goroutine is started after newPool.
type pool struct {
	threads int // workers, counting the caller
	active  int // threads taking part in the current dispatch
	task    task
	n       int
	grain   int
	gen     atomic.Uint32
	left    atomic.Int32 // workers not yet finished with the dispatch
	next    atomic.Int32 // the next part to claim
	parts   int          // parts of the current dispatch
	// perThread is how many parts per thread the next dispatch is cut
	// into (partsPerThread unless a one-token linear asks for fewer).
	perThread int
	stop      atomic.Bool
	workers   []*worker
	lin       linearJob // the current linear, kept here so dispatch allocates nothing
	group     linearGroup
}

// linearGrain is the row granularity of a linear's split across workers.
const linearGrain = 16

// linearGroup is linears of one input run as one task over their rows
// laid end to end (fuseLinears): [off[i], off[i+1]) are job i's rows.
type linearGroup struct {
	jobs [maxFuse]linearJob
	off  [maxFuse + 1]int
	n    int
}

func (g *linearGroup) run(w, lo, hi int) {
	for i := 0; i < g.n; i++ {
		a, b := max(lo, g.off[i]), min(hi, g.off[i+1])
		if a < b {
			g.jobs[i].run(w, a-g.off[i], b-g.off[i])
		}
	}
}

type worker struct {
	id       int
	sleeping atomic.Bool
	wake     chan struct{}
}

// spinLimit is how many checks of the generation a worker makes before
// it parks: tens of microseconds, longer than the gaps between the
// operations of a token, shorter than a user's pause.
const spinLimit = 1 << 16

// minParallelCost is the multiply-adds below which a job runs inline (a
// variable so that tests can send every step through the workers).
var minParallelCost = 1 << 15

func newPool(threads int) *pool {
	p := &pool{threads: max(threads, 1)}
	for i := 1; i < p.threads; i++ {
		w := &worker{id: i, wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.loop(w, p.gen.Load())
	}
	return p
}

// loop is worker w's life; last is the generation at its creation (read
// before the goroutine starts, so a dispatch that comes first is not
// missed).
func (p *pool) loop(w *worker, last uint32) {
	for {
		spins := 0
		for p.gen.Load() == last {
			spins++
			if spins < spinLimit {
				if spins%4096 == 0 {
					runtime.Gosched()
				}
				continue
			}
			w.sleeping.Store(true)
			if p.gen.Load() == last {
				<-w.wake
			}
			w.sleeping.Store(false)
			spins = 0
		}
		if p.stop.Load() {
			return
		}
		last = p.gen.Load()
		if w.id >= p.active {
			continue // not asked to take part in this dispatch
		}
		p.runParts(w.id)
		p.left.Add(-1)
	}
}

// part is the range of part i: parts near-equal ranges, each a
// multiple of grain but the last.
func (p *pool) part(i int) (int, int) {
	chunks := (p.n + p.grain - 1) / p.grain
	per := (chunks + p.parts - 1) / p.parts
	lo := min(i*per*p.grain, p.n)
	return lo, min(lo+per*p.grain, p.n)
}

// partsPerThread is how many parts a dispatch is cut into per thread.
// The threads claim them in turn (runParts), so one that its share of
// memory bandwidth or the scheduler slows takes fewer: with one equal
// share each, the caller spent about 12% of a 2-thread Llama-3.2-1B
// decode waiting for the other worker (its profile), and 4 parts per
// thread decoded 3-10% faster (Llama-3.2-1B, Qwen3-0.6B; interleaved
// runs, noisy) and prefilled 8% faster (Qwen3-0.6B pp128). Each part is
// still a contiguous range of rows: one sequential stream of weights.
// Tried against 4 at 2 threads (tg128, three interleaved rounds on the
// same machine): 8 and 16 parts a thread, and guided parts (each a
// quarter of the rows left, down to the grain) were within the noise
// on Llama-3.2-1B and Qwen3-0.6B, and 16 decoded SmolLM2-135M 17% slower.
//
// A one-token linear streams its weights once and computes little, so
// there the parts are cut no smaller than minPartBytes of weights, at
// least one per thread (linearParts): each part a thread takes starts
// another stream from memory, and the SmolLM2-135M shape, whose linears
// are 58-940 KiB, cut 4 parts a thread into pieces of 22-118 KiB. One
// part a thread decoded it 8-9% faster at 2 threads than 4 (one process,
// 30 blocks of 64 tokens alternating the two, twice), and 2 parts
// 5-7%; the Qwen3-0.6B and Llama-3.2-1B shapes were within 2% with 1, 2
// or 4 (their parts are 150 KiB to several MiB).
const partsPerThread = 4

// minPartBytes is the least weight bytes linearParts gives a part of a
// one-token linear.
const minPartBytes = 256 << 10

// linearParts returns the parts per thread of a dispatch of linears over
// weights of the given total bytes for T tokens.
func linearParts(bytes int64, T, threads int) int {
	if T > 1 || threads <= 1 {
		return partsPerThread
	}
	return min(max(int(bytes/(int64(threads)*minPartBytes)), 1), partsPerThread)
}

// runParts runs, on worker w, the parts it claims until none are left.
func (p *pool) runParts(w int) {
	for {
		i := int(p.next.Add(1)) - 1
		if i >= p.parts {
			return
		}
		if lo, hi := p.part(i); lo < hi {
			p.task.run(w, lo, hi)
		}
	}
}

// do runs t over [0, n) split across the first threads workers (in
// chunks that are multiples of grain), or inline when parallel is false
// or threads is 1.
func (p *pool) do(t task, n, grain int, parallel bool, threads int) {
	per := partsPerThread
	if p.perThread > 0 {
		per, p.perThread = p.perThread, 0
	}
	threads = min(threads, p.threads)
	if threads <= 1 || !parallel || n <= grain {
		t.run(0, 0, n)
		return
	}
	p.task, p.n, p.grain, p.active = t, n, max(grain, 1), threads
	p.parts = min(threads*per, (n+p.grain-1)/p.grain)
	p.next.Store(0)
	p.left.Store(int32(threads - 1))
	p.gen.Add(1)
	for _, w := range p.workers[:threads-1] {
		if w.sleeping.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	p.runParts(0)
	for spins := 1; p.left.Load() != 0; spins++ {
		if spins%4096 == 0 {
			runtime.Gosched()
		}
	}
	p.task = nil
}

// linear runs job over its N output rows, split across the workers when
// it is large enough.
func (p *pool) linear(job linearJob, threads int) {
	p.lin = job
	p.perThread = linearParts(job.weightBytes(), job.T, threads)
	p.do(&p.lin, job.N, linearGrain, job.T*job.N*job.K >= minParallelCost, threads)
}

// linears runs jobs (at most maxFuse) as one dispatch over their output
// rows laid end to end.
func (p *pool) linears(jobs []linearJob, threads int) {
	g := &p.group
	g.n, g.off[0] = len(jobs), 0
	cost, bytes := 0, int64(0)
	for i, j := range jobs {
		g.jobs[i] = j
		g.off[i+1] = g.off[i] + j.N
		cost += j.T * j.N * j.K
		bytes += j.weightBytes()
	}
	p.perThread = linearParts(bytes, jobs[0].T, threads)
	p.do(g, g.off[g.n], linearGrain, cost >= minParallelCost, threads)
	for i := range g.jobs[:g.n] {
		g.jobs[i] = linearJob{} // drop the references to the session's buffers
	}
}

// close stops the workers.
func (p *pool) close() {
	if p.stop.Swap(true) {
		return
	}
	p.gen.Add(1)
	for _, w := range p.workers {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}
