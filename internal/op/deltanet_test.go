package op

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randoms(r *rand.Rand, n int, lo, hi float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = lo + (hi-lo)*r.Float32()
	}
	return v
}

// TestCausalConvRowsSplits checks the convolution against its formula over a
// sequence (rows before the first are zero), and that feeding the rows in
// calls of every split, in place or into a second state, gives the same
// rows and final state.
func TestCausalConvRowsSplits(t *testing.T) {
	const T, C, K = 9, 5, 4
	r := rand.New(rand.NewPCG(1, 1))
	x, w := randoms(r, T*C, -1, 1), randoms(r, C*K, -1, 1)
	want := make([]float32, T*C)
	for tt := 0; tt < T; tt++ {
		for c := 0; c < C; c++ {
			var s float32
			for j := 0; j < K; j++ {
				if u := tt - K + 1 + j; u >= 0 {
					s += w[c*K+j] * x[u*C+c]
				}
			}
			want[tt*C+c] = s
		}
	}
	for split := 0; split <= T; split++ {
		for _, inPlace := range []bool{true, false} {
			got := make([]float32, T*C)
			S := make([]float32, (K-1)*C)
			S2 := S
			if !inPlace {
				S2 = make([]float32, len(S))
			}
			CausalConvRows(got, x, w, S, S2, split, C, K)
			CausalConvRows(got[split*C:], x[split*C:], w, S2, S, T-split, C, K)
			if !slices.Equal(got, want) {
				t.Fatalf("split %d in place %v: rows differ", split, inPlace)
			}
			if !slices.Equal(S, x[(T-K+1)*C:]) {
				t.Fatalf("split %d in place %v: state %v, want the last %d rows", split, inPlace, S, K-1)
			}
		}
	}
}

// TestGatedDeltaRowsSplit checks that the delta rule fed in two calls, in
// place or through a second state, gives the rows and state of one call,
// and that each row's output is S^T q of the state after it (checked
// against a float64 transcription of the rule for one head).
func TestGatedDeltaRowsSplit(t *testing.T) {
	d := DeltaDims{KeyHeads: 2, ValueHeads: 4, KeyDim: 4, ValueDim: 3}
	const T = 7
	r := rand.New(rand.NewPCG(2, 2))
	x := randoms(r, T*d.In(), -2, 2)
	a, b := randoms(r, T*d.ValueHeads, -2, 2), randoms(r, T*d.ValueHeads, -2, 2)
	A, dt := randoms(r, d.ValueHeads, -1, -0.1), randoms(r, d.ValueHeads, -1, 1)
	tmp := make([]float32, d.Temp())
	want, S := make([]float32, T*d.Out()), make([]float32, d.State())
	GatedDeltaRows(want, x, a, b, A, dt, S, S, T, d, tmp)
	for split := 0; split <= T; split++ {
		got, S1, S2 := make([]float32, T*d.Out()), make([]float32, d.State()), make([]float32, d.State())
		GatedDeltaRows(got, x, a, b, A, dt, S1, S2, split, d, tmp)
		GatedDeltaRows(got[split*d.Out():], x[split*d.In():], a[split*d.ValueHeads:], b[split*d.ValueHeads:], A, dt, S2, S2, T-split, d, tmp)
		if !slices.Equal(got, want) || !slices.Equal(S2, S) {
			t.Fatalf("split %d: rows or state differ from one call", split)
		}
		if slices.ContainsFunc(S1, func(v float32) bool { return v != 0 }) {
			t.Fatalf("split %d: the first call wrote its input state", split)
		}
	}
	// value head 3 reads key head 3 % 2 = 1
	j, kh := 3, 1
	St := make([]float64, d.KeyDim*d.ValueDim)
	nk := d.KeyHeads * d.KeyDim
	for tt := 0; tt < T; tt++ {
		row := x[tt*d.In():]
		norm := func(v []float32, scale float64) []float64 {
			var ss float64
			for _, e := range v {
				ss += float64(e) * float64(e)
			}
			out := make([]float64, len(v))
			for i, e := range v {
				out[i] = float64(e) / math.Sqrt(ss+L2NormEps) * scale
			}
			return out
		}
		q := norm(row[kh*d.KeyDim:(kh+1)*d.KeyDim], 1/math.Sqrt(float64(d.KeyDim)))
		k := norm(row[nk+kh*d.KeyDim:nk+(kh+1)*d.KeyDim], 1)
		v := row[2*nk+j*d.ValueDim:]
		g := float64(A[j]) * math.Log1p(math.Exp(float64(a[tt*d.ValueHeads+j])+float64(dt[j])))
		beta := 1 / (1 + math.Exp(-float64(b[tt*d.ValueHeads+j])))
		for i := range St {
			St[i] *= math.Exp(g)
		}
		for c := 0; c < d.ValueDim; c++ {
			var mem float64
			for i := 0; i < d.KeyDim; i++ {
				mem += St[i*d.ValueDim+c] * k[i]
			}
			delta := (float64(v[c]) - mem) * beta
			for i := 0; i < d.KeyDim; i++ {
				St[i*d.ValueDim+c] += k[i] * delta
			}
		}
		for c := 0; c < d.ValueDim; c++ {
			var o float64
			for i := 0; i < d.KeyDim; i++ {
				o += St[i*d.ValueDim+c] * q[i]
			}
			if got := want[tt*d.Out()+j*d.ValueDim+c]; math.Abs(float64(got)-o) > 1e-5 {
				t.Fatalf("row %d value %d: %v, the rule gives %v", tt, c, got, o)
			}
		}
	}
}

// TestColumnsRows checks plain and grouped column ranges.
func TestColumnsRows(t *testing.T) {
	x := []float32{0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17}
	out := make([]float32, 4)
	ColumnsRows(out, x, 2, 8, 2, 4, 0)
	if !slices.Equal(out, []float32{2, 3, 12, 13}) {
		t.Errorf("plain columns: %v", out)
	}
	out = make([]float32, 8)
	ColumnsRows(out, x, 2, 8, 2, 4, 4) // [lo, hi) of each 4-wide block
	if !slices.Equal(out, []float32{2, 3, 6, 7, 12, 13, 16, 17}) {
		t.Errorf("grouped columns: %v", out)
	}
}

// TestWKV7RowsOutOfPlace checks that the RWKV-7 time mix reading its state
// from one slice and writing another equals the in-place update.
func TestWKV7RowsOutOfPlace(t *testing.T) {
	const T, C, E = 3, 8, 4
	r := rand.New(rand.NewPCG(3, 3))
	in := func() []float32 { return randoms(r, T*C, -1, 1) }
	rr, w, k, v, a := in(), in(), in(), in(), in()
	var ws [5][]float32
	for i := range ws {
		ws[i] = randoms(r, C, -1, 1)
	}
	S0 := randoms(r, C*E, -1, 1)
	want, got := make([]float32, T*C), make([]float32, T*C)
	Sw := slices.Clone(S0)
	WKV7Rows(want, rr, w, k, v, a, Sw, Sw, ws, T, C, E, 1e-3, make([]float32, 4*E))
	Sg, S0copy := make([]float32, len(S0)), slices.Clone(S0)
	WKV7Rows(got, rr, w, k, v, a, S0, Sg, ws, T, C, E, 1e-3, make([]float32, 4*E))
	if !slices.Equal(got, want) || !slices.Equal(Sg, Sw) {
		t.Error("out-of-place time mix differs from the in-place one")
	}
	if !slices.Equal(S0, S0copy) {
		t.Error("the out-of-place time mix wrote its input state")
	}
}
