package engine

import (
	"testing"

	"github.com/aotlm/aotlm/internal/plan"
)

// TestRopeTableHoldsByValue: the angles of one RoPE step serve the next
// step whose frequencies and sections are equal in value, though held in
// another slice (as every step of a plan read from an artifact is), and
// no step that differs in pass, rows, scale, frequencies or sections.
func TestRopeTableHoldsByValue(t *testing.T) {
	first := &plan.Rope{InvFreq: []float64{1, 0.1, 0.01}, Sections: []int{2, 1}}
	var tab ropeTable
	key := ropeKey{pass: 7, rows: 1, scale: 1}
	if tab.holds(key, first) {
		t.Fatal("an empty table holds a step")
	}
	tab.key, tab.freq, tab.sections = key, first.InvFreq, first.Sections
	same := &plan.Rope{InvFreq: []float64{1, 0.1, 0.01}, Sections: []int{2, 1}}
	if !tab.holds(key, same) {
		t.Error("a step with equal frequencies in another slice is not held")
	}
	for name, c := range map[string]struct {
		key ropeKey
		r   *plan.Rope
	}{
		"pass":        {ropeKey{pass: 8, rows: 1, scale: 1}, same},
		"rows":        {ropeKey{pass: 7, rows: 2, scale: 1}, same},
		"scale":       {ropeKey{pass: 7, rows: 1, scale: 2}, same},
		"frequencies": {key, &plan.Rope{InvFreq: []float64{1, 0.1, 0.02}, Sections: []int{2, 1}}},
		"sections":    {key, &plan.Rope{InvFreq: []float64{1, 0.1, 0.01}, Sections: []int{1, 2}}},
		"no sections": {key, &plan.Rope{InvFreq: []float64{1, 0.1, 0.01}}},
	} {
		if tab.holds(c.key, c.r) {
			t.Errorf("a step of another %s is held", name)
		}
	}
}
