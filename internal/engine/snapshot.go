package engine

import (
	"fmt"
	"slices"

	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// A recurrent session's state cache keeps its state at the last pass
// boundaries, so that it can rewind there and drop a pass: a ring of
// state sets, one holding the state at the committed position. A pass
// reads that set and writes the one holding the oldest boundary (wkv7,
// causal_conv and gated_delta read their state from one set and write it
// to another at no extra cost; token_shift's rows and ssm_scan's state,
// updated in place, are copied first), and committing the pass makes it
// current. An uncommitted pass thus leaves the state as it was. One cache
// serves every recurrent family; a model whose only state is causal
// convolutions also keeps their input window (causalconv.go), which
// rebuilds the state at positions inside a pass.

const (
	// MinStateSnapshots is the fewest state sets a recurrent session keeps
	// by default, whatever their size: the committed position and the two
	// boundaries before it.
	MinStateSnapshots = 3
	// maxDefaultSnapshots is the most it keeps by default: the committed
	// position and 16 boundaries before it, a few decode steps back.
	maxDefaultSnapshots = 17
	// DefaultStateBudget bounds the bytes of the sets kept by default
	// (SessionOptions.StateBudget), unless MinStateSnapshots of them
	// exceed it already: a small state (RWKV-7, Qwen3.5's DeltaNet) gets
	// the most sets, one of 40-75 MB (Granite 4.0 H's Mamba2) gets a few.
	DefaultStateBudget = 128 << 20
)

// DefaultStateSnapshots returns how many state sets a recurrent session
// keeps when SessionOptions.StateSnapshots and StateBudget are 0, for a
// state of setBytes bytes: StateSnapshotsWithin(setBytes, 0).
func DefaultStateSnapshots(setBytes int64) int { return StateSnapshotsWithin(setBytes, 0) }

// StateSnapshotsWithin returns how many state sets of setBytes bytes a
// recurrent session keeps by default within budget bytes (0:
// DefaultStateBudget): as many as the budget holds, within
// [MinStateSnapshots, 17]; 0 for a model without state.
func StateSnapshotsWithin(setBytes, budget int64) int {
	if setBytes <= 0 {
		return 0
	}
	if budget <= 0 {
		budget = DefaultStateBudget
	}
	return int(min(max(budget/setBytes, MinStateSnapshots), maxDefaultSnapshots))
}

// stateSets resolves SessionOptions.StateSnapshots k and StateBudget
// budget for the plan's state slots.
func stateSets(slots []int, k int, budget int64) int {
	if k != 0 {
		return k
	}
	return StateSnapshotsWithin(4*sumSizes(slots), budget)
}

// sumSizes returns the sum of sizes.
func sumSizes(sizes []int) int64 {
	var n int64
	for _, v := range sizes {
		n += int64(v)
	}
	return n
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

// keepSnapshots sizes the ring to k sets (0: as many as budget holds,
// StateSnapshotsWithin; 1: the state is updated in place and rewinds only
// to 0, where it is, or inside the convolution window).
// steps are a plan's, which tell the ops of the slots.
func (r *recState) keepSnapshots(k int, budget int64, steps []plan.Step) error {
	if len(r.slots) == 0 {
		return nil
	}
	k = stateSets(sizes(r.slots), k, budget)
	if k < 1 || k > 64 {
		return fmt.Errorf("engine: %d state snapshots is outside [1, 64]", k)
	}
	sn := &r.snap
	sn.copyIn = make([]bool, len(r.slots))
	for _, st := range steps {
		if st.Op == op.TokenShift || st.Op == op.SSMScan {
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

// rebuild makes the state at pos current from the convolution window,
// written into a set other than the committed one when the ring has two,
// and drops the boundaries after pos; false when the window does not hold
// it, and then nothing changes.
func (r *recState) rebuild(pos int) bool {
	sn := &r.snap
	k := sn.cur
	for i := range sn.sets {
		if i != sn.cur && (k == sn.cur || sn.pos[i] < sn.pos[k]) {
			k = i
		}
	}
	if !r.conv.rewind(sn.sets[k], pos) {
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
// window rebuilds.
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
	msg := fmt.Sprintf("it keeps the state at 0 and at %v", r.points())
	if r.conv.keep > 0 {
		msg += "; its convolution window reaches " + r.conv.limit()
	}
	return fmt.Errorf("engine: a recurrent model's state cannot be rewound to %d (%s)", pos, msg)
}

// StateMemory is the memory a session's recurrent state takes: Sets
// copies of a SetBytes state (its state cache) and the convolution input
// window, ConvWindow bytes.
type StateMemory struct {
	SetBytes   int64 `json:"set_bytes"`
	Sets       int   `json:"sets"`
	ConvWindow int64 `json:"conv_window,omitempty"`
}

// Total is all of it.
func (m StateMemory) Total() int64 { return m.SetBytes*int64(m.Sets) + m.ConvWindow }

// PlanStateMemory returns the state memory of a session of p with a
// context of ctx positions, SessionOptions.StateSnapshots k and
// StateBudget budget.
func PlanStateMemory(p *plan.Plan, ctx, k int, budget int64) StateMemory {
	if len(p.State) == 0 {
		return StateMemory{}
	}
	h := convWindowSize(p, ctx)
	return StateMemory{SetBytes: 4 * sumSizes(p.State), Sets: stateSets(p.State, k, budget), ConvWindow: 4 * h}
}

// StateMemory returns the memory the session's recurrent state takes.
func (s *Session) StateMemory() StateMemory {
	r := &s.rec
	if len(r.slots) == 0 {
		return StateMemory{}
	}
	m := StateMemory{SetBytes: 4 * sumSizes(sizes(r.slots)), Sets: len(r.snap.sets)}
	for _, g := range r.conv.ring {
		m.ConvWindow += 4 * int64(len(g))
	}
	return m
}

// sizes returns the lengths of slots.
func sizes(slots [][]float32) []int {
	n := make([]int, len(slots))
	for i, v := range slots {
		n[i] = len(v)
	}
	return n
}
