package quant

import "testing"

// TestErrorRowsEqualCompare: Error, which dequantizes a row at a time, gives
// exactly Compare against the whole Dequantize for every scheme.
func TestErrorRowsEqualCompare(t *testing.T) {
	const rows, cols = 7, 80
	w := withOutliers(gaussian(5, rows*cols, 0.02), 6, 0.01, 20)
	for _, s := range []Scheme{{Kind: KindLPBQ, Block: 32}, {Kind: KindLPBQ, Block: 64}, {Kind: KindW8},
		{Kind: KindQ4, Block: 32, Sym: true}, {Kind: KindQ4, Block: 32}, {Kind: KindF16}} {
		q, err := Quantize(w, rows, cols, s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Compare(w, q.Dequantize())
		if err != nil {
			t.Fatal(err)
		}
		got, err := q.Error(w)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || got.Relative == 0 && s.Kind != KindF16 {
			t.Errorf("%v: Error %v, Compare %v", s, got, want)
		}
	}
	q, _ := Quantize(w, rows, cols, Scheme{Kind: KindW8})
	if _, err := q.Error(w[1:]); err == nil {
		t.Error("Error accepted a short original")
	}
}
