package engine

import (
	"fmt"
	"slices"

	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// A model with a Mamba2 scan (ssm_scan) cannot rebuild an earlier state
// from a window of inputs, as causal convolutions do. Its session instead
// copies every state slot at the start of each pass, so it can rewind to
// one of the last pass boundaries and drop a pass. The copies are bounded
// in bytes: snapshotBudget in all, at most maxSnapshots of them; a model
// whose state exceeds the budget keeps none and rewinds only to 0. The
// budget admits one or two copies of a Granite 4.0 H state (40-75 MB): a
// copy per pass moves about as many bytes as the scan itself.
const (
	snapshotBudget = 128 << 20
	maxSnapshots   = 16
)

// stateSnapshots is a ring of copies of the state slots, by position,
// taken at pass starts on top of the ring of state sets (snapshot.go),
// which keeps only the last few boundaries.
type stateSnapshots struct {
	keep int           // snapshots kept at most; 0: none
	pos  []int         // per entry: the position it holds, -1 when empty
	data [][][]float32 // per entry: a copy of every slot (allocated on first use)
	next int           // the entry the next new snapshot overwrites
}

// newStateSnapshots sizes the ring for the state slots of p when it has
// an ssm_scan step, and keeps none otherwise.
func newStateSnapshots(p *plan.Plan) stateSnapshots {
	if !slices.ContainsFunc(p.Steps, func(st plan.Step) bool { return st.Op == op.SSMScan }) {
		return stateSnapshots{}
	}
	floats := 0
	for _, n := range p.State {
		floats += n
	}
	if floats == 0 {
		return stateSnapshots{}
	}
	keep := min(maxSnapshots, snapshotBudget/(4*floats))
	if keep < 1 {
		return stateSnapshots{}
	}
	s := stateSnapshots{keep: keep, pos: make([]int, keep), data: make([][][]float32, keep)}
	for i := range s.pos {
		s.pos[i] = -1
	}
	return s
}

// take records slots as the state at pos, the start of a pass. Entries
// past pos belong to positions since rewound and are dropped.
func (s *stateSnapshots) take(slots [][]float32, pos int) {
	if s.keep == 0 {
		return
	}
	at := -1
	for i, p := range s.pos {
		switch {
		case p == pos:
			at = i
		case p > pos:
			s.pos[i] = -1
		}
	}
	if at < 0 {
		at = s.next
		s.next = (s.next + 1) % s.keep
	}
	if s.data[at] == nil {
		s.data[at] = make([][]float32, len(slots))
		for j, v := range slots {
			s.data[at][j] = make([]float32, len(v))
		}
	}
	for j, v := range slots {
		copy(s.data[at][j], v)
	}
	s.pos[at] = pos
}

// restore sets slots to the state recorded at pos and reports whether
// there is one; on false nothing changes.
func (s *stateSnapshots) restore(slots [][]float32, pos int) bool {
	for i, p := range s.pos {
		if p == pos && pos >= 0 {
			for j, v := range slots {
				copy(v, s.data[i][j])
			}
			for k, q := range s.pos {
				if q > pos {
					s.pos[k] = -1
				}
			}
			return true
		}
	}
	return false
}

// limit says where a rewind may go, for errors.
func (s *stateSnapshots) limit() string {
	if s.keep == 0 {
		return "only to 0"
	}
	return fmt.Sprintf("only to 0 or to the start of one of the last %d passes", s.keep)
}
