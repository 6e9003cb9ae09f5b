package decoding_test

import (
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestCodegenStrategies compiles the codegen2 fixture (f32 cache, AR-16
// plans) and decodes its reference tokens greedily, plainly and through
// each strategy, in hybrid and kv modes: every run gives the 16 greedy ids
// of the fixture's float64 transcription of HF's CodeGen code.
func TestCodegenStrategies(t *testing.T) {
	ref := testutil.ReadArchReference(t, "codegen2")
	m := loadModel(t, testutil.Path(t, "arch/codegen2"))
	e := compileKV(t, m, "f32", 16, 96)
	for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
		got, _ := generate(t, e, mode, ref.Tokens, len(ref.Greedy), nil, sample.Params{})
		if !slices.Equal(got, ref.Greedy) {
			t.Fatalf("%v, plain: greedy %v, reference %v", mode, got, ref.Greedy)
		}
		for name, st := range strategies(e, mode) {
			got, stats := generate(t, e, mode, ref.Tokens, len(ref.Greedy), st, sample.Params{})
			if !slices.Equal(got, ref.Greedy) {
				t.Errorf("%v, %s: greedy %v, reference %v", mode, name, got, ref.Greedy)
			}
			if stats.Verify == 0 {
				t.Errorf("%v, %s: no verify pass ran (%v)", mode, name, stats)
			}
		}
	}
}
