package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestInterleave: within each head, row a·d/2 + i of the rotate-half
// order becomes row 2i + a.
func TestInterleave(t *testing.T) {
	const heads, d, cols = 2, 4, 3
	w := make([]float32, heads*d*cols)
	for r := 0; r < heads*d; r++ {
		for c := 0; c < cols; c++ {
			w[r*cols+c] = float32(100*r + c)
		}
	}
	got, err := interleave(w, heads, cols)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := []int{0, 2, 1, 3, 4, 6, 5, 7} // source row of each output row
	for r, src := range wantRows {
		for c := 0; c < cols; c++ {
			if got[r*cols+c] != float32(100*src+c) {
				t.Fatalf("row %d col %d = %v, want source row %d", r, c, got[r*cols+c], src)
			}
		}
	}
	if _, err := interleave(w, 5, cols); err == nil {
		t.Error("8 rows in 5 heads: no error")
	}
}

// TestConvertWPLlama: the GGUF written from the wp-llama folder gives the
// folder's logits (the q/k permutation matches llama.cpp's rotary layout)
// and carries its SentencePiece vocabulary.
func TestConvertWPLlama(t *testing.T) {
	src := testutil.Path(t, "models/wp-llama")
	out := filepath.Join(t.TempDir(), "wp.gguf")
	if err := convert(src, out); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if toks, ok := f.Metadata()["tokenizer.ggml.tokens"]; !ok || lenOf(toks) != 512 {
		t.Errorf("tokenizer.ggml.tokens: %T (want 512 pieces)", toks)
	}
	f.Close()
	ids := []int{1, 313, 448, 411, 306, 432, 359, 262, 415, 388, 397}
	logits := func(path string) [][]float32 {
		m, err := load.Float(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := qdq.NewSession(m, 64, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Logits(ids)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := logits(src), logits(out)
	var worst float64
	for i := range a {
		for j := range a[i] {
			worst = math.Max(worst, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	if len(a) != len(ids) || worst > 1e-4 {
		t.Errorf("%d rows, max |logit diff| %g between the folder and its GGUF (tolerance 1e-4)", len(a), worst)
	}
}

func lenOf(v any) int {
	switch x := v.(type) {
	case []string:
		return len(x)
	case []any:
		return len(x)
	}
	return -1
}
