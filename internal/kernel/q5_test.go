package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randQ5 is a random 5-bit weight and its integers q = u - 16.
func randQ5(r *rand.Rand, N, K int) (*Q5, []int32) {
	u := make([]uint8, N*K)
	q := make([]int32, N*K)
	for i := range u {
		u[i] = uint8(1 + r.IntN(31))
		q[i] = int32(u[i]) - 16
	}
	w := &Q5{N: N, K: K, Nib: make([]byte, N*K/2), Hi: make([]byte, N*K/8),
		Codes: make([]uint8, N*K/QK), Scales: make([]float32, N)}
	if err := PackQ5(w.Nib, w.Hi, u); err != nil {
		panic(err)
	}
	for i := range w.Codes {
		w.Codes[i] = uint8(1 + r.IntN(16))
	}
	for i := range w.Scales {
		w.Scales[i] = float32(r.Float64()*0.01 + 1e-4)
	}
	return w, q
}

// TestQ5PackRow: the packed codes read back as the integers packed, and
// Row dequantizes them by the rule; a code past 5 bits is refused.
func TestQ5PackRow(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const N, K = 3, 4 * QK
	w, q := randQ5(r, N, K)
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		for k, got := range row {
			want := float32(q[n*K+k]*int32(w.Codes[n*(K/QK)+k/QK])) * w.Scales[n]
			if got != want {
				t.Fatalf("row %d input %d: %g, want %g", n, k, got, want)
			}
		}
	}
	if err := PackQ5(make([]byte, 4), make([]byte, 1), []uint8{0, 1, 2, 32, 4, 5, 6, 7}); err == nil {
		t.Error("a code of 32 was packed")
	}
	if err := (&Q5{N: 1, K: 48}).Check(); err == nil {
		t.Error("K = 48 passed Check")
	}
}

// TestQ5MatMulMeaning: the product against the float64 sum of the
// dequantized weights times the dequantized activations, on random
// weights and activations, within 1e-5 of the sum of the terms' magnitudes.
func TestQ5MatMulMeaning(t *testing.T) {
	r := rand.New(rand.NewPCG(55, 56))
	const N, K, T = 7, 6 * QK, 3
	w, _ := randQ5(r, N, K)
	x, _ := randQ8(r, T, K)
	dst := make([]float32, T*N)
	for i := range dst {
		dst[i] = float32(math.NaN()) // every output is written
	}
	w.MatMul(dst, N, x, 0, N)
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		for tt := range T {
			var want, mag float64
			for k := range K {
				v := float64(row[k]) * float64(x.Q[tt*K+k]) * float64(x.D[tt*(K/QK)+k/QK])
				want += v
				mag += math.Abs(v)
			}
			if d := math.Abs(float64(dst[tt*N+n]) - want); !(d <= 1e-5*mag+1e-9) {
				t.Errorf("[%d][%d] = %g, want %g (|diff| %g, Σ|terms| %g)", tt, n, dst[tt*N+n], want, d, mag)
			}
		}
	}
	// a row range leaves the other outputs alone
	part := make([]float32, T*N)
	w.MatMul(part, N, x, 2, 5)
	for tt := range T {
		for n := range N {
			if in := n >= 2 && n < 5; (in && part[tt*N+n] != dst[tt*N+n]) || (!in && part[tt*N+n] != 0) {
				t.Errorf("rows [2, 5): output [%d][%d] = %g", tt, n, part[tt*N+n])
			}
		}
	}
}
