package engine_test

import (
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
)

// TestSplitStepsMatchOneThread: with every step split across 2 and 3
// workers (linears by output rows, their input's quantization, norms,
// RoPE and elementwise ops by rows, attention by head and row), prefill
// and decode give bit for bit the logits of one thread. Each worker
// computes whole rows or items with the same arithmetic, so the
// tolerance is 0. Packed 4-bit and 8-bit weights with int8 activations
// (w4a16-lpbq keeps v_proj and down_proj at W8) and an f32 model.
func TestSplitStepsMatchOneThread(t *testing.T) {
	quantized, _ := compilePath(t, quantizeStories(t, "w4a16-lpbq"), compile.Options{ARLens: []int{16}, Ctx: 128, KV: "f16"})
	for name, e := range map[string]*engine.Engine{"w4a16-lpbq": quantized, "f32": compileModel(t, storiesModel(t), 128, 16)} {
		prompt := make([]int, 37)
		for i := range prompt {
			prompt[i] = (i*29 + 3) % 500
		}
		run := func(threads int) [][]float32 {
			s := newSession(t, e, engine.SessionOptions{Threads: threads})
			var out [][]float32
			l, err := s.Prefill(prompt)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, slices.Clone(l))
			for _, id := range []int{5, 77, 300} {
				l, err := s.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, slices.Clone(l))
			}
			return out
		}
		want := run(1)
		restore := engine.SplitEverything()
		for _, threads := range []int{2, 3} {
			got := run(threads)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("%s, %d threads: logits of call %d differ from one thread's", name, threads, i)
				}
			}
		}
		restore()
	}
}
