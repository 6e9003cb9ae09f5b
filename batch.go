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
// while generating one token per pass (Session.Generate without a
// decoding strategy): sessions generating at the same time share passes,
// one row each, so Rows/Passes is the mean number of sessions a pass
// advanced.
type DecodeStats struct {
	Passes int64
	Rows   int64
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
// the weights read once for all of them).
//
// A session joins while its Generate loop decodes one token per pass and
// leaves when the loop ends. Its decode call queues the token; the first
// caller of a step leads it: it waits until every member has queued its
// token (or the pass holds as many rows as it can), then runs the pass
// and hands each caller its logits, and the leadership to the first of
// the calls that queued meanwhile. A member that is slow to ask (a client
// that reads its stream slowly) is not waited for longer than the last
// pass took (at least minGather): the others go on without it.
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
}

// decodeCall is one session's request for its next pass; a session
// reuses its own.
type decodeCall struct {
	s      *engine.Session
	id     int
	logits []float32
	err    error
	wake   chan bool // false: the pass ran; true: lead the next one
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
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.leading {
		b.mu.Unlock()
		b.poke()
		if !<-c.wake {
			return c.logits, c.err
		}
	} else {
		b.leading = true
		b.mu.Unlock()
	}
	b.lead()
	return c.logits, c.err
}

// lead gathers the next pass, whose first call is the caller's, runs it
// and passes the leadership on.
func (b *batcher) lead() {
	b.mu.Lock()
	wait := max(b.lastPass, minGather)
	b.timer.Reset(wait)
	for len(b.queue) < min(b.active, b.maxRows) {
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
	n := min(len(b.queue), b.maxRows)
	b.calls = append(b.calls[:0], b.queue[:n]...)
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()

	start := time.Now()
	b.run()
	took := time.Since(start)
	for _, c := range b.calls[1:] {
		c.wake <- false
	}
	b.mu.Lock()
	b.lastPass = took
	b.stats.Passes++
	b.stats.Rows += int64(len(b.calls))
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
	if len(b.calls) == 1 {
		c := b.calls[0]
		c.logits, c.err = c.s.Decode(c.id)
		return
	}
	b.sessions, b.ids = b.sessions[:0], b.ids[:0]
	for _, c := range b.calls {
		b.sessions, b.ids = append(b.sessions, c.s), append(b.ids, c.id)
	}
	logits, err := b.eng.DecodeBatch(b.sessions, b.ids)
	for i, c := range b.calls {
		if err != nil {
			c.logits, c.err = c.s.Decode(c.id)
			continue
		}
		c.logits, c.err = logits[i], nil
	}
}
