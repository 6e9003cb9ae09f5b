package vlm

import (
	"fmt"
	"testing"
)

// TestLayoutGrid: a 2x2 grid is laid out as mtmd's idefics3 template does:
// slices row by row, each after <fake_token_around_image><row_r_col_c>,
// "\n" between grid rows (none after the last), then "\n\n", the
// overview between its markers.
func TestLayoutGrid(t *testing.T) {
	vocab := map[string]int{FakeToken: 100, GlobalImg: 101, "\n": 102, "\n\n": 103}
	for r := 1; r <= 2; r++ {
		for c := 1; c <= 2; c++ {
			vocab[fmt.Sprintf("<row_%d_col_%d>", r, c)] = 110 + 10*r + c
		}
	}
	piece := func(s string) (int, bool) { id, ok := vocab[s]; return id, ok }
	const w = 2
	img := &Image{Rows: 2, Cols: 2, Overview: []float32{9, 9}}
	for i := range 4 {
		img.Slices = append(img.Slices, []float32{float32(i), float32(i)})
	}
	ids, emb, err := Layout(img, w, piece)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{100, 121, -1, 100, 122, -1, 102, 100, 131, -1, 100, 132, -1, 103, 100, 101, -1, 100}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	var got []float32
	for i, id := range ids {
		if id == -1 {
			got = append(got, emb[i*w])
		} else if emb[i*w] != 0 || emb[i*w+1] != 0 {
			t.Fatalf("text row %d has embedding values", i)
		}
	}
	if fmt.Sprint(got) != "[0 1 2 3 9]" {
		t.Fatalf("image rows in order %v", got)
	}
	delete(vocab, GlobalImg)
	if _, _, err := Layout(img, w, piece); err == nil {
		t.Fatal("missing marker accepted")
	}
}
