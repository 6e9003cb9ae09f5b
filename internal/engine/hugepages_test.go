package engine_test

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
)

// TestHugePagesSameLogits: an artifact read into huge pages
// (Options.HugePages) decodes to the same bits as the mapped one, and on
// Linux reports that it was read so.
func TestHugePagesSameLogits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.aot")
	if err := compile.CompileModel(tinyModel(t), compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: 64}, path); err != nil {
		t.Fatal(err)
	}
	var logits [2][][]float32
	for i, huge := range []bool{false, true} {
		e, err := engine.OpenWith(path, engine.Options{Threads: 2, HugePages: huge})
		if err != nil {
			t.Fatal(err)
		}
		if want := huge && runtime.GOOS == "linux"; e.HugePages() != want {
			t.Fatalf("HugePages option %v: engine reports %v on %s", huge, e.HugePages(), runtime.GOOS)
		}
		s := newSession(t, e, engine.SessionOptions{})
		out, err := s.Prefill([]int{1, 5, 9, 2, 7})
		if err != nil {
			t.Fatal(err)
		}
		logits[i] = append(logits[i], append([]float32(nil), out...))
		for _, id := range []int{3, 4, 8} {
			if out, err = s.Decode(id); err != nil {
				t.Fatal(err)
			}
			logits[i] = append(logits[i], append([]float32(nil), out...))
		}
		s.Close()
		e.Close()
	}
	for k := range logits[0] {
		for j, v := range logits[0][k] {
			if math.Float32bits(v) != math.Float32bits(logits[1][k][j]) {
				t.Fatalf("pass %d logit %d: mapped %g, huge pages %g", k, j, v, logits[1][k][j])
			}
		}
	}
}
