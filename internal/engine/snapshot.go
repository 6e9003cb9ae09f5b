package engine

import (
	"fmt"
	"slices"

	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// A recurrent session keeps its state at the last few pass boundaries, so
// that it can rewind there: a ring of state sets, one holding the state at
// the committed position. A pass reads that set and writes the one holding
// the oldest boundary (the recurrent ops read their state from one set and
// write it to another at no extra cost; token_shift's rows are copied
// first), and committing the pass makes it current. An uncommitted pass
// thus leaves the state as it was.

// DefaultStateSnapshots is how many pass boundaries' states a recurrent
// session keeps when SessionOptions.StateSnapshots is 0: the committed
// position and the two boundaries before it.
const DefaultStateSnapshots = 3

// stateBytes is the memory the state sets of a session take: the plan's
// slots times the sets kept (k as SessionOptions.StateSnapshots).
func stateBytes(slots []int, k int) int64 {
	if len(slots) == 0 {
		return 0
	}
	if k <= 0 {
		k = DefaultStateSnapshots
	}
	var n int64
	for _, v := range slots {
		n += int64(v)
	}
	return 4 * n * int64(k)
}

// snapshots is the ring of state sets.
type snapshots struct {
	sets [][][]float32
	pos  []int // the committed position whose state each set holds; -1: none
	cur  int   // the set of the committed position
	next int   // the set the running pass writes
	// copyIn marks the slots whose op updates its state in place: they are
	// copied into the pass's set before it runs.
	copyIn []bool
}

// keepSnapshots sizes the ring to k sets (0: DefaultStateSnapshots; 1:
// the state is updated in place and rewinds only to 0 or where it is).
// steps are a plan's, which tell the ops of the slots.
func (r *recState) keepSnapshots(k int, steps []plan.Step) error {
	if len(r.slots) == 0 {
		return nil
	}
	if k == 0 {
		k = DefaultStateSnapshots
	}
	if k < 1 || k > 64 {
		return fmt.Errorf("engine: %d state snapshots is outside [1, 64]", k)
	}
	sn := &r.snap
	sn.copyIn = make([]bool, len(r.slots))
	for _, st := range steps {
		if st.Op.Stateful() && st.Op != op.WKV7 && st.Op != op.CausalConv && st.Op != op.GatedDelta {
			sn.copyIn[st.Slot] = true
		}
	}
	for len(sn.sets) < k {
		set := make([][]float32, len(r.slots))
		for i, s := range r.slots {
			set[i] = make([]float32, len(s))
		}
		sn.sets, sn.pos = append(sn.sets, set), append(sn.pos, -1)
	}
	return nil
}

// begin points the pass at its sets: it reads the current one and writes
// the one of the oldest boundary.
func (r *recState) begin() {
	sn := &r.snap
	if len(r.slots) == 0 || len(sn.sets) < 2 {
		return
	}
	next := -1
	for k := range sn.sets {
		if k != sn.cur && (next < 0 || sn.pos[k] < sn.pos[next]) {
			next = k
		}
	}
	sn.next, sn.pos[next] = next, -1
	r.prev, r.slots = sn.sets[sn.cur], sn.sets[next]
	for i, c := range sn.copyIn {
		if c {
			copy(r.slots[i], r.prev[i])
		}
	}
}

// commit makes the state the last pass wrote the one at position pos.
func (r *recState) commit(pos int) {
	sn := &r.snap
	if len(sn.sets) >= 2 {
		sn.cur = sn.next
	}
	sn.pos[sn.cur] = pos
	r.point(sn.cur)
}

// point makes set k the one passes read and write until the next begin.
func (r *recState) point(k int) {
	r.slots = r.snap.sets[k]
	r.prev = r.slots
}

// reset zeroes the state: position 0; the other boundaries are dropped.
func (r *recState) reset() {
	sn := &r.snap
	for i := range sn.pos {
		sn.pos[i] = -1
	}
	for _, s := range sn.sets[sn.cur] {
		clear(s)
	}
	sn.pos[sn.cur] = 0
	r.point(sn.cur)
}

// restore makes the state at position pos current, dropping the
// boundaries after it; false when no set holds it.
func (r *recState) restore(pos int) bool {
	sn := &r.snap
	k := slices.Index(sn.pos, pos)
	if k < 0 || (len(sn.sets) < 2 && k != sn.cur) {
		return false
	}
	for i, p := range sn.pos {
		if p > pos {
			sn.pos[i] = -1
		}
	}
	sn.cur = k
	r.point(k)
	return true
}

// points returns the positions the state can be rewound to, ascending.
func (r *recState) points() []int {
	var p []int
	for _, v := range r.snap.pos {
		if v >= 0 {
			p = append(p, v)
		}
	}
	slices.Sort(p)
	return p
}

// rebuild makes the state at pos current from the convolution history or
// a pass-start copy, written into a set other than the committed one when
// the ring has two, and drops the boundaries after pos; false when neither
// holds it, and then nothing changes.
func (r *recState) rebuild(pos int) bool {
	sn := &r.snap
	k := sn.cur
	for i := range sn.sets {
		if i != sn.cur && (k == sn.cur || sn.pos[i] < sn.pos[k]) {
			k = i
		}
	}
	if !r.conv.rewind(sn.sets[k], pos) && !r.copies.restore(sn.sets[k], pos) {
		return false
	}
	for i, p := range sn.pos {
		if p > pos {
			sn.pos[i] = -1
		}
	}
	sn.cur, sn.pos[k] = k, pos
	r.point(k)
	return true
}

// rewindState brings a recurrent session's state to position pos: 0, a
// kept boundary, where it is (dropping an uncommitted pass, which only a
// ring of two sets or more leaves undone), or a position the convolution
// history or the pass-start copies rebuild.
func (s *Session) rewindState(pos int) error {
	r := &s.rec
	switch {
	case pos == 0:
		r.reset()
		return nil
	case pos == s.pos && s.pending == 0:
		return nil
	case (s.pending == 0 || len(r.snap.sets) >= 2) && r.restore(pos):
		return nil
	case r.rebuild(pos):
		return nil
	}
	return fmt.Errorf("engine: a recurrent model's state cannot be rewound to %d (it keeps the state at 0 and at %v; %s)", pos, r.points(), r.limit())
}

// limit says how far the convolution history or the pass-start copies
// rewind, for errors.
func (r *recState) limit() string {
	if r.copies.keep > 0 {
		return r.copies.limit()
	}
	return r.conv.limit()
}
