package plan

import (
	"encoding/json"
	"testing"
)

// TestRopeScaleValid checks that a rope magnitude round-trips through the
// manifest JSON and validates, and that an absent one stays absent.
func TestRopeScaleValid(t *testing.T) {
	for _, s := range []float64{0, 1, 1.19, 0.5} {
		p := handPlan()
		p.Steps[2].Rope.Scale = s
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q Plan
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("scale %v: %v", s, err)
		}
		if q.Steps[2].Rope.Scale != s {
			t.Fatalf("scale %v read back as %v", s, q.Steps[2].Rope.Scale)
		}
	}
}
