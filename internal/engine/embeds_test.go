package engine_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestPassEmbeds: a pass whose rows with id -1 read embedding rows (as an
// image's rows in a prompt) gives the interpreter's logits for the same
// input at every row, in one pass of 8 and as single-row passes; then a
// decode step after committing them agrees too.
func TestPassEmbeds(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "arch/llama"))
	e := compileKV(t, m, "f32")
	in := interpreter(t, m)
	D, V := m.Config.Hidden, m.Config.Vocab
	r := rand.New(rand.NewPCG(1, 2))
	ids := []int{5, -1, -1, 17, -1, 3, 9, -1}
	emb := make([]float32, len(ids)*D)
	for i := range emb {
		emb[i] = float32(r.NormFloat64())
	}
	// reference: the interpreter, one row at a time (its graph keeps only
	// the last row's logits)
	st := in.NewState(64)
	want := make([][]float32, len(ids))
	for i := range ids {
		out, _, err := in.RunInput(st, graph.Input{IDs: ids[i : i+1], Embeds: emb[i*D : (i+1)*D]})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = append([]float32(nil), out[:V]...)
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
		s := newSession(t, e, engine.SessionOptions{Mode: mode, Threads: 2})
		l, err := s.Run(&engine.Pass{IDs: ids, Embeds: emb, Logits: all})
		if err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			if d := relDiff(l.Row(i), want[i]); d > treeTol {
				t.Errorf("%v: row %d (id %d) differs by %.3g", mode, i, ids[i], d)
			}
		}
		s.Reset()
		for i := range ids {
			l, err := s.Run(&engine.Pass{IDs: ids[i : i+1], Embeds: emb[i*D : (i+1)*D]})
			if err != nil {
				t.Fatal(err)
			}
			if d := relDiff(l.Row(0), want[i]); d > treeTol {
				t.Errorf("%v: single row %d differs by %.3g", mode, i, d)
			}
			if err := s.Commit([]int{0}); err != nil {
				t.Fatal(err)
			}
		}
		next, err := s.Run(&engine.Pass{IDs: []int{42}})
		if err != nil {
			t.Fatal(err)
		}
		ref, _, err := in.Run(st, []int{42})
		if err != nil {
			t.Fatal(err)
		}
		if d := relDiff(next.Row(0), ref[:V]); d > treeTol {
			t.Errorf("%v: decode after embedding rows differs by %.3g", mode, d)
		}
		st.Pos--
	}
}

func TestPassEmbedsErrors(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "arch/llama"))
	e := compileKV(t, m, "f32")
	s := newSession(t, e, engine.SessionOptions{Threads: 1})
	D := m.Config.Hidden
	for _, c := range []struct {
		p    engine.Pass
		want string
	}{
		{engine.Pass{IDs: []int{1, -1}}, "outside the vocabulary"},
		{engine.Pass{IDs: []int{1, -1}, Embeds: make([]float32, D)}, "embedding values"},
		{engine.Pass{IDs: []int{-2}, Embeds: make([]float32, D)}, "outside the vocabulary"},
	} {
		if _, err := s.Run(&c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ids %v, %d embedding values: error %v, want %q", c.p.IDs, len(c.p.Embeds), err, c.want)
		}
	}
}
