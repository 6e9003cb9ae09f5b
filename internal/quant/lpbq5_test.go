package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lpbq5TestWeights are rows of normal weights with a few outliers, as
// trained linears have.
func lpbq5TestWeights(r *rand.Rand, rows, cols int) []float32 {
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.02)
		if r.IntN(50) == 0 {
			w[i] *= 6
		}
	}
	return w
}

// TestLPBQ5Search holds QuantizeLPBQ5 to what its search promises, on
// random rows (a width with a short last block among them): every row's
// squared error is at most the plain rule's, each block's code is the
// best of 1..16 for the row's scale (checked by brute force), every
// integer is the nearest point of its block's grid, and over the matrix
// the search lowers the error by a clear margin.
func TestLPBQ5Search(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 5))
	for _, cols := range []int{192, 512, 72} {
		const rows = 24
		w := lpbq5TestWeights(r, rows, cols)
		q, err := QuantizeLPBQ5(w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		if q.Padded != (cols%32 != 0) {
			t.Errorf("cols %d: padded %v", cols, q.Padded)
		}
		deq := q.Dequantize()
		nb := q.BlocksPerRow()
		plain := &Quantized{Q: make([]int8, cols), Codes: make([]uint8, nb), Scales: make([]float32, 1)}
		var total, totalPlain float64
		for row := range rows {
			x := w[row*cols : (row+1)*cols]
			lpbqRow(x, 32, 15, LPBQRefined, make([]float64, nb), plain.Q, plain.Codes, &plain.Scales[0])
			var e, ePlain float64
			for c, v := range x {
				d := float64(v) - float64(deq[row*cols+c])
				e += d * d
				dp := float64(v) - float64(float32(int32(plain.Q[c])*int32(plain.Codes[c/32]))*plain.Scales[0])
				ePlain += dp * dp
			}
			if e > ePlain*(1+1e-12) {
				t.Errorf("cols %d row %d: error %g above the plain rule's %g", cols, row, e, ePlain)
			}
			total, totalPlain = total+e, totalPlain+ePlain
			S := q.Scales[row]
			for b := range nb {
				lo, hi := b*32, min((b+1)*32, cols)
				k := int(q.Codes[row*nb+b])
				got := lpbq5BlockErr(x[lo:hi], k, S)
				for alt := 1; alt <= 16; alt++ {
					if e := lpbq5BlockErr(x[lo:hi], alt, S); e < got*(1-1e-12) {
						t.Errorf("cols %d row %d block %d: code %d has error %g, code %d %g", cols, row, b, k, got, alt, e)
					}
				}
				step := float64(k) * float64(S)
				for c := lo; c < hi; c++ {
					v := int(q.Q[row*cols+c])
					if v < -15 || v > 15 {
						t.Fatalf("integer %d out of -15..15", v)
					}
					if want := roundClamp(float64(x[c])/step, -15, 15); v != want {
						t.Errorf("cols %d row %d input %d: integer %d, nearest %d", cols, row, c, v, want)
					}
				}
			}
		}
		// measured: 0.92 to 0.95 of the plain rule's error on these weights
		if total > 0.97*totalPlain {
			t.Errorf("cols %d: searched error %g, plain %g: the search gained less than 3%%", cols, total, totalPlain)
		}
	}
}

// TestLPBQ5EdgeRows: rows of zeros and constant rows quantize to finite
// scales with the zeros exact, and bad shapes are refused.
func TestLPBQ5EdgeRows(t *testing.T) {
	w := make([]float32, 3*64)
	for i := 64; i < 128; i++ {
		w[i] = 0.5
	}
	w[130] = -3
	q, err := QuantizeLPBQ5(w, 3, 64)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range q.Dequantize() {
		if math.IsNaN(float64(v)) || (w[i] == 0 && v != 0) {
			t.Fatalf("weight %d: %g for %g", i, v, w[i])
		}
		if d := math.Abs(float64(v - w[i])); d > 0.05*math.Abs(float64(w[i]))+1e-6 {
			t.Errorf("weight %d: %g for %g", i, v, w[i])
		}
	}
	if _, err := QuantizeLPBQ5(w, 4, 64); err == nil {
		t.Error("a short matrix was quantized")
	}
}
