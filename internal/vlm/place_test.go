package vlm

import (
	"slices"
	"testing"
)

// TestSequencePositions: rows without relative positions (SmolVLM) sit at
// consecutive positions with the markers between them; a Qwen2-VL image
// of 2x3 tokens sits at (p0, p0+row, p0+col) and the text after it at
// p0+3; embedding rows land at the -1 ids in order.
func TestSequencePositions(t *testing.T) {
	const w = 2
	rows := func(n int, base float32) []float32 {
		r := make([]float32, n*w)
		for i := range r {
			r[i] = base + float32(i)
		}
		return r
	}
	s := NewSequence(w, 1)
	s.Text(7)
	if err := s.Image(&Placed{IDs: []int{1, -1, -1, 2, -1, 3}, Rows: rows(3, 10)}); err != nil {
		t.Fatal(err)
	}
	s.Text(8)
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(s.Positions, want) {
		t.Fatalf("positions %v, want %v", s.Positions, want)
	}
	if want := []float32{0, 0, 0, 0, 10, 11, 12, 13, 0, 0, 14, 15}; !slices.Equal(s.Embeds[:12], want) {
		t.Fatalf("embeddings %v, want %v", s.Embeds[:12], want)
	}

	q := NewSequence(w, 3)
	q.Text(5, 6)
	p := &Placed{IDs: oneRun(1, 6, 2), Rows: rows(6, 0), Span: 3}
	for r := 0; r < 2; r++ {
		for c := 0; c < 3; c++ {
			p.Pos = append(p.Pos, 0, r, c)
		}
	}
	if err := q.Image(p); err != nil {
		t.Fatal(err)
	}
	q.Text(9)
	want := []int{0, 0, 0, 1, 1, 1, 2, 2, 2, // text, <|vision_start|>
		3, 3, 3, 3, 3, 4, 3, 3, 5, 3, 4, 3, 3, 4, 4, 3, 4, 5, // image at p0 = 3
		6, 6, 6, 7, 7, 7} // <|vision_end|> at p0+3, then text
	if !slices.Equal(q.Positions, want) {
		t.Fatalf("positions %v, want %v", q.Positions, want)
	}
	if err := NewSequence(w, 3).Image(&Placed{IDs: oneRun(1, 2, 2), Rows: rows(3, 0), Pos: make([]int, 9), Span: 2}); err == nil {
		t.Error("a layout with fewer image rows than the image accepted")
	}
	if err := NewSequence(w, 3).Image(&Placed{IDs: oneRun(1, 2, 2), Rows: rows(2, 0), Pos: make([]int, 5)}); err == nil {
		t.Error("positions of the wrong length accepted")
	}
}
