package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// compileAt writes m's artifact for ctx positions (AR-1 and AR-8) and
// returns its path.
func compileAt(t *testing.T, m *arch.Model, ctx int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("ctx%d.aot", ctx))
	if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: ctx}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// extendedLogits opens the artifact at path for ctx positions, prefills
// ids in hybrid passes, decodes three more tokens and returns the logits
// of every row.
func extendedLogits(t *testing.T, path string, ctx int, ids []int) [][]float32 {
	t.Helper()
	e, err := engine.OpenWith(path, engine.Options{Threads: 2, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Context() != ctx {
		t.Fatalf("engine context %d, asked %d", e.Context(), ctx)
	}
	s, err := e.NewSession(engine.SessionOptions{Mode: engine.ModeHybrid, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Context() != ctx {
		t.Fatalf("session context %d, want %d", s.Context(), ctx)
	}
	rows, err := s.PrefillAll(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, 0, len(rows)+3)
	for _, r := range rows {
		out = append(out, append([]float32(nil), r...))
	}
	for _, id := range []int{3, 17, 40} {
		l, err := s.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	return out
}

// TestExtendedContextMatchesCompiled compiles a tiny Llama (trained
// context 256) for 64 positions and runs it for 200 without compiling
// again: every row's logits, over 180 prefilled positions and 3 decoded,
// must equal within 1e-5 those of the same model compiled for 200, for
// each rope scaling. longrope (original context 64) and dynamic NTK
// (original 64, factor 4) pick their frequencies by the context, so the
// extension must also move their logits away from the 64-position
// artifact's.
func TestExtendedContextMatchesCompiled(t *testing.T) {
	const compiled, extended, n = 64, 200, 180
	r := rand.New(rand.NewPCG(5, 8))
	factors := func() []float64 {
		f := make([]float64, 4) // rotary size 8
		for i := range f {
			f[i] = 1 + 3*r.Float64()
		}
		return f
	}
	cases := []struct {
		name    string
		scaling arch.RopeScaling
		moves   bool // the rope frequencies depend on the context
	}{
		{"none", arch.RopeScaling{}, false},
		{"linear", arch.RopeScaling{Type: "linear", Factor: 2}, false},
		{"llama3", arch.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPosition: 32}, false},
		{"yarn", arch.RopeScaling{Type: "yarn", Factor: 4, OriginalMaxPosition: 64}, false},
		{"longrope", arch.RopeScaling{Type: "longrope", OriginalMaxPosition: 64, ShortFactor: factors(), LongFactor: factors()}, true},
		{"dynamic", arch.RopeScaling{Type: "dynamic", Factor: 4, OriginalMaxPosition: 64}, true},
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = r.IntN(64)
	}
	base := tinyModel(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := *base
			m.Config.RopeScaling = c.scaling
			short, long := compileAt(t, &m, compiled), compileAt(t, &m, extended)
			got := extendedLogits(t, short, extended, ids)
			want := extendedLogits(t, long, extended, ids)
			for i := range want {
				if d := maxDiff(got[i], want[i]); d > 1e-5 {
					t.Fatalf("row %d: extended from %d to %d positions differs from compiled for %d by %.3g", i, compiled, extended, extended, d)
				}
			}
			// the 64-position artifact's own frequencies, over its 64 positions
			first := extendedLogits(t, short, compiled, ids[:compiled-3])
			d := maxDiff(first[0], got[0])
			for i := 1; i < compiled-3; i++ {
				d = max(d, maxDiff(first[i], got[i]))
			}
			if c.moves && d < 1e-4 {
				t.Errorf("the extension left the context-dependent frequencies as compiled (logits differ by %.3g)", d)
			}
			if !c.moves && d > 1e-5 {
				t.Errorf("the extension moved the first %d positions' logits by %.3g", compiled-3, d)
			}
		})
	}
}

// TestExtendedContextRefused checks that a context beyond the model's
// trained one is refused, naming both numbers, and that sessions of an
// extended engine stay within it.
func TestExtendedContextRefused(t *testing.T) {
	m := tinyModel(t) // trained context 256
	path := compileAt(t, m, 64)
	_, err := engine.OpenWith(path, engine.Options{Threads: 1, Context: 300})
	var ce *engine.ContextError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "300") || !strings.Contains(err.Error(), "256") {
		t.Fatalf("a context of 300 for a model trained for 256: %v", err)
	}
	if _, err := engine.OpenWith(path, engine.Options{Threads: 1, Context: -1}); err == nil {
		t.Fatal("a negative context was accepted")
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 1, Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.MaxContext() != 256 || e.Context() != 256 {
		t.Fatalf("context %d of at most %d, want 256 of 256", e.Context(), e.MaxContext())
	}
	if _, err := e.NewSession(engine.SessionOptions{Context: 257}); err == nil {
		t.Fatal("a session of 257 positions on an engine opened for 256 was accepted")
	}
	s, err := e.NewSession(engine.SessionOptions{Context: 100})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestExtendedContextFamilies runs each fixture family, compiled for 16
// positions, over its reference tokens (40 to 64) with the context
// extended to 96, and checks every row's logits in hybrid passes of 8
// against the same model compiled for 96 within 1e-5: sliding-window
// rings (gemma3, gemma4, phi3), recurrent state and convolution history
// (qwen35, lfm2, granitehybrid) and layers without rotation
// (smollm3) are sized when the session is made.
func TestExtendedContextFamilies(t *testing.T) {
	for _, fam := range []string{"gemma3", "gemma4", "phi3", "smollm3", "qwen35", "lfm2", "granitehybrid", "glm"} {
		t.Run(fam, func(t *testing.T) {
			ref := testutil.ReadArchReference(t, fam)
			ids := ref.Tokens
			if len(ids) > 90 || len(ids) <= 16 {
				t.Fatalf("%d reference tokens: want 17 to 90", len(ids))
			}
			m := loadModel(t, testutil.ArchModelPaths(t, fam)["hf"])
			rows := func(path string) [][]float32 {
				e, err := engine.OpenWith(path, engine.Options{Threads: 2, Context: 96})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				s := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid, ARLen: 8, Threads: 2})
				out, err := prefillAllAR(s, ids, 8)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			got, want := rows(compileAt(t, m, 16)), rows(compileAt(t, m, 96))
			for i := range want {
				if d := maxDiff(got[i], want[i]); d > 1e-5 {
					t.Fatalf("row %d: extended from 16 to 96 positions differs from compiled for 96 by %.3g", i, d)
				}
			}
		})
	}
}
