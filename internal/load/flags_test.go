package load

import (
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
)

func TestLookaheadARLen(t *testing.T) {
	for spec, want := range map[string]int{"": 0, "3,5,3": 16, "2,1,1": 2, "4, 7, 2": 32} {
		got, err := LookaheadARLen(spec)
		if err != nil || got != want {
			t.Errorf("LookaheadARLen(%q) = %d, %v; want %d", spec, got, err, want)
		}
	}
	for _, spec := range []string{"3,5", "a,b,c", "1,5,3", "3,5,3,1"} {
		if _, err := LookaheadARLen(spec); err == nil {
			t.Errorf("LookaheadARLen(%q): no error", spec)
		}
	}
}

func TestFlagValues(t *testing.T) {
	if f, err := FloatActivations("float"); err != nil || !f {
		t.Errorf("float: %v %v", f, err)
	}
	if f, err := FloatActivations("int8"); err != nil || f {
		t.Errorf("int8: %v %v", f, err)
	}
	if _, err := FloatActivations("fp16"); err == nil {
		t.Error("fp16 accepted")
	}
	if err := CheckGGUFWeights("native"); err != nil {
		t.Error(err)
	}
	if err := CheckGGUFWeights("q4"); err == nil {
		t.Error("q4 accepted")
	}
}

func TestStateBudgetIsTheEngines(t *testing.T) {
	if int64(StateBudget) != engine.DefaultStateBudget {
		t.Errorf("load.StateBudget %d, engine.DefaultStateBudget %d", StateBudget, engine.DefaultStateBudget)
	}
}
