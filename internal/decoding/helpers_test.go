package decoding_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/testutil"
)

// The engine's sessions are what strategies verify on and draft with.
var (
	_ decoding.Target        = (*engine.Session)(nil)
	_ decoding.DraftSequence = (*engine.Session)(nil)
)

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

// compileKV writes m's artifact with plans of 1 and arLen rows, a cache
// of ctx positions stored as kv, and opens it.
func compileKV(t testing.TB, m *arch.Model, kv string, arLen, ctx int) *engine.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.aot")
	if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{arLen}, Ctx: ctx, KV: kv}, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func newSession(t testing.TB, e *engine.Engine, mode engine.Mode) *engine.Session {
	t.Helper()
	s, err := e.NewSession(engine.SessionOptions{Mode: mode, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// generate prefills prompt on a fresh session and chooses n tokens, one
// per pass when st is nil, else through st's decoder, as the runtime's
// Generate does. It returns the ids and the decoder's stats.
func generate(t testing.TB, e *engine.Engine, mode engine.Mode, prompt []int, n int, st decoding.Strategy, p sample.Params) ([]int, decoding.Stats) {
	t.Helper()
	s := newSession(t, e, mode)
	logits, err := s.PrefillContext(context.Background(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	smp := sample.New(p)
	out := []int{smp.Sample(logits, nil)}
	if st == nil {
		for len(out) < n {
			l, err := s.Decode(out[len(out)-1])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, smp.Sample(l, out))
		}
		return out, decoding.Stats{}
	}
	dec, err := st.Start(s, prompt, smp)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for len(out) < n {
		before := s.Pos()
		next, err := dec.Next(out[len(out)-1], out)
		if err != nil {
			t.Fatal(err)
		}
		if len(next) == 0 {
			t.Fatal("a decoder step chose no token")
		}
		// the target holds the fed id and every chosen token but the last
		if got, want := s.Pos(), before+len(next); got != want {
			t.Fatalf("after a step of %d tokens the target holds %d positions, want %d", len(next), got, want)
		}
		out = append(out, next...)
	}
	return out[:n], dec.Stats()
}
