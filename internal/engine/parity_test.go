package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// logitTol is the largest difference allowed between the engine's and the
// interpreter's logits. Float32 weights and activations go through the
// same arithmetic, but the SIMD dot products of attention sum in several
// lanes, so the order of additions differs: about 1e-5 on logits of
// magnitude 20 (5e-7 relative) is what that costs.
const logitTol = 1e-4

// checkParity feeds every prompt length 1..3N (so 1..3 passes, every
// chunk boundary and every padding amount) through the engine's AR-N plan
// and through the interpreter, then decodes two more tokens; the logits
// must agree within logitTol at each step.
func checkParity(t *testing.T, m *arch.Model, e *engine.Engine, n int, mode engine.Mode) {
	checkParityTol(t, m, e, n, mode, logitTol)
}

// checkParityTol is checkParity with the tolerance tol.
func checkParityTol(t *testing.T, m *arch.Model, e *engine.Engine, n int, mode engine.Mode, tol float64) {
	t.Helper()
	in := interpreter(t, m)
	s := newSession(t, e, engine.SessionOptions{Mode: mode, ARLen: n, Threads: 2})
	r := rand.New(rand.NewPCG(uint64(n), 3))
	var worst float64
	for p := 1; p <= 3*n; p++ {
		ids := make([]int, p)
		for i := range ids {
			ids[i] = r.IntN(m.Config.Vocab)
		}
		s.Reset()
		st := in.NewState(s.Context())
		got, err := s.Prefill(ids)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := in.Run(st, ids)
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; ; step++ {
			if len(got) != m.Config.Vocab {
				t.Fatalf("N=%d P=%d: %d logits, want %d", n, p, len(got), m.Config.Vocab)
			}
			d := maxDiff(got, want[:m.Config.Vocab])
			worst = max(worst, d)
			if d > tol {
				t.Fatalf("N=%d P=%d step %d: logits differ by %g", n, p, step, d)
			}
			if step == 2 {
				break
			}
			next := argmax(got)
			if got, err = s.Decode(next); err != nil {
				t.Fatal(err)
			}
			if want, _, err = in.Run(st, []int{next}); err != nil {
				t.Fatal(err)
			}
		}
		if s.Pos() != p+2 || st.Pos != p+2 {
			t.Fatalf("positions %d and %d after %d+2 tokens", s.Pos(), st.Pos, p)
		}
	}
	t.Logf("N=%d %v: worst difference %g over prompts 1..%d", n, mode, worst, 3*n)
}

func TestParityWithInterpreter(t *testing.T) {
	models := map[string]func(testing.TB) *arch.Model{"stories260K": storiesModel, "tiny": tinyModel}
	for name, load := range models {
		m := load(t)
		e := compileModel(t, m, 128, 4, 32)
		if got := e.ARLens(); !slices.Equal(got, []int{1, 4, 32}) {
			t.Fatalf("AR lengths %v", got)
		}
		for _, n := range []int{1, 4, 32} {
			t.Run(fmt.Sprintf("%s/ar%d", name, n), func(t *testing.T) { checkParity(t, m, e, n, engine.ModeHybrid) })
		}
		t.Run(name+"/kv", func(t *testing.T) { checkParity(t, m, e, 4, engine.ModeKV) })
	}
}

// greedy prefills prompt and returns n argmax ids.
func greedy(t *testing.T, s *engine.Session, prompt []int, n int) []int {
	s.Reset()
	logits, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for len(ids) < n {
		id := argmax(logits)
		ids = append(ids, id)
		if len(ids) == n {
			break
		}
		if logits, err = s.Decode(id); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestStoriesGreedyMatchesLlama2C runs the reference prompts of llama2.c's
// run.c through the compiled stories260K in every mode.
func TestStoriesGreedyMatchesLlama2C(t *testing.T) {
	ref := testutil.StoriesGreedy(t)
	if len(ref.Cases) == 0 {
		t.Fatal("no cases in the reference")
	}
	e := compileModel(t, storiesModel(t), 256, 4, 32)
	for _, o := range []engine.SessionOptions{{Mode: engine.ModeKV}, {ARLen: 4}, {ARLen: 32, Threads: 2}} {
		s := newSession(t, e, o)
		for i, c := range ref.Cases {
			got := greedy(t, s, c.PromptIDs, len(c.IDs))
			if !slices.Equal(got, c.IDs) {
				t.Errorf("%v ar%d case %d: ids\n%v\nwant\n%v", o.Mode, o.ARLen, i, got, c.IDs)
			}
		}
	}
}

func TestHybridAndKVSameIDs(t *testing.T) {
	e := compileModel(t, tinyModel(t), 128, 4)
	kv := newSession(t, e, engine.SessionOptions{Mode: engine.ModeKV})
	hy := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid})
	r := rand.New(rand.NewPCG(1, 2))
	for p := 1; p <= 13; p++ {
		prompt := make([]int, p)
		for i := range prompt {
			prompt[i] = r.IntN(64)
		}
		a, b := greedy(t, kv, prompt, 20), greedy(t, hy, prompt, 20)
		if !slices.Equal(a, b) {
			t.Fatalf("prompt of %d: kv %v, hybrid %v", p, a, b)
		}
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	e := compileModel(t, storiesModel(t), 128, 4)
	for _, threads := range []int{1, 2} {
		s := newSession(t, e, engine.SessionOptions{Threads: threads})
		if _, err := s.Prefill([]int{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := s.Decode(7); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("threads %d: Decode allocates %v times per call", threads, allocs)
		}
	}
}

func TestContextFull(t *testing.T) {
	e := compileModel(t, tinyModel(t), 8, 4)
	s := newSession(t, e, engine.SessionOptions{})
	if _, err := s.Prefill(make([]int, 9)); !errors.Is(err, engine.ErrContextFull) {
		t.Fatalf("9 tokens in 8: %v", err)
	}
	if s.Pos() != 0 {
		t.Fatalf("a refused prefill moved the position to %d", s.Pos())
	}
	if _, err := s.Prefill(make([]int, 7)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(1); !errors.Is(err, engine.ErrContextFull) {
		t.Fatalf("decode past the context: %v", err)
	}
	for _, bad := range [][]int{nil, {64}, {-1}} {
		s.Reset()
		if _, err := s.Prefill(bad); err == nil {
			t.Errorf("prefill %v accepted", bad)
		}
	}
	if _, err := s.Decode(64); err == nil {
		t.Error("decode of an id outside the vocabulary accepted")
	}
}
