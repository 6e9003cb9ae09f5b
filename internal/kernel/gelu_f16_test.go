package kernel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// TestGELUF16: on random inputs over [-12, 12] (and the edges of the
// table's range), gelu_f16 is 0 at or below -10, the input at or above
// 10, and in between the binary16 rounding of the tanh GELU of the
// input's binary16 rounding; within binary16's resolution (1e-3
// relative, 1e-4 absolute) of the float64 tanh GELU.
func TestGELUF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := []float32{-10, -9.999, 9.999, 10, 0, -0.0, 1e-8, -1e-8, 65504}
	for range 20000 {
		x = append(x, float32(r.Float64()*24-12))
	}
	got := make([]float32, len(x))
	GELUF16(got, x)
	for i, v := range x {
		var want float32
		switch {
		case v <= -10:
			want = 0
		case v >= 10:
			want = v
		default:
			h := tensor.F16ToF32(tensor.F32ToF16(v))
			want = tensor.F16ToF32(tensor.F32ToF16(geluTanh32(h)))
		}
		if got[i] != want {
			t.Fatalf("gelu_f16(%v) = %v, want %v", v, got[i], want)
		}
		if v > -10 && v < 10 {
			xf := float64(v)
			exact := 0.5 * xf * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(xf+0.044715*xf*xf*xf)))
			if d := math.Abs(float64(got[i]) - exact); d > 1e-4+1e-3*math.Abs(exact) {
				t.Fatalf("gelu_f16(%v) = %v, the tanh GELU is %v", v, got[i], exact)
			}
		}
	}
}
