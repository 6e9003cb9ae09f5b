package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// loadModel resolves a checkpoint through arch, as the compiler sees it.
func loadModel(t testing.TB, path string) *arch.Model {
	t.Helper()
	ck, err := detect.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func storiesModel(t testing.TB) *arch.Model {
	return loadModel(t, testutil.Path(t, "models/stories260K/stories260K.gguf"))
}

// tinyModel is a random GQA Llama written as safetensors and read back.
func tinyModel(t testing.TB) *arch.Model {
	dir := t.TempDir()
	cfg := tinymodel.Default()
	cfg.MaxPositions = 256
	if err := tinymodel.WriteLlama(dir, cfg, 7); err != nil {
		t.Fatal(err)
	}
	return loadModel(t, dir)
}

// compileModel writes m's artifact with the given AR lengths and opens it.
func compileModel(t testing.TB, m *arch.Model, ctx int, arLens ...int) *engine.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.aot")
	if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: arLens, Ctx: ctx}, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// interpreter returns the reference evaluator of m's generation graph.
func interpreter(t testing.TB, m *arch.Model) *graph.Interpreter {
	t.Helper()
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, m.Weights, 1)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func newSession(t testing.TB, e *engine.Engine, o engine.SessionOptions) *engine.Session {
	t.Helper()
	s, err := e.NewSession(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, float64(abs(a[i]-b[i])))
	}
	return d
}

func abs(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// The engine's sessions are what decoding strategies drive.
var _ decoding.Session = (*engine.Session)(nil)
