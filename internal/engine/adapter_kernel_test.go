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
// Axpy over A's and Bᵀ's rows, in float32, binary16 and 8 bits) against
// its plain float64 reference on the matrices as stored, on random
// inputs, within 1e-4 of the largest |y|.
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
		for _, st := range []AdapterStorage{AdapterF32, AdapterF16, AdapterQ8} {
			a, err := NewAdapter("a", []AdapterLinear{l}, st)
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
				t.Errorf("%+v %v: |kernel - reference| %.3g, largest |y| %.3g", c, st, d, m)
			}
		}
	}
}

// TestAdapterQ8Rows checks 8-bit storage against the float32 matrices
// it rounds: every stored value is within half a step (its row's largest
// |value|/127) of its own, a zero row stays zero, and the product of a
// rank-16 adapter on random inputs is within 2% of the largest |y| of
// the float32 product.
func TestAdapterQ8Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rank, in, out = 16, 512, 768
	l := AdapterLinear{Weight: "w", Rank: rank, In: in, Out: out, Scale: 1,
		A: make([]float32, rank*in), B: make([]float32, out*rank)}
	for i := range l.A {
		l.A[i] = float32(rng.NormFloat64())
	}
	for i := range l.B {
		l.B[i] = float32(rng.NormFloat64())
	}
	for i := range in {
		l.A[2*in+i] = 0 // a zero row
	}
	q, err := NewAdapter("q", []AdapterLinear{l}, AdapterQ8)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewAdapter("f", []AdapterLinear{l}, AdapterF32)
	if err != nil {
		t.Fatal(err)
	}
	if q.Bytes()*3 > f.Bytes() {
		t.Errorf("8-bit adapter takes %d bytes, float32 %d", q.Bytes(), f.Bytes())
	}
	ql, fl := q.linears["w"], f.linears["w"]
	qa, qbt := ql.matrices()
	for _, m := range []struct {
		name     string
		got, ref []float32
		n        int
	}{{"A", qa, fl.a, in}, {"Bt", qbt, fl.bt, out}} {
		for r := range rank {
			row, ref := m.got[r*m.n:(r+1)*m.n], m.ref[r*m.n:(r+1)*m.n]
			var big float64
			for _, v := range ref {
				big = math.Max(big, math.Abs(float64(v)))
			}
			for i, v := range row {
				if d := math.Abs(float64(v - ref[i])); d > big/127/2*1.0001 {
					t.Fatalf("%s[%d][%d] = %g stored as %g: off by %.3g, more than half of the step %.3g", m.name, r, i, ref[i], v, d, big/127)
				}
			}
		}
	}
	for i := range in {
		if qa[2*in+i] != 0 {
			t.Fatalf("A's zero row stored %g at %d", qa[2*in+i], i)
		}
	}
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	yq, yf := make([]float32, out), make([]float32, out)
	applyOne(ql, yq, x, 1)
	applyOne(fl, yf, x, 1)
	var d, m float64
	for i := range yq {
		d = math.Max(d, math.Abs(float64(yq[i]-yf[i])))
		m = math.Max(m, math.Abs(float64(yf[i])))
	}
	t.Logf("8-bit vs float32 product: max |diff| %.3g, largest |y| %.3g (%.2f%%)", d, m, 100*d/m)
	if d > 0.02*m {
		t.Errorf("8-bit vs float32 product: max |diff| %.3g, more than 2%% of the largest |y| %.3g", d, m)
	}
}
