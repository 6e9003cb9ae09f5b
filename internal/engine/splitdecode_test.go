package engine_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// TestSplitDecodeMatchesRows: decode steps at a depth past the split
// attention's threshold give the logits of the per-row attention (the
// threshold raised past the context) within 1e-5 relative over a
// binary16 and a uint8 cache, and the same bits at 1 and 2 threads. A
// random GQA Llama of 1,300 positions, 1,150 of them prompt.
func TestSplitDecodeMatchesRows(t *testing.T) {
	dir := t.TempDir()
	cfg := tinymodel.Default()
	cfg.MaxPositions = 1300
	if err := tinymodel.WriteLlama(dir, cfg, 13); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, dir)
	prompt := make([]int, 1150)
	for i := range prompt {
		prompt[i] = (i*31 + 7) % cfg.VocabSize
	}
	const tol = 1e-5
	for _, kv := range []string{"f16", "u8"} {
		path := filepath.Join(t.TempDir(), "model.aot")
		if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{128}, Ctx: 1300, KV: kv}, path); err != nil {
			t.Fatal(err)
		}
		e, err := engine.OpenWith(path, engine.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		// decode runs three steps after the prompt with the split
		// attention from split slots on and returns their logits.
		decode := func(threads, split int) [][]float32 {
			s := newSession(t, e, engine.SessionOptions{Threads: threads})
			if _, err := s.Prefill(prompt); err != nil {
				t.Fatal(err)
			}
			restore := engine.SetSplitMinSlots(split)
			defer restore()
			var out [][]float32
			for _, id := range []int{3, 9, 4} {
				l, err := s.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, append([]float32(nil), l...))
			}
			return out
		}
		rows := decode(1, 1<<30)
		var one [][]float32
		for _, threads := range []int{1, 2} {
			split := decode(threads, 1024)
			for k := range split {
				what := fmt.Sprintf("%s cache, %d threads, step %d", kv, threads, k)
				if d := relDiff(split[k], rows[k]); d > tol {
					t.Fatalf("%s: the split attention's logits differ from the per-row path's by %g (relative), above %g", what, d, tol)
				}
				if one != nil {
					for i := range split[k] {
						if math.Float32bits(split[k][i]) != math.Float32bits(one[k][i]) {
							t.Fatalf("%s: logit %d = %g, %g at 1 thread: not the same bits", what, i, split[k][i], one[k][i])
						}
					}
				}
			}
			if one == nil {
				one = split
			}
			t.Logf("%s cache, %d threads: logits within %.2g relative of the per-row path", kv, threads, relDiff(split[2], rows[2]))
		}
		e.Close()
	}
}
