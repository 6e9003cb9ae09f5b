package engine_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// TestLongPrefillMatchesDecode: a prompt long enough that its last
// passes attend in tiles (engine.FlashMinSlots) gives, prefilled in
// passes of 128 rows, the logits of the same prompt decoded one token at
// a time (row by row, each softmax exact) within 1e-5 relative over a
// binary16 cache, and within 1e-3 over a uint8 cache, whose tiled passes
// round the queries to int8; and so does a decode step after it. A random
// GQA Llama of 1,300 positions, at 1 and 2 threads.
func TestLongPrefillMatchesDecode(t *testing.T) {
	dir := t.TempDir()
	cfg := tinymodel.Default()
	cfg.MaxPositions = 1300
	if err := tinymodel.WriteLlama(dir, cfg, 11); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, dir)
	prompt := make([]int, engine.FlashMinSlots+200)
	for i := range prompt {
		prompt[i] = (i*29 + 5) % cfg.VocabSize
	}
	for _, kv := range []struct {
		name string
		tol  float64
	}{{"f16", 1e-5}, {"u8", 1e-3}} {
		path := filepath.Join(t.TempDir(), "model.aot")
		if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{128}, Ctx: 1300, KV: kv.name}, path); err != nil {
			t.Fatal(err)
		}
		e, err := engine.OpenWith(path, engine.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{1, 2} {
			whole := newSession(t, e, engine.SessionOptions{Threads: threads})
			steps := newSession(t, e, engine.SessionOptions{Threads: threads})
			a, err := whole.Prefill(prompt)
			if err != nil {
				t.Fatal(err)
			}
			var b []float32
			for _, id := range prompt {
				if b, err = steps.Prefill([]int{id}); err != nil {
					t.Fatal(err)
				}
			}
			what := fmt.Sprintf("%s cache, %d threads", kv.name, threads)
			if d := relDiff(a, b); d > kv.tol {
				t.Fatalf("%s: the prompt's logits prefilled in passes and one token at a time differ by %g (relative), above %g", what, d, kv.tol)
			}
			if a, err = whole.Decode(3); err != nil {
				t.Fatal(err)
			}
			if b, err = steps.Decode(3); err != nil {
				t.Fatal(err)
			}
			if d := relDiff(a, b); d > kv.tol {
				t.Fatalf("%s: the decode step after the prompt differs by %g (relative), above %g", what, d, kv.tol)
			}
			t.Logf("%s: logits within %.2g relative", what, relDiff(a, b))
		}
		e.Close()
	}
}
