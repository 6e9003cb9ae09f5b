package engine_test

import (
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestPassPositions: a pass whose rows carry M-RoPE positions apart from
// their cache positions (Qwen2-VL's text model: three components a row,
// an image's rows at (p0, p0+row, p0+col), the text after them at
// p0+max(rows, cols)) gives the interpreter's logits at every row; so does
// a decode step after committing it, and the same pass without positions
// equals plain rows at (p, p, p).
func TestPassPositions(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "vlm/qwen2vl"))
	if len(m.Config.RopeSections) != 3 {
		t.Fatalf("rope sections %v, want three", m.Config.RopeSections)
	}
	e := compileKV(t, m, "f32")
	if e.PosComponents() != 3 {
		t.Fatalf("engine reads %d position components, want 3", e.PosComponents())
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, m.Weights, 1)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.Vocab
	ids := []int{17, 200, 33, 91, 5, 250, 120, 64}
	// text 0, 1; a 2x2 "image" at p0 = 2; text from 2+2 = 4
	pos := []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 2, 3, 2, 2, 3, 3, 4, 4, 4, 5, 5, 5}
	st := in.NewState(16)
	want, _, err := in.RunInput(st, graph.Input{IDs: ids, Positions: pos})
	if err != nil {
		t.Fatal(err)
	}
	next := []int{6, 6, 6}
	wantNext, _, err := in.RunInput(st, graph.Input{IDs: []int{300}, Positions: next})
	if err != nil {
		t.Fatal(err)
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	s := newSession(t, e, engine.SessionOptions{Threads: 2})
	l, err := s.Run(&engine.Pass{IDs: ids, Positions: pos, Logits: all})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		if d := relDiff(l.Row(i), want[i*V:(i+1)*V]); d > treeTol {
			t.Errorf("row %d differs from the interpreter by %.3g", i, d)
		}
	}
	if err := s.Commit(all); err != nil {
		t.Fatal(err)
	}
	l, err = s.Run(&engine.Pass{IDs: []int{300}, Positions: next})
	if err != nil {
		t.Fatal(err)
	}
	if d := relDiff(l.Row(0), wantNext); d > treeTol {
		t.Errorf("decode step differs from the interpreter by %.3g", d)
	}
	// positions (p, p, p) are plain RoPE
	s.Reset()
	plain := make([]int, 3*len(ids))
	for i := range plain {
		plain[i] = i / 3
	}
	a, err := s.Run(&engine.Pass{IDs: ids, Positions: plain, Logits: all})
	if err != nil {
		t.Fatal(err)
	}
	rowsA := make([][]float32, len(ids))
	for i := range ids {
		rowsA[i] = append([]float32(nil), a.Row(i)...)
	}
	s.Reset()
	b, err := s.Run(&engine.Pass{IDs: ids, Logits: all})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		if d := maxDiff(rowsA[i], b.Row(i)); d != 0 {
			t.Errorf("row %d: positions (p,p,p) differ from none by %.3g", i, d)
		}
	}
	// a wrong count is refused
	s.Reset()
	if _, err := s.Run(&engine.Pass{IDs: ids, Positions: pos[:5]}); err == nil {
		t.Error("5 position values for 8 rows accepted")
	}
}

// TestTextAfterPositions: once a pass placed rows at rotary positions of
// their own (an image's, Qwen2-VL's M-RoPE), every later pass without
// positions continues from the largest of them plus one, as the
// interpreter given those positions explicitly: Decode, Prefill, a tree
// pass, a batched decode next to a plain session, and after rewinding
// into the image and placing its last rows again.
func TestTextAfterPositions(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "vlm/qwen2vl"))
	e := compileKV(t, m, "f32")
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, m.Weights, 1)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.Vocab
	ids := []int{17, 200, 33, 91, 5, 250, 120, 64}
	// text 0, 1; four "image" rows at p0 = 2, the last at (2, 3, 4), so
	// the text after them starts at 5
	pos := []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 2, 3, 2, 2, 3, 4, 5, 5, 5, 6, 6, 6}
	st := in.NewState(16)
	if _, _, err := in.RunInput(st, graph.Input{IDs: ids, Positions: pos}); err != nil {
		t.Fatal(err)
	}
	want := make([][]float32, 3) // after 300 at 7, 301 at 8, 302 at 9
	for i := range want {
		q := 7 + i
		want[i], _, err = in.RunInput(st, graph.Input{IDs: []int{300 + i}, Positions: []int{q, q, q}})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = want[i][len(want[i])-V:]
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	s := newSession(t, e, engine.SessionOptions{Threads: 2})
	place := func() {
		t.Helper()
		s.Reset()
		if _, err := s.Run(&engine.Pass{IDs: ids, Positions: pos, Logits: []int{}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(all); err != nil {
			t.Fatal(err)
		}
		if s.NextPosition() != 7 || s.Pos() != 8 {
			t.Fatalf("after the image: next rotary position %d at cache position %d, want 7 at 8", s.NextPosition(), s.Pos())
		}
	}
	check := func(what string, got []float32, i int) {
		t.Helper()
		if d := relDiff(got, want[i]); d > treeTol {
			t.Errorf("%s: token %d differs from the interpreter by %.3g", what, i, d)
		}
	}
	place()
	for i := range want {
		l, err := s.Decode(300 + i)
		if err != nil {
			t.Fatal(err)
		}
		check("Decode", l, i)
	}
	if s.NextPosition() != 10 {
		t.Errorf("after three decodes the next rotary position is %d, want 10", s.NextPosition())
	}
	// rewinding to the text keeps its shift
	if err := s.Rewind(10); err != nil {
		t.Fatal(err)
	}
	l, err := s.Decode(302)
	if err != nil {
		t.Fatal(err)
	}
	check("Decode after Rewind", l, 2)

	place()
	l, err = s.Prefill([]int{300, 301})
	if err != nil {
		t.Fatal(err)
	}
	check("Prefill", l, 1)

	// a tree pass: branches [300 301] and [300 302 (unused)]
	place()
	mask, err := engine.TreeMask([]int{-1, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	lt, err := s.Run(&engine.Pass{IDs: []int{300, 301, 303}, Mask: mask, Logits: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	check("tree pass", lt.Row(0), 0)
	check("tree pass", lt.Row(1), 1)
	if err := s.Commit([]int{0, 1}); err != nil {
		t.Fatal(err)
	}
	l, err = s.Decode(302)
	if err != nil {
		t.Fatal(err)
	}
	check("Decode after a tree pass", l, 2)

	// a batched decode next to a plain session
	place()
	plain := newSession(t, e, engine.SessionOptions{Threads: 1})
	if _, err := plain.Prefill([]int{9, 8, 7}); err != nil {
		t.Fatal(err)
	}
	solo := newSession(t, e, engine.SessionOptions{Threads: 1})
	if _, err := solo.Prefill([]int{9, 8, 7}); err != nil {
		t.Fatal(err)
	}
	wantPlain, err := solo.Decode(40)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.DecodeBatch([]*engine.Session{plain, s}, []int{40, 300})
	if err != nil {
		t.Fatal(err)
	}
	check("DecodeBatch", out[1], 0)
	if d := relDiff(out[0], wantPlain); d > treeTol {
		t.Errorf("DecodeBatch: the plain session's row differs from its solo decode by %.3g", d)
	}
	l, err = s.Decode(301)
	if err != nil {
		t.Fatal(err)
	}
	check("Decode after DecodeBatch", l, 1)

	// rewinding into the image and placing its last rows again
	place()
	if err := s.Rewind(4); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(&engine.Pass{IDs: ids[4:], Positions: pos[12:], Logits: []int{}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]int{0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	l, err = s.Decode(300)
	if err != nil {
		t.Fatal(err)
	}
	check("Decode after re-placing the image's end", l, 0)
}
