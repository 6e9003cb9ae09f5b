package aotlm_test

import (
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestStateBudgetOption: Options.StateBudget reaches every session of a
// model with recurrent state (the qwen35 fixture): a budget of 4 state
// sets keeps 4, the default keeps the engine's default, and a negative
// budget is refused.
func TestStateBudgetOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qwen35.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/qwen35"), path, compile.Options{ARLens: []int{8}, Ctx: 64}); err != nil {
		t.Fatal(err)
	}
	sets := func(budget int64) (engine.StateMemory, error) {
		m, err := aotlm.Open(path, aotlm.Options{Threads: 1, IDsOnly: true, StateBudget: budget})
		if err != nil {
			return engine.StateMemory{}, err
		}
		defer m.Close()
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		es, ok := s.Sequence().(*engine.Session)
		if !ok {
			t.Fatalf("the session's sequence is a %T", s.Sequence())
		}
		return es.StateMemory(), nil
	}
	def, err := sets(0)
	if err != nil {
		t.Fatal(err)
	}
	if def.Sets != engine.DefaultStateSnapshots(def.SetBytes) {
		t.Errorf("default: %+v", def)
	}
	four, err := sets(4 * def.SetBytes)
	if err != nil {
		t.Fatal(err)
	}
	if four.Sets != 4 {
		t.Errorf("a budget of 4 sets: %+v", four)
	}
	if _, err := sets(-1); err == nil {
		t.Error("a negative state budget was accepted")
	}
}
