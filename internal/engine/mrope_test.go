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
