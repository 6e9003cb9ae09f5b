package engine_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// treeTol is the largest difference, relative to the largest logit (or 1),
// allowed between a branch of a tree pass and the same tokens fed alone:
// the cache holds the same values, and only the order of the additions
// in a masked row's softmax sum differs.
const treeTol = 1e-4

// compileKV writes m's artifact with AR lengths 1 and 8, a cache of 64
// positions stored as kv ("f32", "f16" or "u8"), and opens it.
func compileKV(t testing.TB, m *arch.Model, kv string) *engine.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.aot")
	if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: 64, KV: kv}, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// treeModels are the transformer fixtures of every family and stories260K.
func treeModels(t *testing.T) map[string]*arch.Model {
	ms := map[string]*arch.Model{"stories260K": storiesModel(t)}
	for _, f := range []string{"llama", "qwen2", "qwen3", "smollm3", "granite", "phi3", "glm", "gemma", "gemma3", "gemma4"} {
		ms[f] = loadModel(t, testutil.Path(t, "arch/"+f))
	}
	return ms
}

func relDiff(a, b []float32) float64 {
	var top float64 = 1
	for _, v := range b {
		top = max(top, math.Abs(float64(v)))
	}
	return maxDiff(a, b) / top
}

// TestTreePass: after a prompt, one pass holds three branches as a tree
// (a1 a2 a3; a1 b2 b3 sharing a1; c1 c2 from the cache), and each row's
// logits equal those of its branch fed alone on a fresh session; Commit
// of branch b then a decode step equals a session that only ever saw b;
// Rewind then re-feeding gives the same logits again. On every family
// fixture and stories260K, in hybrid and kv modes, with f32, f16 and u8
// caches. The prompt of 12 crosses Gemma 3's and Gemma 4's sliding window
// of 8; Gemma 4's shared layers read the branches their source layers store.
func TestTreePass(t *testing.T) {
	for name, m := range treeModels(t) {
		for _, kv := range []string{"f32", "f16", "u8"} {
			e := compileKV(t, m, kv)
			for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
				t.Run(fmt.Sprintf("%s/%s/%v", name, kv, mode), func(t *testing.T) { checkTree(t, e, m.Config.Vocab, mode) })
			}
		}
	}
}

func checkTree(t *testing.T, e *engine.Engine, vocab int, mode engine.Mode) {
	r := rand.New(rand.NewPCG(uint64(vocab), 5))
	tok := func() int { return r.IntN(vocab) }
	prompt := make([]int, 12)
	for i := range prompt {
		prompt[i] = tok()
	}
	a1, a2, a3, b2, b3, c1, c2 := tok(), tok(), tok(), tok(), tok(), tok(), tok()
	ids := []int{a1, a2, a3, b2, b3, c1, c2}
	parents := []int{-1, 0, 1, 0, 3, -1, 5}
	branches := [][]int{{0, 1, 2}, {0, 3, 4}, {5, 6}} // rows of each branch

	// alone returns the logits after each token of branch, fed one by one
	// after the prompt on a fresh session.
	alone := func(branch []int) [][]float32 {
		s := newSession(t, e, engine.SessionOptions{Mode: mode, Threads: 2})
		if _, err := s.Prefill(prompt); err != nil {
			t.Fatal(err)
		}
		var out [][]float32
		for _, row := range branch {
			l, err := s.Decode(ids[row])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, append([]float32(nil), l...))
		}
		return out
	}

	s := newSession(t, e, engine.SessionOptions{Mode: mode, Threads: 2})
	if _, err := s.Prefill(prompt); err != nil {
		t.Fatal(err)
	}
	mask, err := engine.TreeMask(parents)
	if err != nil {
		t.Fatal(err)
	}
	all := []int{0, 1, 2, 3, 4, 5, 6}
	got, err := s.Run(&engine.Pass{IDs: ids, Mask: mask, Logits: all})
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows() != len(ids) {
		t.Fatalf("%d rows of logits, want %d", got.Rows(), len(ids))
	}
	var worst float64
	for _, br := range branches {
		want := alone(br)
		for k, row := range br {
			d := relDiff(got.Row(row), want[k])
			worst = max(worst, d)
			if d > treeTol {
				t.Fatalf("branch %v row %d: logits differ from the branch alone by %g (relative)", br, row, d)
			}
		}
	}

	// Commit branch b, decode one more token: as if only b had been seen.
	if err := s.Commit([]int{0, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if s.Pos() != len(prompt)+3 {
		t.Fatalf("after commit: position %d, want %d", s.Pos(), len(prompt)+3)
	}
	x := tok()
	after, err := s.Decode(x)
	if err != nil {
		t.Fatal(err)
	}
	after = append([]float32(nil), after...)
	ref := newSession(t, e, engine.SessionOptions{Mode: mode, Threads: 2})
	if _, err := ref.Prefill(append(append([]int(nil), prompt...), a1, b2, b3)); err != nil {
		t.Fatal(err)
	}
	want, err := ref.Decode(x)
	if err != nil {
		t.Fatal(err)
	}
	if d := relDiff(after, want); d > treeTol {
		t.Fatalf("decode after committing a branch differs from the branch alone by %g", d)
	}

	// Rewind the last token and feed it again: the very same logits.
	if err := s.Rewind(s.Pos() - 1); err != nil {
		t.Fatal(err)
	}
	again, err := s.Decode(x)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(again, after); d != 0 {
		t.Fatalf("rewind and re-feed: logits differ by %g, want identical", d)
	}
	// Rewind to the prompt and re-feed the branch as a prompt.
	if err := s.Rewind(len(prompt)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill([]int{a1, b2, b3}); err != nil {
		t.Fatal(err)
	}
	again, err = s.Decode(x)
	if err != nil {
		t.Fatal(err)
	}
	if d := relDiff(again, after); d > treeTol {
		t.Fatalf("rewind to the prompt and re-feed: logits differ by %g", d)
	}
	t.Logf("worst relative difference of a tree row: %g", worst)
}

// TestPassErrors: malformed passes and commits are refused, naming the
// problem, and leave the session as it was.
func TestPassErrors(t *testing.T) {
	e := compileKV(t, tinyModel(t), "f32")
	s := newSession(t, e, engine.SessionOptions{Threads: 1})
	if _, err := s.Prefill([]int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	bad, _ := engine.TreeMask([]int{-1, 0})
	cases := []struct {
		name string
		p    engine.Pass
		want string
	}{
		{"empty", engine.Pass{}, "no rows"},
		{"too many rows", engine.Pass{IDs: make([]int, 9)}, "largest plan"},
		{"bad id", engine.Pass{IDs: []int{-1}}, "vocabulary"},
		{"mask size", engine.Pass{IDs: []int{1, 2, 3}, Mask: bad}, "mask of 2 rows"},
		{"position before the cache", engine.Pass{IDs: []int{1}, Pos: []int{2}}, "positions of a pass"},
		{"logits rows", engine.Pass{IDs: []int{1, 2}, Logits: []int{1, 0}}, "ascending"},
	}
	for _, c := range cases {
		if _, err := s.Run(&c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		}
	}
	if s.Pos() != 3 {
		t.Fatalf("position %d after refused passes, want 3", s.Pos())
	}
	if err := s.Commit([]int{0}); err == nil {
		t.Error("commit with no pass: accepted")
	}
	tree, _ := engine.TreeMask([]int{-1, -1})
	if _, err := s.Run(&engine.Pass{IDs: []int{4, 5}, Mask: tree, Logits: []int{}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]int{0, 1}); err == nil {
		t.Error("commit of two siblings as a chain: accepted")
	}
	if err := s.Commit([]int{1}); err != nil {
		t.Errorf("commit of the second root: %v", err)
	}
	if err := s.Rewind(10); err == nil {
		t.Error("rewind past the committed positions: accepted")
	}
}

// TestRecurrentPasses: RWKV-7 runs chain passes; a pass committed in
// part replays its kept rows (the state then equals a prefill of them);
// tree passes and rewinds into its past beyond the pass boundaries whose
// state it keeps are refused.
func TestRecurrentPasses(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "rwkv/260123_reverse_L2_only_rwkv7.pth"))
	e := compileKV(t, m, "f32")
	s := newSession(t, e, engine.SessionOptions{Threads: 1})
	if _, err := s.Prefill([]int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	tree, _ := engine.TreeMask([]int{-1, -1})
	if _, err := s.Run(&engine.Pass{IDs: []int{4, 5}, Mask: tree}); err == nil || !strings.Contains(err.Error(), "chain") {
		t.Errorf("tree pass: got %v, want a refusal naming chain passes", err)
	}
	if _, err := s.Run(&engine.Pass{IDs: []int{4, 5}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]int{0}); err != nil || s.Pos() != 4 {
		t.Fatalf("partial commit: %v, position %d; want 4", err, s.Pos())
	}
	got, err := s.Decode(6)
	if err != nil {
		t.Fatal(err)
	}
	fresh := newSession(t, e, engine.SessionOptions{Threads: 1})
	want, err := fresh.Prefill([]int{1, 2, 3, 4, 6})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(got, want); d > 1e-4 {
		t.Errorf("after a partial commit, logits differ from a prefill of the kept ids by %.3g", d)
	}
	if err := s.Rewind(3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(&engine.Pass{IDs: []int{4, 5}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Rewind(1); err == nil {
		t.Error("rewind into a recurrent past no longer kept: accepted")
	}
	if err := s.Rewind(3); err != nil { // boundaries kept: 0, 3, 5
		t.Errorf("rewind to a kept boundary: %v", err)
	}
	if err := s.Rewind(0); err != nil {
		t.Errorf("rewind to 0: %v", err)
	}
}

// TestParallelSessions: two sessions of one engine decoding at once give
// the ids each gives alone.
func TestParallelSessions(t *testing.T) {
	e := compileKV(t, storiesModel(t), "f16")
	greedy := func(prompt []int) []int {
		s, err := e.NewSession(engine.SessionOptions{Threads: 2})
		if err != nil {
			t.Error(err)
			return nil
		}
		defer s.Close()
		l, err := s.Prefill(prompt)
		var out []int
		for i := 0; i < 40 && err == nil; i++ {
			id := argmax(l)
			out = append(out, id)
			l, err = s.Decode(id)
		}
		if err != nil {
			t.Error(err)
		}
		return out
	}
	prompts := [][]int{{1, 403, 407}, {1, 365, 300, 290}}
	var alone [2][]int
	for i, p := range prompts {
		alone[i] = greedy(p)
	}
	for round := 0; round < 3; round++ {
		var both [2][]int
		var wg sync.WaitGroup
		for i, p := range prompts {
			wg.Add(1)
			go func() { defer wg.Done(); both[i] = greedy(p) }()
		}
		wg.Wait()
		for i := range prompts {
			if fmt.Sprint(both[i]) != fmt.Sprint(alone[i]) {
				t.Fatalf("round %d session %d: %v in parallel, %v alone", round, i, both[i], alone[i])
			}
		}
	}
}

// TestCloseLeavesNoGoroutine: an engine's workers end with Close, and
// sessions used after it are refused.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	m := storiesModel(t)
	path := filepath.Join(t.TempDir(), "m.aot")
	if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: 64}, path); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for range 3 {
		e, err := engine.OpenWith(path, engine.Options{Threads: 4})
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.NewSession(engine.SessionOptions{Threads: 4})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prefill([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := s.Decode(1); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("decode after Close: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.NewSession(engine.SessionOptions{}); !errors.Is(err, engine.ErrClosed) {
			t.Errorf("NewSession after Close: %v", err)
		}
	}
	// Workers exit when woken by Close; give the scheduler time to run them.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

// TestShrunkContext: a session may ask for a smaller cache than the
// artifact's; it fills at that size, and a larger one is refused.
func TestShrunkContext(t *testing.T) {
	e := compileKV(t, storiesModel(t), "f32")
	s := newSession(t, e, engine.SessionOptions{Threads: 1, Context: 10})
	if s.Context() != 10 {
		t.Fatalf("context %d, want 10", s.Context())
	}
	if _, err := s.Prefill(make([]int, 11)); !errors.Is(err, engine.ErrContextFull) {
		t.Fatalf("11 tokens in a context of 10: %v", err)
	}
	full := newSession(t, e, engine.SessionOptions{Threads: 1})
	ids := []int{1, 403, 407, 300, 290, 365}
	a, err := s.Prefill(ids)
	if err != nil {
		t.Fatal(err)
	}
	b, err := full.Prefill(ids)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(a, b); d != 0 {
		t.Fatalf("a shrunk cache changes the logits by %g", d)
	}
	if _, err := e.NewSession(engine.SessionOptions{Context: 65}); err == nil {
		t.Fatal("a context larger than the artifact's: accepted")
	}
}
