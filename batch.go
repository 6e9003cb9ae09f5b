package aotlm

import (
	"sync"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
)

// minGather is the shortest time a pass waits for the decoding sessions
// that have not yet asked for their next token (see batcher); a variable
// for tests.
var minGather = 2 * time.Millisecond

// DecodeStats counts the decode passes that the sessions of a model ran
// while generating (Session.Generate): sessions generating at the same
// time share passes, one row each when they decode one token per pass and
// the rows of their guesses when a Strategy verifies them (Verify of the
// passes held such rows, VerifyRows of the rows), so Rows/Passes is the
// mean number of rows a pass advanced.
type DecodeStats struct {
	Passes     int64
	Rows       int64
	Verify     int64
	VerifyRows int64
}

// DecodeStats returns the model's decode pass counts so far (zero for a
// model whose sessions decode one pass each: a recurrent model, an
// artifact without a plan of several rows, another backend).
func (m *Model) DecodeStats() DecodeStats {
	if m.batch == nil {
		return DecodeStats{}
	}
	m.batch.mu.Lock()
	defer m.batch.mu.Unlock()
	return m.batch.stats
}

// batcher advances the sessions of one artifact that decode at the same
// time with one pass per step (engine.DecodeBatch: one row per session,
// the weights read once for all of them; engine.RunBatch when some of
// them verify guesses, a chain of rows each).
//
// A session joins while its Generate loop decodes and leaves when the
// loop ends. Its decode call queues the token (or a chain); the first
// caller of a step leads it: it waits until every member has queued its
// token (or the pass holds as many rows as it can), then runs the pass
// and hands each caller its logits, and the leadership to the first of
// the calls that queued meanwhile. A member that is slow to ask (a client
// that reads its stream slowly, a draft model drafting) is not waited for
// longer than the last pass took (at least minGather): the others go on
// without it. A pass takes the queued calls in order while their rows fit
// the largest pass; the rest wait for the next.
type batcher struct {
	eng     *engine.Engine
	maxRows int

	mu       sync.Mutex
	active   int           // members: sessions in a decode loop
	queue    []*decodeCall // tokens waiting for a pass, oldest first
	leading  bool          // a call is gathering or running a pass
	kick     chan struct{} // wakes the gathering leader
	lastPass time.Duration
	stats    DecodeStats

	// the leader's own (one leader at a time)
	timer    *time.Timer
	calls    []*decodeCall
	sessions []*engine.Session
	ids      []int
	chains   [][]int
}

// decodeCall is one session's request for its next pass; a session
// reuses its own. It feeds id and commits it, or, when chain is not nil,
// runs chain uncommitted and returns the logits of all its rows in rows.
type decodeCall struct {
	s      *engine.Session
	id     int
	chain  []int
	logits []float32
	rows   engine.Logits
	share  float64 // the call's share of its last pass (see sharedTarget.Share)
	err    error
	wake   chan bool // false: the pass ran; true: lead the next one
}

// size is the rows the call takes in a pass.
func (c *decodeCall) size() int {
	if c.chain != nil {
		return len(c.chain)
	}
	return 1
}

func newBatcher(eng *engine.Engine) *batcher {
	n := eng.MaxBatch()
	if n < 2 {
		return nil
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &batcher{eng: eng, maxRows: n, kick: make(chan struct{}, 1), timer: t}
}

func (b *batcher) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// join counts a session in a decode loop; leave ends that.
func (b *batcher) join() {
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
}

func (b *batcher) leave() {
	b.mu.Lock()
	b.active--
	b.mu.Unlock()
	b.poke()
}

// decode feeds c.id to c.s in the next pass and returns its logits.
func (b *batcher) decode(c *decodeCall) ([]float32, error) {
	c.chain = nil
	b.enqueue(c)
	return c.logits, c.err
}

// verify runs chain on c.s in the next pass, uncommitted, and returns
// the logits of all its rows.
func (b *batcher) verify(c *decodeCall, chain []int) (engine.Logits, error) {
	c.chain = chain
	b.enqueue(c)
	c.chain = nil
	return c.rows, c.err
}

// enqueue queues c for the next pass and returns when it ran.
func (b *batcher) enqueue(c *decodeCall) {
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.leading {
		b.mu.Unlock()
		b.poke()
		if !<-c.wake {
			return
		}
	} else {
		b.leading = true
		b.mu.Unlock()
	}
	b.lead()
}

// queuedRows is the rows of the queued calls; b.mu is held.
func (b *batcher) queuedRows() int {
	n := 0
	for _, c := range b.queue {
		n += c.size()
	}
	return n
}

// lead gathers the next pass, whose first call is the caller's, runs it
// and passes the leadership on.
func (b *batcher) lead() {
	b.mu.Lock()
	wait := max(b.lastPass, minGather)
	b.timer.Reset(wait)
	for len(b.queue) < b.active && b.queuedRows() < b.maxRows {
		b.mu.Unlock()
		timedOut := false
		select {
		case <-b.kick:
		case <-b.timer.C:
			timedOut = true
		}
		b.mu.Lock()
		if timedOut {
			break
		}
	}
	b.timer.Stop()
	n, rows := 1, b.queue[0].size()
	for n < len(b.queue) && rows+b.queue[n].size() <= b.maxRows {
		rows += b.queue[n].size()
		n++
	}
	b.calls = append(b.calls[:0], b.queue[:n]...)
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()

	verify := 0 // rows of chains (read before the callers go on)
	extra := rows - len(b.calls)
	for _, c := range b.calls {
		if c.chain != nil {
			verify += len(c.chain)
		}
		c.share = 1
		if extra > 0 {
			c.share = float64(len(b.calls)*(c.size()-1)) / float64(extra)
		}
	}
	start := time.Now()
	b.run()
	took := time.Since(start)
	for _, c := range b.calls[1:] {
		c.wake <- false
	}
	b.mu.Lock()
	b.lastPass = took
	b.stats.Passes++
	b.stats.Rows += int64(rows)
	if verify > 0 {
		b.stats.Verify++
		b.stats.VerifyRows += int64(verify)
	}
	if len(b.queue) == 0 {
		b.leading = false
		b.mu.Unlock()
		return
	}
	next := b.queue[0]
	b.mu.Unlock()
	next.wake <- true
}

// run decodes b.calls, in one pass when there are several; when the
// batched pass fails, each is decoded alone so that the error reaches only
// the session it concerns.
func (b *batcher) run() {
	chains := false
	for _, c := range b.calls {
		chains = chains || c.chain != nil
	}
	switch {
	case len(b.calls) == 1:
		b.calls[0].alone()
		return
	case !chains:
		b.sessions, b.ids = b.sessions[:0], b.ids[:0]
		for _, c := range b.calls {
			b.sessions, b.ids = append(b.sessions, c.s), append(b.ids, c.id)
		}
		logits, err := b.eng.DecodeBatch(b.sessions, b.ids)
		for i, c := range b.calls {
			if err != nil {
				c.alone()
				continue
			}
			c.logits, c.err = logits[i], nil
		}
		return
	}
	b.sessions, b.chains = b.sessions[:0], b.chains[:0]
	for _, c := range b.calls {
		chain := c.chain
		if chain == nil {
			chain = []int{c.id}
		}
		b.sessions, b.chains = append(b.sessions, c.s), append(b.chains, chain)
	}
	out, err := b.eng.RunBatch(b.sessions, b.chains)
	for i, c := range b.calls {
		switch {
		case err != nil:
			c.alone()
		case c.chain != nil:
			c.rows, c.err = out[i], nil
		default:
			// a plain call keeps its row, as Decode does
			c.logits, c.err = out[i].Row(0), c.s.Commit(allRows[:1])
		}
	}
}

// alone runs the call in a pass of its own.
func (c *decodeCall) alone() {
	if c.chain == nil {
		c.logits, c.err = c.s.Decode(c.id)
		return
	}
	c.rows, c.err = c.s.Run(&engine.Pass{IDs: c.chain, Logits: firstRows(len(c.chain))})
}

// allRows lists the rows of a pass, 0, 1, ...: a chain's logits rows.
var allRows = countTo(256)

// firstRows returns the rows 0..n-1.
func firstRows(n int) []int {
	if n <= len(allRows) {
		return allRows[:n]
	}
	return countTo(n)
}

func countTo(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}
