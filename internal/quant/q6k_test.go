package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ6KQuantize: every integer in -32..31, every value within half a
// step (d*sub) of its weight, the formula of Quantized.Dequantize, and an
// error between w8's and q4's on the same Gaussian weights.
func TestQ6KQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	const rows, cols = 48, 3 * Q6KSuper
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64()) * 0.02
	}
	w[7] = 0.5 // an outlier
	for i := 5 * Q6KGroup; i < 6*Q6KGroup; i++ {
		w[i] = 0 // a group of zeros
	}
	q, err := Quantize(w, rows, cols, Scheme{Kind: KindQ6K})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Q) != rows*cols || len(q.Sub) != rows*cols/Q6KGroup || len(q.Scales) != rows*cols/Q6KSuper {
		t.Fatalf("parts %d, %d, %d", len(q.Q), len(q.Sub), len(q.Scales))
	}
	deq := q.Dequantize()
	for i, v := range w {
		if q.Q[i] < -32 || q.Q[i] > 31 {
			t.Fatalf("q[%d] = %d", i, q.Q[i])
		}
		step := float64(float32(q.Scales[i/Q6KSuper] * float32(q.Sub[i/Q6KGroup])))
		want := float32(step) * float32(q.Q[i])
		if deq[i] != want {
			t.Fatalf("dequantized [%d] = %g, formula %g", i, deq[i], want)
		}
		// clamped values (the extreme of a group whose sub-scale rounded
		// down) may sit further than half a step
		if e := math.Abs(float64(v) - float64(deq[i])); e > math.Abs(step)/2*1.0001 && q.Q[i] != -32 && q.Q[i] != 31 {
			t.Fatalf("w[%d] = %g dequantized to %g, step %g", i, v, deq[i], step)
		}
	}
	if deq[5*Q6KGroup] != 0 {
		t.Fatal("a group of zeros did not stay zero")
	}
	e6, _ := q.Error(w)
	q8, _ := Quantize(w, rows, cols, Scheme{Kind: KindW8})
	q4, _ := Quantize(w, rows, cols, Scheme{Kind: KindQ4, Block: 32, Sym: true})
	e8, _ := q8.Error(w)
	e4, _ := q4.Error(w)
	t.Logf("relative error: w8 %.4g, q6k %.4g, q4 %.4g; q6k %.3f bits", e8.Relative, e6.Relative, e4.Relative, q.BitsPerWeight())
	if !(e6.Relative < e4.Relative/3) || e6.Relative > 0.03 {
		t.Errorf("q6k relative error %.4g (q4 %.4g)", e6.Relative, e4.Relative)
	}
	if b := q.BitsPerWeight(); math.Abs(b-6.625) > 1e-9 {
		t.Errorf("%g bits a weight, want 6.625", b)
	}
}

// TestQ6KRefuses: widths not a multiple of 256, and a scheme with a block.
func TestQ6KRefuses(t *testing.T) {
	w := make([]float32, 2*288)
	for i := range w {
		w[i] = float32(i%7) - 3
	}
	if _, err := Quantize(w, 2, 288, Scheme{Kind: KindQ6K}); err == nil {
		t.Fatal("q6k of width 288 quantized")
	}
	if _, err := Quantize(w, 2, 288, Scheme{Kind: KindQ6K, Block: 32}); err == nil {
		t.Fatal("q6k with a block validated")
	}
	w[3] = float32(math.NaN())
	if _, err := QuantizeQ6K(w[:256], 1, 256); err == nil {
		t.Fatal("a NaN weight quantized")
	}
}
