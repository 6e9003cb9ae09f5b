package eval

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestNLLAgainstNaive compares NLL with the textbook formula
// -log(exp(l_t) / sum_j exp(l_j)) in float64 on random logits in [-20, 20]
// (where the naive form cannot overflow), within 1e-12 absolute.
func TestNLLAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		V := 1 + r.IntN(300)
		row := make([]float32, V)
		for i := range row {
			row[i] = float32(r.Float64()*40 - 20)
		}
		tgt := r.IntN(V)
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v))
		}
		want := -math.Log(math.Exp(float64(row[tgt])) / sum)
		got, err := NLL(row, tgt)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-want) > 1e-12 {
			t.Fatalf("trial %d V=%d: NLL %v, naive %v", trial, V, got, want)
		}
	}
}

// TestNLLShiftInvariant: adding a constant to every logit leaves the
// log-softmax unchanged, also far beyond where exp overflows. Logits are
// multiples of 1/8 and the shifts powers of two, so every float32 is exact.
func TestNLLShiftInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		V := 2 + r.IntN(100)
		row := make([]float32, V)
		for i := range row {
			row[i] = float32(r.IntN(161)-80) / 8
		}
		tgt := r.IntN(V)
		base, err := NLL(row, tgt)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []float32{1024, -1024, 65536} {
			sh := make([]float32, V)
			for i := range row {
				sh[i] = row[i] + c
			}
			got, err := NLL(sh, tgt)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-base) > 1e-12 {
				t.Fatalf("shift %v: %v, unshifted %v", c, got, base)
			}
		}
	}
}

func TestNLLEdges(t *testing.T) {
	ninf := float32(math.Inf(-1))
	// One certain token: nll 0; a -Inf logit elsewhere is a zero probability.
	if v, err := NLL([]float32{ninf, 3, ninf}, 1); err != nil || v != 0 {
		t.Errorf("certain token: %v, %v; want 0", v, err)
	}
	// The true token has probability zero: no finite value.
	if _, err := NLL([]float32{ninf, 3}, 0); err == nil {
		t.Error("zero-probability target: no error")
	}
	if _, err := NLL([]float32{float32(math.Inf(1)), 3}, 1); err == nil {
		t.Error("+Inf logit: no error")
	}
	for _, tgt := range []int{-1, 2, math.MaxInt} {
		if _, err := NLL([]float32{1, 2}, tgt); err == nil {
			t.Errorf("target %d of 2: no error", tgt)
		}
	}
	if _, err := NLL(nil, 0); err == nil {
		t.Error("empty row: no error")
	}
}
