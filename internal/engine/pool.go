package engine

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/aotlm/aotlm/internal/limits"
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
//
// A dispatch ends when every grain of it is done, not when every worker
// has checked in: a worker that another process keeps off its core (a
// busy machine) and that has not claimed a part in time is not waited
// for, the others take its share. A worker that claimed a part and then
// lost its core does hold the dispatch up; when such waits make the
// dispatches slower than the caller would have been alone, the pool
// benches a thread (see bench) so that the others run on the cores that
// are free.
type pool struct {
	threads int // workers, counting the caller
	task    task
	n       int
	grain   int
	// word is the generation of the current dispatch (low 32 bits) and
	// the threads taking part in it (high 32 bits), published together.
	word atomic.Uint64
	done atomic.Int64 // grains of the current dispatch run to the end
	// spans[t] is thread t's share of the current dispatch not yet
	// claimed, in grains (see run); step is the grains a thread claims
	// from its own share at once.
	spans []span
	step  atomic.Int32
	// guided: a thread claims half of what is left of its own share at
	// a time (at least a grain) instead of step (doGuided).
	guided  atomic.Bool
	stop    atomic.Bool
	workers []*worker
	lin     linearJob // the current linear, kept here so dispatch allocates nothing
	group   linearGroup
	bench   bench
	// startBench is the threads to leave out from the start, found by
	// sampleStart once the system has told (-1 until then); the caller
	// takes it at its next dispatch while bench.pending.
	startBench atomic.Int32
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

// beforeClaim, when set (by tests), runs on a worker between its seeing
// a dispatch and its first claim: a worker held there is one that the
// system keeps off its core.
var beforeClaim atomic.Pointer[func(w int)]

func newPool(threads int) *pool {
	p := &pool{threads: max(threads, 1)}
	p.spans = make([]span, p.threads)
	p.bench.period = benchBase
	for i := 1; i < p.threads; i++ {
		w := &worker{id: i, wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.loop(w, uint32(p.word.Load()))
	}
	return p
}

// loop is worker w's life; last is the generation at its creation (read
// before the goroutine starts, so a dispatch that comes first is not
// missed). A worker spins for the next dispatch only after one it took
// part in; one left out (benched, or a session on fewer threads) parks
// at once, so that it does not take a core that another process or the
// other workers need.
func (p *pool) loop(w *worker, last uint32) {
	spin := true
	for {
		spins := 0
		for uint32(p.word.Load()) == last {
			spins++
			if spin && spins < spinLimit {
				if spins%4096 == 0 {
					runtime.Gosched()
				}
				continue
			}
			w.sleeping.Store(true)
			if uint32(p.word.Load()) == last {
				<-w.wake
			}
			w.sleeping.Store(false)
			spins = 0
		}
		if p.stop.Load() {
			return
		}
		word := p.word.Load()
		last = uint32(word)
		spin = w.id < int(word>>32)
		if !spin {
			continue // not asked to take part in this dispatch
		}
		if f := beforeClaim.Load(); f != nil {
			(*f)(w.id)
		}
		p.run(w.id)
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
// none is left, and returns the grains it ran. A worker late for a
// dispatch may claim parts of the next one: the claims are the only way
// into a dispatch, and each reads the task after its compare-and-swap.
func (p *pool) run(w int) int {
	ran := 0
	own := &p.spans[w].v
	for {
		v := own.Load()
		lo, hi := unpackSpan(v)
		if lo >= hi {
			break
		}
		step := int(p.step.Load())
		if p.guided.Load() {
			step = max(1, (hi-lo+1)/2)
		}
		next := min(lo+step, hi)
		if own.CompareAndSwap(v, packSpan(next, hi)) {
			p.task.run(w, lo*p.grain, min(next*p.grain, p.n))
			p.done.Add(int64(next - lo))
			ran += next - lo
		}
	}
	for {
		victim, most := -1, 0
		for t := range p.spans {
			if lo, hi := unpackSpan(p.spans[t].v.Load()); hi-lo > most {
				victim, most = t, hi-lo
			}
		}
		if victim < 0 {
			return ran
		}
		s := &p.spans[victim].v
		v := s.Load()
		lo, hi := unpackSpan(v)
		if lo >= hi {
			continue
		}
		take := max(1, min(int(p.step.Load()), (hi-lo)/2))
		if s.CompareAndSwap(v, packSpan(lo, hi-take)) {
			p.task.run(w, (hi-take)*p.grain, min(hi*p.grain, p.n))
			p.done.Add(int64(take))
			ran += take
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
	p.guided.Store(true)
	p.doParts(t, n, grain, parallel, threads, partsPerThread)
	p.guided.Store(false)
}

// doParts is do with each thread's share taken in per parts. It runs on
// fewer threads than asked while the pool benches some (bench).
func (p *pool) doParts(t task, n, grain int, parallel bool, threads, per int) {
	threads = min(threads, p.threads)
	if threads <= 1 || !parallel || n <= grain {
		t.run(0, 0, n)
		return
	}
	if p.bench.pending {
		if v := p.startBench.Load(); v >= 0 {
			p.bench.pending = false
			p.bench.start(int(v), p.threads, time.Now())
		}
	}
	if p.bench.benched > 0 {
		threads = p.bench.admit(threads, time.Now())
		if threads <= 1 {
			t.run(0, 0, n)
			return
		}
	}
	p.task, p.n, p.grain = t, n, max(grain, 1)
	chunks := (n + p.grain - 1) / p.grain
	p.done.Store(0)
	for t := range p.spans {
		if t < threads {
			p.spans[t].v.Store(packSpan(chunks*t/threads, chunks*(t+1)/threads))
		} else {
			p.spans[t].v.Store(0)
		}
	}
	p.step.Store(int32(max(1, chunks/(threads*per))))
	p.word.Store(uint64(uint32(p.word.Load())+1) | uint64(threads)<<32)
	for _, w := range p.workers[:threads-1] {
		if w.sleeping.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	start := time.Now()
	ran := p.run(0)
	own := time.Now()
	end := own
	if p.done.Load() != int64(chunks) {
		for spins := 1; p.done.Load() != int64(chunks); spins++ {
			if spins%4096 == 0 {
				runtime.Gosched()
			}
		}
		end = time.Now()
	}
	p.task = nil
	p.bench.record(end.Sub(start), alone(own.Sub(start), ran, chunks), p.threads, end)
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

// sampleStart finds, in the background, how many CPUs other processes
// keep busy now (limits.BusyCPUs over startSample) and has the pool leave
// that many threads out of its first dispatches when some CPU is free
// (when every CPU is busy, each thread gets its share of them all, and the
// pool starts with all). The left-out threads come back to try as benched
// ones do (bench).
func (p *pool) sampleStart() {
	if p.threads <= 1 {
		return
	}
	p.startBench.Store(-1)
	p.bench.pending = true
	go func() {
		busy, allowed := limits.BusyCPUs(startSample)
		if busy >= allowed {
			busy = 0
		}
		p.startBench.Store(int32(busy))
	}()
}

// startSample is how long sampleStart watches the CPUs: ten of the
// system's 100 Hz ticks a CPU.
const startSample = 100 * time.Millisecond

// close stops the workers.
func (p *pool) close() {
	if p.stop.Swap(true) {
		return
	}
	p.word.Store(uint64(uint32(p.word.Load()) + 1))
	for _, w := range p.workers {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}
