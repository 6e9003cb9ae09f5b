package engine

import "sync"

// pool is a fixed set of worker goroutines that split a linear's output
// columns. Dispatching a job allocates nothing: the job lives in the pool
// and workers receive only column ranges.
type pool struct {
	threads int
	work    chan [2]int
	wg      sync.WaitGroup
	job     linearJob
}

// minParallelCost is the multiply-adds below which a job runs inline.
const minParallelCost = 1 << 15

func newPool(threads int) *pool {
	p := &pool{threads: max(threads, 1)}
	if p.threads > 1 {
		p.work = make(chan [2]int, p.threads)
		for range p.threads - 1 {
			go p.worker()
		}
	}
	return p
}

func (p *pool) worker() {
	for r := range p.work {
		p.job.run(r[0], r[1])
		p.wg.Done()
	}
}

// linear runs job over its N output columns, split across the workers
// when it is large enough.
func (p *pool) linear(job linearJob) {
	n := job.N
	if p.threads <= 1 || job.T*job.N*job.K < minParallelCost || n < 2 {
		job.run(0, n)
		return
	}
	p.job = job
	parts := min(p.threads, n)
	chunk := (n + parts - 1) / parts
	first := min(chunk, n)
	for lo := first; lo < n; lo += chunk {
		p.wg.Add(1)
		p.work <- [2]int{lo, min(lo+chunk, n)}
	}
	p.job.run(0, first)
	p.wg.Wait()
}

// close stops the workers.
func (p *pool) close() {
	if p.work != nil {
		close(p.work)
		p.work = nil
	}
}
