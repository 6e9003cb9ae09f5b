package engine

import (
	"testing"

	"github.com/aotlm/aotlm/internal/plan"
)

// TestBindingTableComplete: every layout family plan knows has the
// engine's entry, with a view for each form the family has and the
// kernels bound by it.
func TestBindingTableComplete(t *testing.T) {
	for _, k := range plan.LayoutKinds() {
		b := weightBindings[k]
		if b == nil {
			t.Errorf("layout family %s: no engine entry", k.Scheme())
			continue
		}
		for _, packed := range []bool{false, true} {
			l := plan.WeightLayout{Kind: k, Packed: packed}
			switch k {
			case plan.LayoutLPBQ, plan.LayoutQ4, plan.LayoutQ4K:
				l.Block = plan.PackBlock
			}
			if got, err := plan.ParseLayout(l.Tag()); err != nil || got.Packed != packed {
				continue // the family has no such form
			}
			if packed && b.packed == nil || !packed && (b.plain == nil || b.bindPlain == nil) {
				t.Errorf("layout %s: no engine view", l.Tag())
			}
		}
	}
	if len(weightBindings) != len(plan.LayoutKinds()) {
		t.Errorf("%d engine entries for %d layout families", len(weightBindings), len(plan.LayoutKinds()))
	}
}
