package quant

import (
	"math"
	"testing"
)

// TestW8ErrorBound: q in -127..127 and |w - w'| <= s/2 for every weight, with
// s = max|w in row|/127.
func TestW8ErrorBound(t *testing.T) {
	cases := map[string][]float32{
		"gauss":    gaussian(21, 64*256, 1),
		"outliers": withOutliers(gaussian(22, 64*256, 0.02), 23, 0.01, 30),
	}
	w0 := gaussian(24, 64*256, 1)
	clear(w0[256*5 : 256*6]) // a zero row
	cases["zero-row"] = w0
	for name, w := range cases {
		q, err := QuantizeW8(w, 64, 256)
		if err != nil {
			t.Fatal(err)
		}
		deq := q.Dequantize()
		for r := range 64 {
			row := w[r*256 : (r+1)*256]
			if want := float32(absMax(row) / 127); q.Scales[r] != want {
				t.Fatalf("%s: row %d scale %v, want max|w|/127 = %v", name, r, q.Scales[r], want)
			}
			s := float64(q.Scales[r])
			for c := range 256 {
				i := r*256 + c
				if q.Q[i] < -127 {
					t.Fatalf("%s: q[%d] = %d", name, i, q.Q[i])
				}
				if deq[i] != float32(q.Q[i])*q.Scales[r] {
					t.Fatalf("%s: dequant formula", name)
				}
				if e := math.Abs(float64(w[i]) - float64(deq[i])); !within(e, s/2, s*127) {
					t.Fatalf("%s: w[%d,%d] error %g > s/2 = %g", name, r, c, e, s/2)
				}
			}
		}
		st, _ := q.Error(w)
		t.Logf("w8 %s: %v, %.3f bits/weight", name, st, q.BitsPerWeight())
	}
	if q, _ := QuantizeW8(w0, 64, 256); q.Scales[5] != 0 || q.Q[256*5] != 0 {
		t.Error("zero row not quantized to s = 0, q = 0")
	}
}
