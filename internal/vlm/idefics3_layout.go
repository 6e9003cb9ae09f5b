package vlm

import "fmt"

// Marker pieces of the Idefics3 prompt layout.
const (
	FakeToken = "<fake_token_around_image>"
	GlobalImg = "<global-img>"
	ImageTok  = "<image>"
)

// Layout places an encoded image in a prompt as llama.cpp's mtmd does for
// Idefics3 models: for each slice, row by row, <fake_token_around_image>
// <row_r_col_c> then its embedding rows, a "\n" after each grid row
// ("\n\n" after the last), then <fake_token_around_image><global-img>, the
// overview's rows and a closing <fake_token_around_image>. It returns the
// ids (-1 at embedding rows) and the embedding rows (zero at text rows).
// piece looks a marker up in the vocabulary.
func Layout(img *Image, width int, piece func(string) (int, bool)) ([]int, []float32, error) {
	look := func(s string) (int, error) {
		id, ok := piece(s)
		if !ok {
			return 0, fmt.Errorf("the vocabulary has no token %q for image markers", s)
		}
		return id, nil
	}
	var ids []int
	var emb []float32
	text := func(s string) error {
		id, err := look(s)
		if err != nil {
			return err
		}
		ids = append(ids, id)
		emb = append(emb, make([]float32, width)...)
		return nil
	}
	rows := func(e []float32) {
		for i := 0; i < len(e)/width; i++ {
			ids = append(ids, -1)
		}
		emb = append(emb, e...)
	}
	for r := 0; r < img.Rows; r++ {
		for c := 0; c < img.Cols; c++ {
			if err := text(FakeToken); err != nil {
				return nil, nil, err
			}
			if err := text(fmt.Sprintf("<row_%d_col_%d>", r+1, c+1)); err != nil {
				return nil, nil, err
			}
			rows(img.Slices[r*img.Cols+c])
		}
		nl := "\n"
		if r == img.Rows-1 {
			nl = "\n\n"
		}
		if err := text(nl); err != nil {
			return nil, nil, err
		}
	}
	for _, s := range []string{FakeToken, GlobalImg} {
		if err := text(s); err != nil {
			return nil, nil, err
		}
	}
	rows(img.Overview)
	if err := text(FakeToken); err != nil {
		return nil, nil, err
	}
	return ids, emb, nil
}
