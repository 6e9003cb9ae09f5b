package op

import (
	"math"
	"math/rand"
	"testing"
)

// TestSSMScanRowsByHand checks one head of one channel and state dim over
// two rows against the recurrence worked out in float64: S starts at 0,
// S = exp(dt' A) S + dt' b x, y = S c + D x, dt' = Softplus(dt + bias).
func TestSSMScanRowsByHand(t *testing.T) {
	x, dt, b, c := []float32{0.5, -1}, []float32{0.2, -0.3}, []float32{2, 0.5}, []float32{1.5, -2}
	A, D, bias := []float32{-0.7}, []float32{0.25}, []float32{0.1}
	S := []float32{0}
	out := make([]float32, 2)
	SSMScanRows(out, x, dt, b, c, A, D, bias, S, 2, 1, 1, 1, 1)
	var s float64
	for i := range 2 {
		d := math.Log1p(math.Exp(float64(dt[i] + bias[0])))
		s = math.Exp(d*float64(A[0]))*s + d*float64(b[i])*float64(x[i])
		want := s*float64(c[i]) + float64(D[0])*float64(x[i])
		if math.Abs(float64(out[i])-want) > 1e-6 {
			t.Errorf("row %d: %v, want %v", i, out[i], want)
		}
	}
	if math.Abs(float64(S[0])-s) > 1e-6 {
		t.Errorf("state %v, want %v", S[0], s)
	}
}

// TestSSMScanRowsChunks checks that scanning rows in chunks, the state
// carried between calls, gives the rows of one call, with heads sharing
// groups (4 heads, 2 groups).
func TestSSMScanRowsChunks(t *testing.T) {
	const T, H, P, G, N = 9, 4, 3, 2, 5
	r := rand.New(rand.NewSource(1))
	fill := func(n int, scale float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64()) * scale
		}
		return v
	}
	x, dt, b, c := fill(T*H*P, 1), fill(T*H, 1), fill(T*G*N, 1), fill(T*G*N, 1)
	A, D, bias := fill(H, 1), fill(H, 1), fill(H, 0.1)
	for i := range A {
		A[i] = -float32(math.Abs(float64(A[i])))
	}
	whole := make([]float32, T*H*P)
	SSMScanRows(whole, x, dt, b, c, A, D, bias, make([]float32, H*P*N), T, H, P, G, N)
	S := make([]float32, H*P*N)
	got := make([]float32, T*H*P)
	for lo := 0; lo < T; lo += 4 {
		n := min(4, T-lo)
		SSMScanRows(got[lo*H*P:], x[lo*H*P:], dt[lo*H:], b[lo*G*N:], c[lo*G*N:], A, D, bias, S, n, H, P, G, N)
	}
	for i := range whole {
		if got[i] != whole[i] {
			t.Fatalf("value %d: %v in chunks, %v in one call", i, got[i], whole[i])
		}
	}
	// head 3 reads group 1: changing group 0's B must leave it alone
	b2 := append([]float32(nil), b...)
	for i := 0; i < T; i++ {
		b2[i*G*N] += 1
	}
	other := make([]float32, T*H*P)
	SSMScanRows(other, x, dt, b2, c, A, D, bias, make([]float32, H*P*N), T, H, P, G, N)
	for row := 0; row < T; row++ {
		for p := 0; p < P; p++ {
			i := row*H*P + 3*P + p
			if other[i] != whole[i] {
				t.Fatalf("row %d: head 3 changed with group 0's B", row)
			}
		}
	}
	if other[H*P] == whole[H*P] { // row 1, head 0
		t.Error("head 0 did not change with group 0's B")
	}
}
