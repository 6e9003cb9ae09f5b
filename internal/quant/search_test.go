package quant

import (
	"math"
	"math/rand"
	"testing"
)

// TestSearchGrid checks the grid search against exhaustive enumeration on
// small LPBQ rows (every code of every block: the weighted error is
// separable by block, so the per-block choice must equal the joint best),
// and that for every scheme it never raises the weighted error.
func TestSearchGrid(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	const n, k = 6, 64
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64() * (1 + 3*float64(i%k%7)/7))
	}
	imp := make([]float64, k)
	for i := range imp {
		imp[i] = math.Exp(r.NormFloat64())
	}
	werr := func(q *Quantized) float64 {
		d := q.Dequantize()
		var e float64
		for i := range w {
			x := float64(w[i]) - float64(d[i])
			e += imp[i%k] * x * x
		}
		return e
	}
	for _, s := range []Scheme{{Kind: KindLPBQ, Block: 32}, {Kind: KindQ4, Block: 32, Sym: true}, {Kind: KindW8}} {
		q, err := Quantize(w, n, k, s)
		if err != nil {
			t.Fatal(err)
		}
		before := werr(q)
		if err := SearchGrid(q, w, imp); err != nil {
			t.Fatal(err)
		}
		after := werr(q)
		t.Logf("%v: weighted error %.4g -> %.4g", s, before, after)
		if !(after <= before) {
			t.Errorf("%v: search raised the error %v -> %v", s, before, after)
		}
		if s.Kind == KindLPBQ {
			// exhaustive: for each block, the best code by direct rounding
			for row := range n {
				for b := range 2 {
					bestE := math.Inf(1)
					for code := 1; code <= 16; code++ {
						step := float64(code) * float64(q.Scales[row])
						var e float64
						for c := b * 32; c < (b+1)*32; c++ {
							x := float64(w[row*k+c])
							v := math.Max(-7, math.Min(7, math.RoundToEven(x/step)))
							d := x - float64(float32(int32(v)*int32(code))*q.Scales[row])
							e += imp[c] * d * d
						}
						bestE = math.Min(bestE, e)
					}
					var got float64
					dq := q.Dequantize()
					for c := b * 32; c < (b+1)*32; c++ {
						d := float64(w[row*k+c]) - float64(dq[row*k+c])
						got += imp[c] * d * d
					}
					if math.Abs(got-bestE) > 1e-9*(1+bestE) {
						t.Fatalf("row %d block %d: error %v, exhaustive best %v", row, b, got, bestE)
					}
				}
			}
		}
	}
}
