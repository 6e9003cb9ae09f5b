package engine

import (
	"errors"
	"fmt"
)

// DecodeBatch feeds ids[i] to sessions[i] at that session's committed
// position, all of them in one pass of len(sessions) rows through the
// smallest plan that holds them, and commits each: the linear steps read
// every weight once for all the rows, while row i attends only to
// sessions[i]'s committed cache and itself, and its keys and values go
// into sessions[i]'s cache. It returns each session's logits after its
// token, valid until that session's next pass; they equal what
// sessions[i].Decode(ids[i]) returns up to the summation order of the
// products.
//
// The sessions must be distinct sessions of e, none of them in use
// elsewhere during the call, and of a model without recurrent state;
// there may be at most as many as the largest plan has rows. The pass
// runs on the worker threads of the session with the largest context
// (the first of them), in its arena. On error nothing changes.
func (e *Engine) DecodeBatch(sessions []*Session, ids []int) ([][]float32, error) {
	n := len(sessions)
	if n == 0 {
		return nil, errors.New("engine: a batch of no sessions")
	}
	if len(ids) != n {
		return nil, fmt.Errorf("engine: %d ids for a batch of %d sessions", len(ids), n)
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	if e.encoder {
		return nil, ErrEncoder
	}
	var prog *program
	for _, p := range e.plans {
		if p.p.Rows >= n && p.selCap >= n {
			prog = p
			break
		}
	}
	if prog == nil {
		return nil, fmt.Errorf("engine: a batch of %d sessions: the artifact's plans decode at most %d at once", n, e.MaxBatch())
	}
	driver, err := e.checkBatch(sessions, ids)
	if err != nil {
		return nil, err
	}
	for i, s := range sessions {
		driver.rowPos[i] = s.pos
		driver.batchOff[i] = 0
	}
	driver.chain, driver.mask, driver.batch = true, nil, sessions
	e.passMu.Lock()
	out := driver.exec(prog, ids, driver.selAll[:n])
	e.passMu.Unlock()
	driver.batch = nil
	logits := make([][]float32, n)
	for i, s := range sessions {
		s.growLogits(out.vocab)
		copy(s.logits, out.Row(i))
		logits[i] = s.logits
		if s.rotNext != nil {
			s.rotNext[s.pos+1] = s.rotNext[s.pos] + 1
		}
		s.noteWritten(1)
		s.pos++
		s.pending = 0
		s.hidProg = nil // the pass's hidden rows are in the driver's arena, mixed
	}
	return logits, nil
}

// growLogits makes s.logits n long, reusing its memory when it can.
func (s *Session) growLogits(n int) {
	if cap(s.logits) < n {
		s.logits = make([]float32, n)
	}
	s.logits = s.logits[:n]
}

// checkBatch refuses a batch of sessions that cannot share a pass, with
// the first row id of each (ids[i] for sessions[i]), and returns the
// session that drives the pass: the one with the largest context.
func (e *Engine) checkBatch(sessions []*Session, ids []int) (*Session, error) {
	driver := sessions[0]
	for i, s := range sessions {
		switch {
		case s == nil:
			return nil, fmt.Errorf("engine: batch session %d is nil", i)
		case s.e != e:
			return nil, fmt.Errorf("engine: batch session %d belongs to another engine", i)
		case s.closed:
			return nil, fmt.Errorf("engine: batch session %d: %w", i, ErrClosed)
		case s.Recurrent():
			return nil, errors.New("engine: a model with recurrent state decodes its sessions one at a time, not in a batch")
		case s.pos >= s.ctx:
			return nil, fmt.Errorf("engine: batch session %d: %w: %d positions used, context is %d", i, ErrContextFull, s.pos, s.ctx)
		case ids[i] < 0 || ids[i] >= e.vocab:
			return nil, fmt.Errorf("engine: batch session %d: id %d is outside the vocabulary [0, %d)", i, ids[i], e.vocab)
		}
		for _, t := range sessions[:i] {
			if t == s {
				return nil, fmt.Errorf("engine: session %d appears twice in the batch", i)
			}
		}
		if s.ctx > driver.ctx {
			driver = s // its attention scratch holds the longest row
		}
	}
	return driver, nil
}

// RunBatch runs a chain of rows for each session in one pass: ids[i]
// are fed to sessions[i] at its committed position and the ones after
// it, row j of the chain seeing sessions[i]'s committed cache and rows
// 0..j of its own chain, as Session.Run of a chain pass without Logits
// would. The linear steps read every weight once for all the rows of all
// the chains. Nothing is committed: each session holds its chain as its
// last pass, to keep a prefix of with Commit (or drop); the logits of
// every row of chain i are in the i-th Logits, valid until that session's
// next pass. They equal what sessions[i].Run returns up to the summation
// order of the products.
//
// The sessions must be distinct sessions of e, none of them in use
// elsewhere during the call, and of a model without recurrent state; the
// chains must fit their sessions' caches and hold at most MaxBatch rows
// in all. The pass runs on the worker threads of the session with the
// largest context, in its arena. On error nothing changes.
func (e *Engine) RunBatch(sessions []*Session, ids [][]int) ([]Logits, error) {
	n := len(sessions)
	if n == 0 {
		return nil, errors.New("engine: a batch of no sessions")
	}
	if len(ids) != n {
		return nil, fmt.Errorf("engine: %d chains for a batch of %d sessions", len(ids), n)
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	rows, first := 0, make([]int, n)
	for i, c := range ids {
		if len(c) == 0 {
			return nil, fmt.Errorf("engine: batch session %d has a chain of no rows", i)
		}
		rows += len(c)
		first[i] = c[0]
	}
	var prog *program
	for _, p := range e.plans {
		if p.p.Rows >= rows && p.selCap >= rows {
			prog = p
			break
		}
	}
	if prog == nil {
		return nil, fmt.Errorf("engine: a batch of %d rows: the artifact's plans return the logits of at most %d at once", rows, e.MaxBatch())
	}
	driver, err := e.checkBatch(sessions, first)
	if err != nil {
		return nil, err
	}
	all := make([]int, 0, rows)
	for i, s := range sessions {
		if err := s.checkIDs(ids[i]); err != nil {
			return nil, fmt.Errorf("engine: batch session %d: %w", i, err)
		}
		all = append(all, ids[i]...)
	}
	// the row-to-session list of the pass: a session once per row of its
	// chain, the row at its offset in the chain
	members := make([]*Session, 0, rows)
	for i, s := range sessions {
		for j := range ids[i] {
			driver.rowPos[len(members)] = s.pos + j
			driver.batchOff[len(members)] = j
			members = append(members, s)
		}
	}
	driver.chain, driver.mask, driver.batch = true, nil, members
	e.passMu.Lock()
	out := driver.exec(prog, all, driver.selAll[:rows])
	e.passMu.Unlock()
	driver.batch = nil
	logits := make([]Logits, n)
	row := 0
	for i, s := range sessions {
		T := len(ids[i])
		s.growLogits(T * out.vocab)
		copy(s.logits, out.data[row*out.vocab:(row+T)*out.vocab])
		row += T
		logits[i] = Logits{data: s.logits, vocab: out.vocab}
		shift := s.rotShift()
		for j := range T {
			s.rowPos[j] = s.pos + j
			if s.rotNext != nil {
				s.passNext[j] = s.pos + j + shift + 1
			}
		}
		s.chain, s.mask = true, nil
		s.noteWritten(T)
		s.pending = T
		s.pendIDs = s.pendIDs[:0]
		s.hidProg = nil // the pass's hidden rows are in the driver's arena, mixed
	}
	return logits, nil
}

// batchAttention sets s.attnRows to the rows of a batched pass's attention
// step over layer l: row t is a one-row pass of s.batch[t] at its committed
// position plus s.batchOff[t] (its offset in that session's chain, whose
// earlier rows the store before the attention wrote), reading its row of
// the step's buffers (a's out, q, k and v, the query rows qcols wide) and
// that session's cache.
func (s *Session) batchAttention(a *attnArgs, l, qcols int) {
	HE, GE := a.H*a.E, a.G*a.E
	s.attnRows = s.attnRows[:0]
	for t, bs := range s.batch {
		r := attnArgs{out: a.out[t*HE : (t+1)*HE], q: a.q[t*qcols : t*qcols+HE],
			C: a.C,
			T: 1, pos: bs.pos + s.batchOff[t], H: a.H, G: a.G, E: a.E, scale: a.scale, window: a.window}
		if a.k != nil { // nil: a shared_attention step, which stores nothing
			r.k, r.v = a.k[t*GE:(t+1)*GE], a.v[t*GE:(t+1)*GE]
		}
		bs.cacheLayer(&r, l)
		s.attnRows = append(s.attnRows, r)
	}
}

// MaxBatch is the most sessions DecodeBatch takes at once: the rows of
// the largest plan that returns the logits of all its rows, and 1 for a
// model with recurrent state (whose sessions decode one at a time).
func (e *Engine) MaxBatch() int {
	if len(e.plans[0].p.State) > 0 {
		return 1
	}
	n := 1
	for _, p := range e.plans {
		n = max(n, min(p.p.Rows, p.selCap))
	}
	return n
}
