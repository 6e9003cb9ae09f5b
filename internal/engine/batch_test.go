package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// batchTol is the largest difference, relative to the largest logit (or
// 1), allowed between a session's logits from a batched pass and from
// decoding it alone: each row reads the same weights and its own cache,
// and only the order of a product's additions may differ between a
// one-row and a many-row kernel call.
const batchTol = 1e-5

// q4BatchTol is batchTol for the 4-bit caches (see TestDecodeBatch).
const q4BatchTol = 0.05

// TestDecodeBatch: five sessions with prompts of different lengths (so
// different positions, two past Gemma 3's sliding window of 8) decode
// greedily, in batches of changing makeup (all five, then subsets, one
// alone), and every session's logits and ids match a twin session that
// decodes alone with Decode. On stories260K (float32 and 4-bit packed
// weights) and the qwen3 and gemma3 fixtures, with f32, f16, u8, q4 and q4v
// caches, in hybrid and kv modes, with every step split across workers.
// With the 4-bit caches the bound is q4BatchTol and the greedy ids may
// part, on machines whose batched products differ from the one-row ones
// in the last bits.
func TestDecodeBatch(t *testing.T) {
	defer engine.SplitEverything()()
	type fixture struct {
		name string
		e    func(kv string) *engine.Engine
	}
	var fixtures []fixture
	for _, name := range []string{"stories260K", "qwen3", "gemma3"} {
		m := storiesModel(t)
		if name != "stories260K" {
			m = loadModel(t, testutil.Path(t, "arch/"+name))
		}
		fixtures = append(fixtures, fixture{name, func(kv string) *engine.Engine { return compileKV(t, m, kv) }})
	}
	fixtures = append(fixtures, fixture{"stories260K-w4", func(kv string) *engine.Engine {
		e, _ := compilePath(t, quantizeStories(t, "w4a16-lpbq"), compile.Options{ARLens: []int{8}, Ctx: 64, KV: kv})
		return e
	}})
	for _, f := range fixtures {
		for _, kv := range []string{"f32", "f16", "u8", "q4", "q4v"} {
			e := f.e(kv)
			tol := batchTol
			if kv == "q4" || kv == "q4v" {
				// a 4-bit cache fits each group's binary16 step and offset
				// to its 32 values, so a last-bit difference between the
				// batched and the one-row products (arm64's fused
				// multiply-adds) can move a whole group by a step's rounding
				tol = q4BatchTol
			}
			for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
				t.Run(fmt.Sprintf("%s/%s/%v", f.name, kv, mode), func(t *testing.T) { checkDecodeBatch(t, e, mode, tol) })
			}
		}
	}
}

func checkDecodeBatch(t *testing.T, e *engine.Engine, mode engine.Mode, tol float64) {
	vocab := e.Manifest().Vocab
	r := rand.New(rand.NewPCG(uint64(vocab), 11))
	lens := []int{3, 12, 1, 9, 6}
	opts := engine.SessionOptions{Mode: mode, Threads: 2}
	var batched, alone []*engine.Session
	next := make([]int, len(lens)) // each session's next id
	for i, n := range lens {
		prompt := make([]int, n)
		for j := range prompt {
			prompt[j] = r.IntN(vocab)
		}
		o := opts
		if i == 1 {
			o.Context = 40 // a session with a smaller cache than the others
		}
		b, a := newSession(t, e, o), newSession(t, e, o)
		lb, err := b.Prefill(prompt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Prefill(prompt); err != nil {
			t.Fatal(err)
		}
		batched, alone, next[i] = append(batched, b), append(alone, a), argmax(lb)
	}
	steps := [][]int{{0, 1, 2, 3, 4}, {4, 2, 0}, {1}, {3, 1, 0, 2, 4}, {2, 3}, {0, 1, 2, 3, 4}, {4, 0, 1, 3, 2}}
	for step, rows := range steps {
		ss, ids := make([]*engine.Session, len(rows)), make([]int, len(rows))
		for k, i := range rows {
			ss[k], ids[k] = batched[i], next[i]
		}
		got, err := e.DecodeBatch(ss, ids)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for k, i := range rows {
			want, err := alone[i].Decode(ids[k])
			if err != nil {
				t.Fatal(err)
			}
			if d := relDiff(got[k], want); d > tol {
				t.Fatalf("step %d, session %d at position %d: batched logits differ by %g (relative) from decoding alone", step, i, alone[i].Pos()-1, d)
			}
			// (with a 4-bit cache a group moved by a step may change the
			// greedy id; both sessions are fed the batched one)
			if g, w := argmax(got[k]), argmax(want); g != w && tol == batchTol {
				t.Fatalf("step %d, session %d: batched greedy id %d, alone %d", step, i, g, w)
			}
			if batched[i].Pos() != alone[i].Pos() {
				t.Fatalf("step %d, session %d: position %d, alone %d", step, i, batched[i].Pos(), alone[i].Pos())
			}
			next[i] = argmax(got[k])
		}
	}
	// A batched session goes on alone as its twin does: its cache holds
	// what the batched passes stored.
	for i := range batched {
		got, err := batched[i].Decode(next[i])
		if err != nil {
			t.Fatal(err)
		}
		want, err := alone[i].Decode(next[i])
		if err != nil {
			t.Fatal(err)
		}
		if d := relDiff(got, want); d > tol {
			t.Fatalf("session %d: decoding alone after batched passes differs by %g", i, d)
		}
	}
}

// TestDecodeBatchRefuses: a batch with no sessions, ids of the wrong
// count, a session twice, a session of another engine, a closed session,
// a full cache, an id outside the vocabulary, more sessions than the
// largest plan has rows, or a recurrent model each get an error naming
// the problem, and leave the sessions where they were; MaxBatch tells the
// limit (1 for the recurrent model).
func TestDecodeBatchRefuses(t *testing.T) {
	m := storiesModel(t)
	e := compileModel(t, m, 16, 4)
	other := compileModel(t, m, 16, 4)
	opts := engine.SessionOptions{}
	var ss []*engine.Session
	for range 5 {
		s := newSession(t, e, opts)
		if _, err := s.Prefill([]int{1, 2}); err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	foreign := newSession(t, other, opts)
	closed := newSession(t, e, opts)
	closed.Close()
	full := newSession(t, e, engine.SessionOptions{Context: 2})
	if _, err := full.Prefill([]int{1, 2}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ss   []*engine.Session
		ids  []int
		want string
	}{
		{"empty", nil, nil, "no sessions"},
		{"ids", ss[:2], []int{1}, "1 ids for a batch of 2"},
		{"twice", []*engine.Session{ss[0], ss[1], ss[0]}, []int{1, 2, 3}, "appears twice"},
		{"foreign", []*engine.Session{ss[0], foreign}, []int{1, 2}, "another engine"},
		{"closed", []*engine.Session{closed}, []int{1}, "closed"},
		{"full", []*engine.Session{ss[0], full}, []int{1, 2}, "context is full"},
		{"vocab", ss[:2], []int{1, m.Config.Vocab}, "outside the vocabulary"},
		{"rows", ss, []int{1, 2, 3, 4, 5}, "decode at most 4 at once"},
	}
	for _, c := range cases {
		_, err := e.DecodeBatch(c.ss, c.ids)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
		if c.name == "full" && !errors.Is(err, engine.ErrContextFull) {
			t.Errorf("full: %v is not ErrContextFull", err)
		}
	}
	for i, s := range ss {
		if s.Pos() != 2 {
			t.Errorf("session %d moved to %d after refused batches", i, s.Pos())
		}
	}

	if n := e.MaxBatch(); n != 4 {
		t.Errorf("MaxBatch of plans of 1 and 4 rows: %d", n)
	}
	rwkv := compileKV(t, loadModel(t, testutil.Path(t, "rwkv/260123_reverse_L2_only_rwkv7.pth")), "f32")
	if n := rwkv.MaxBatch(); n != 1 {
		t.Errorf("MaxBatch of a recurrent model: %d", n)
	}
	a, b := newSession(t, rwkv, opts), newSession(t, rwkv, opts)
	if _, err := rwkv.DecodeBatch([]*engine.Session{a, b}, []int{1, 2}); err == nil || !strings.Contains(err.Error(), "recurrent") {
		t.Errorf("recurrent model: got %v", err)
	}
}

// TestRunBatch: sessions at different positions run chains of 1 to 3
// rows in shared passes (RunBatch), each keeps a random prefix of its
// chain (Commit), and every row's logits match a twin session running the
// same chain alone (Run) and keeping the same prefix, within batchTol; the
// twins' positions agree after each step, and a last Decode of each
// session matches its twin's (the kept rows are in its cache). On
// stories260K and the qwen3 and gemma3 fixtures (gemma3's sliding window
// of 8 is passed), with f32, f16 and u8 caches.
func TestRunBatch(t *testing.T) {
	defer engine.SplitEverything()()
	for _, name := range []string{"stories260K", "qwen3", "gemma3"} {
		m := storiesModel(t)
		if name != "stories260K" {
			m = loadModel(t, testutil.Path(t, "arch/"+name))
		}
		for _, kv := range []string{"f32", "f16", "u8"} {
			e := compileKV(t, m, kv)
			t.Run(name+"/"+kv, func(t *testing.T) { checkRunBatch(t, e) })
		}
	}
}

func checkRunBatch(t *testing.T, e *engine.Engine) {
	vocab := e.Manifest().Vocab
	r := rand.New(rand.NewPCG(uint64(vocab), 5))
	lens := []int{3, 10, 1, 7}
	opts := engine.SessionOptions{Mode: engine.ModeHybrid, Threads: 2}
	var batched, alone []*engine.Session
	for _, n := range lens {
		prompt := make([]int, n)
		for j := range prompt {
			prompt[j] = r.IntN(vocab)
		}
		b, a := newSession(t, e, opts), newSession(t, e, opts)
		for _, s := range []*engine.Session{b, a} {
			if _, err := s.Prefill(prompt); err != nil {
				t.Fatal(err)
			}
		}
		batched, alone = append(batched, b), append(alone, a)
	}
	steps := [][]int{{0, 1, 2, 3}, {3, 1}, {2}, {1, 0, 3, 2}, {0, 2}, {3, 2, 1, 0}}
	for step, members := range steps {
		ss, chains := make([]*engine.Session, len(members)), make([][]int, len(members))
		for k, i := range members {
			chain := make([]int, 1+r.IntN(min(3, 8/len(members))))
			for j := range chain {
				chain[j] = r.IntN(vocab)
			}
			ss[k], chains[k] = batched[i], chain
		}
		got, err := e.RunBatch(ss, chains)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for k, i := range members {
			chain := chains[k]
			rows := make([]int, len(chain))
			for j := range rows {
				rows[j] = j
			}
			want, err := alone[i].Run(&engine.Pass{IDs: chain, Logits: rows})
			if err != nil {
				t.Fatal(err)
			}
			if got[k].Rows() != len(chain) {
				t.Fatalf("step %d, session %d: %d rows of logits for a chain of %d", step, i, got[k].Rows(), len(chain))
			}
			for j := range chain {
				if d := relDiff(got[k].Row(j), want.Row(j)); d > batchTol {
					t.Fatalf("step %d, session %d, row %d at position %d: batched logits differ by %g (relative) from running alone", step, i, j, alone[i].Pos()+j, d)
				}
			}
			keep := rows[:1+r.IntN(len(chain))]
			if err := batched[i].Commit(keep); err != nil {
				t.Fatalf("step %d, session %d: commit %v: %v", step, i, keep, err)
			}
			if err := alone[i].Commit(keep); err != nil {
				t.Fatal(err)
			}
			if batched[i].Pos() != alone[i].Pos() {
				t.Fatalf("step %d, session %d: position %d, alone %d", step, i, batched[i].Pos(), alone[i].Pos())
			}
		}
	}
	for i := range batched {
		id := r.IntN(vocab)
		got, err := batched[i].Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		want, err := alone[i].Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		if d := relDiff(got, want); d > batchTol {
			t.Fatalf("session %d: decoding after the batched chains differs by %g from its twin", i, d)
		}
	}
}

// TestRunBatchRefuses: chains of no rows, more rows in all than a pass
// returns logits for, a chain past a session's cache, and a chain count
// that does not match the sessions each get an error naming the problem,
// and leave the sessions where they were.
func TestRunBatchRefuses(t *testing.T) {
	e := compileModel(t, storiesModel(t), 16, 4)
	opts := engine.SessionOptions{Mode: engine.ModeHybrid}
	small := opts
	small.Context = 5
	a, b, c := newSession(t, e, opts), newSession(t, e, opts), newSession(t, e, small)
	for _, s := range []*engine.Session{a, b, c} {
		if _, err := s.Prefill([]int{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		ss     []*engine.Session
		chains [][]int
		want   string
	}{
		{"empty chain", []*engine.Session{a, b}, [][]int{{1}, {}}, "no rows"},
		{"too many rows", []*engine.Session{a, b}, [][]int{{1, 2, 3}, {4, 5}}, "at most 4"},
		{"past the cache", []*engine.Session{a, c}, [][]int{{1}, {1, 2, 3}}, "context is 5"},
		{"count", []*engine.Session{a, b}, [][]int{{1}}, "1 chains for a batch of 2"},
		{"twice", []*engine.Session{a, a}, [][]int{{1}, {2}}, "twice"},
	}
	for _, k := range cases {
		_, err := e.RunBatch(k.ss, k.chains)
		if err == nil || !strings.Contains(err.Error(), k.want) {
			t.Errorf("%s: error %v, want one containing %q", k.name, err, k.want)
		}
		if a.Pos() != 3 || b.Pos() != 3 || c.Pos() != 3 {
			t.Fatalf("%s: positions %d, %d, %d after a refused batch, want 3", k.name, a.Pos(), b.Pos(), c.Pos())
		}
	}
}
