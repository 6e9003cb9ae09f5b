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
	// spans[t] is thread t's share of the current dispatch not yet
	// claimed, in grains (see run); step is the grains a thread claims
	// from its own share at once.
	spans []span
	step  int
	// guided: a thread claims half of what is left of its own share at
	// a time (at least a grain) instead of step (doGuided).
	guided  bool
	stop    atomic.Bool
	workers []*worker
	lin     linearJob // the current linear, kept here so dispatch allocates nothing
	group   linearGroup
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

// span is a range [lo, hi) of grains, lo in the low 32 bits and hi in
// the high, padded to a cache line of its own: its owner claims from the
// front and other threads steal from the back, each with one
// compare-and-swap.
type span struct {
	v atomic.Uint64
	_ [56]byte
}

func packSpan(lo, hi int) uint64     { return uint64(uint32(lo)) | uint64(hi)<<32 }
func unpackSpan(v uint64) (int, int) { return int(uint32(v)), int(v >> 32) }

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
	p.spans = make([]span, p.threads)
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
		p.run(w.id)
		p.left.Add(-1)
	}
}

// partsPerThread is how many parts of its own share a thread claims in
// turn (run), so that one which its share of memory bandwidth or the
// scheduler slows is helped: with one equal share each and no help, the
// caller spent about 12% of a 2-thread Llama-3.2-1B decode waiting for
// the other worker (its profile), and 4 parts per thread decoded 3-10%
// faster (Llama-3.2-1B, Qwen3-0.6B; interleaved runs, noisy) and
// prefilled 8% faster (Qwen3-0.6B pp128). Tried against 4 at 2 threads
// (tg128, three interleaved rounds on the same machine): 8 and 16 parts
// a thread, and guided parts (each a quarter of the rows left, down to
// the grain, from one counter for all threads) were within the noise on
// Llama-3.2-1B and Qwen3-0.6B, and 16 decoded SmolLM2-135M 17% slower.
// Linears now claim guided from each thread's own share (doGuided); the
// other dispatches (attention, row steps) take partsPerThread.
//
// Until 2026-11-28 the parts were claimed from one counter, so a
// thread's parts lay apart (part 0, 2, 4 and 6 of 8, say) and each began
// another stream of weights from memory. Now a thread owns a contiguous
// share and claims its parts from the front, one after the other (one
// stream), and a thread whose share is done takes parts from the back of
// the share with the most left. Measured at 2 threads in one process, the
// two ways alternating by blocks of 32-64 tokens: decode 1.6-5.4% faster
// on the Qwen3-0.6B shape (4-bit, two runs) and 2.4-4.2% on Llama-3.2-1B
// (4-bit twice, 8-bit once), SmolLM2-135M within 1%; prefill (128 tokens)
// 0-17% faster in five runs of six. Every row is computed the same way
// whoever takes it.
//
// A one-token linear streams its weights once and computes little, so
// for a while (when the parts still lay apart) its parts were cut no
// smaller than 256 KiB of weights, at least one a thread: the
// SmolLM2-135M shape's linears (58-940 KiB) then went one part a thread,
// 8-9% faster than 4 at 2 threads. With contiguous shares the parts of a
// thread are one stream again (a row loop asks for the lines ahead of
// its loads, past the end of its call, so the next part's first lines
// are on their way), and one part a thread left the caller waiting
// for the other worker 9-12% of a SmolLM2-135M token (a clock around
// the steps: the other worker's share, its activations and outputs in
// the caller's cache, ran 10-15% longer). Four parts a thread, so that
// the faster thread takes the other's last ones, cut the wait to 4% and
// decoded that shape (4-bit) 0.4-8.1% faster, median 3.6% (seven runs of
// 16 alternating blocks of 64 tokens, one process, Intel Xeon); its
// 8-bit form, Qwen3-0.6B and Llama-3.2-1B (most of whose linears had 4
// parts already) moved -3.1% to +0% (noise). So no dispatch takes
// fewer than partsPerThread (linears later went guided, doGuided).
const partsPerThread = 4

// run runs, on worker w, its own share a step at a time from the front,
// then takes steps from the back of the share with the most left until
// none is left.
func (p *pool) run(w int) {
	own := &p.spans[w].v
	for {
		v := own.Load()
		lo, hi := unpackSpan(v)
		if lo >= hi {
			break
		}
		step := p.step
		if p.guided {
			step = max(1, (hi-lo+1)/2)
		}
		next := min(lo+step, hi)
		if own.CompareAndSwap(v, packSpan(next, hi)) {
			p.task.run(w, lo*p.grain, min(next*p.grain, p.n))
		}
	}
	for {
		victim, most := -1, 0
		for t := range p.active {
			if lo, hi := unpackSpan(p.spans[t].v.Load()); hi-lo > most {
				victim, most = t, hi-lo
			}
		}
		if victim < 0 {
			return
		}
		s := &p.spans[victim].v
		v := s.Load()
		lo, hi := unpackSpan(v)
		if lo >= hi {
			continue
		}
		take := max(1, min(p.step, (hi-lo)/2))
		if s.CompareAndSwap(v, packSpan(lo, hi-take)) {
			p.task.run(w, (hi-take)*p.grain, min(hi*p.grain, p.n))
		}
	}
}

// do runs t over [0, n) split across the first threads workers (in
// chunks that are multiples of grain), or inline when parallel is false
// or threads is 1.
func (p *pool) do(t task, n, grain int, parallel bool, threads int) {
	p.doParts(t, n, grain, parallel, threads, partsPerThread)
}

// doGuided is do with guided claims, as the linears take them: a thread
// takes half of what is left of its own share, then half of that, down
// to a grain, one stream from the front as before, so that at the end
// only small claims are left for the other thread to take. With claims of a quarter share each, the last claim a
// thread took could leave the other waiting for most of it. Measured at 2
// threads in one process, the two ways alternating (16 rounds, median
// ratio; Intel Xeon): decode (blocks of 64 tokens) Qwen3-0.6B 4-bit
// 1.047x, 1.060x and 1.091x in three runs, with its 6-bit classifier
// 1.033x, Llama-3.2-1B 4-bit 1.064x and 8-bit 1.053x, SmolLM2-135M 4-bit
// 1.053x and 1.094x; prefill of 128 tokens Qwen3-0.6B 1.041x,
// SmolLM2-135M 1.029x, Llama-3.2-1B 8-bit 1.072x.
func (p *pool) doGuided(t task, n, grain int, parallel bool, threads int) {
	p.guided = true
	p.doParts(t, n, grain, parallel, threads, partsPerThread)
	p.guided = false
}

// doParts is do with each thread's share taken in per parts.
func (p *pool) doParts(t task, n, grain int, parallel bool, threads, per int) {
	threads = min(threads, p.threads)
	if threads <= 1 || !parallel || n <= grain {
		t.run(0, 0, n)
		return
	}
	p.task, p.n, p.grain, p.active = t, n, max(grain, 1), threads
	chunks := (n + p.grain - 1) / p.grain
	for t := range threads {
		p.spans[t].v.Store(packSpan(chunks*t/threads, chunks*(t+1)/threads))
	}
	p.step = max(1, chunks/(threads*per))
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
	p.run(0)
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
	p.doGuided(&p.lin, job.N, linearGrain, job.T*job.N*job.K >= minParallelCost, threads)
}

// linears runs jobs (at most maxFuse) as one dispatch over their output
// rows laid end to end.
func (p *pool) linears(jobs []linearJob, threads int) {
	g := &p.group
	g.n, g.off[0] = len(jobs), 0
	cost := 0
	for i, j := range jobs {
		g.jobs[i] = j
		g.off[i+1] = g.off[i] + j.N
		cost += j.T * j.N * j.K
	}
	p.doGuided(g, g.off[g.n], linearGrain, cost >= minParallelCost, threads)
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
