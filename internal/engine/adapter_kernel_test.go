package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// applyOne runs adapterTask's rank products for one row, then adds them
// in two column ranges as two threads would.
func applyOne(l *adapterLinear, y, x []float32, scale float32) {
	var a adapterTask
	a.reset(x, 1, l.in)
	a.out[0], a.n[0] = y, l.out
	a.lin[0], a.scale[0] = l, scale*l.scale
	for r := 0; r < l.rank; r++ {
		a.items, a.u = append(a.items, int32(r)), append(a.u, 0)
	}
	a.run(0, 0, len(a.items))
	a.addColumns(0, 0, l.out/3)
	a.addColumns(0, l.out/3, l.out)
}

// TestAdapterApplyReference checks the SIMD low-rank product (Dot and
// Axpy over A's and Bᵀ's rows, float32 and binary16) against its plain
// float64 reference on random inputs, within 1e-4 of the largest |y|.
func TestAdapterApplyReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ rank, in, out int }{{1, 1, 1}, {4, 64, 96}, {16, 1024, 2048}, {3, 37, 129}} {
		l := AdapterLinear{Weight: "w", Rank: c.rank, In: c.in, Out: c.out, Scale: 0.5,
			A: make([]float32, c.rank*c.in), B: make([]float32, c.out*c.rank)}
		for i := range l.A {
			l.A[i] = float32(rng.NormFloat64())
		}
		for i := range l.B {
			l.B[i] = float32(rng.NormFloat64())
		}
		x := make([]float32, c.in)
		y0 := make([]float32, c.out)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		for i := range y0 {
			y0[i] = float32(rng.NormFloat64())
		}
		for _, half := range []bool{false, true} {
			a, err := NewAdapter("a", []AdapterLinear{l}, half)
			if err != nil {
				t.Fatal(err)
			}
			al := a.linears["w"]
			got, want := append([]float32(nil), y0...), append([]float32(nil), y0...)
			applyOne(al, got, x, 1.5)
			al.applyReference(want, x, 1.5)
			var d, m float64
			for i := range got {
				d = math.Max(d, math.Abs(float64(got[i]-want[i])))
				m = math.Max(m, math.Abs(float64(want[i])))
			}
			if d > 1e-4*max(m, 1) {
				t.Errorf("%+v half %v: |kernel - reference| %.3g, largest |y| %.3g", c, half, d, m)
			}
		}
	}
}
