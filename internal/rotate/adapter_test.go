package rotate

import (
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/quant"
)

// TestAdapterMapRefusesBadRecords: a rotation record whose sizes do not
// make rotations is refused with an error naming the record, and a pair
// of the wrong size is refused by Map.
func TestAdapterMapRefusesBadRecords(t *testing.T) {
	r1 := Report{R1: quant.RotationRandom, Dim: 8, R1In: []string{"q"}}
	r2 := func(l R2Layer) Report { return Report{R2: quant.RotationHadamard, R2Layers: []R2Layer{l}} }
	for name, rep := range map[string]Report{
		"no size":           {R1: quant.RotationRandom, R1In: []string{"q"}},
		"huge size":         {R1: quant.RotationRandom, Dim: 1 << 40, R1In: []string{"q"}},
		"no linears":        {R1: quant.RotationRandom, Dim: 8},
		"short gain":        {R1: quant.RotationRandom, Dim: 8, R1In: []string{"q"}, Folded: map[string]string{"q": "n"}, Gains: map[string][]float32{"n": {1}}},
		"no layers":         {R2: quant.RotationHadamard},
		"negative row":      r2(R2Layer{V: "v", O: "o", Heads: 1, KVHeads: 1, HeadDim: 8, Lo: -8}),
		"no heads":          r2(R2Layer{V: "v", O: "o", KVHeads: 1, HeadDim: 8}),
		"huge head":         r2(R2Layer{V: "v", O: "o", Heads: 1, KVHeads: 1, HeadDim: 1 << 40}),
		"head not hadamard": r2(R2Layer{V: "v", O: "o", Heads: 1, KVHeads: 1, HeadDim: 12}),
	} {
		if _, err := NewAdapterMap(&rep); err == nil || !strings.Contains(err.Error(), "rotat") {
			t.Errorf("%s: %v, want an error about the rotation record", name, err)
		}
	}
	m, err := NewAdapterMap(&r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Map("q", 2, 8, 4, make([]float32, 15), make([]float32, 8)); err == nil {
		t.Error("a pair of the wrong size was mapped")
	}
	if _, _, err := m.Map("q", 1, 6, 1, make([]float32, 6), make([]float32, 1)); err == nil {
		t.Error("a pair whose columns are not R1's size was mapped")
	}
}

// TestAdapterMapMatchesDense checks Map against the rotations written
// out as dense matrices: for random W, g, A and B, the rotated weights
// plus the mapped pair equal the rotated (W + B·A), within 1e-5, for a
// linear after a folded norm (W·diag(g)·Q), one writing to the stream
// (Qᵀ·W) and R2's value and output projections.
func TestAdapterMapMatchesDense(t *testing.T) {
	rng := newRand(4)
	const D, E, heads, rank = 16, 8, 2, 3
	rep := &Report{R1: quant.RotationRandom, R2: quant.RotationRandom, Seed: 9, Dim: D,
		R1In: []string{"v"}, R1Out: []string{"o"}, Folded: map[string]string{"v": "n"}, Gains: map[string][]float32{"n": make([]float32, D)},
		R2Layers: []R2Layer{{V: "v", KVHeads: heads, O: "o", Heads: heads, HeadDim: E}}}
	for i := range rep.Gains["n"] {
		rep.Gains["n"][i] = float32(0.5 + rng.Float64())
	}
	m, err := NewAdapterMap(rep)
	if err != nil {
		t.Fatal(err)
	}
	// the same rotations, drawn as Apply draws them
	r := newRand(9)
	q, _ := NewHadamard(D, quant.RotationRandom, r)
	h, _ := NewHadamard(E, quant.RotationRandom, r)
	dense := func(rot func([]float32), n int) [][]float64 { // rows of I·rot
		out := make([][]float64, n)
		for i := range n {
			v := make([]float32, n)
			v[i] = 1
			rot(v)
			out[i] = make([]float64, n)
			for j := range v {
				out[i][j] = float64(v[j])
			}
		}
		return out
	}
	Q := dense(q.Right, D)
	Hb := dense(func(v []float32) { // blockdiag(H, H)
		for b := 0; b < len(v); b += E {
			h.Right(v[b : b+E])
		}
	}, heads*E)
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	mul := func(a [][]float64, b [][]float64) [][]float64 {
		out := make([][]float64, len(a))
		for i := range a {
			out[i] = make([]float64, len(b[0]))
			for k := range b {
				for j := range b[0] {
					out[i][j] += a[i][k] * b[k][j]
				}
			}
		}
		return out
	}
	mat := func(v []float32, rows, cols int) [][]float64 {
		out := make([][]float64, rows)
		for i := range rows {
			out[i] = make([]float64, cols)
			for j := range cols {
				out[i][j] = float64(v[i*cols+j])
			}
		}
		return out
	}
	tr := func(a [][]float64) [][]float64 {
		out := make([][]float64, len(a[0]))
		for j := range out {
			out[j] = make([]float64, len(a))
			for i := range a {
				out[j][i] = a[i][j]
			}
		}
		return out
	}
	g := make([][]float64, D)
	for i := range g {
		g[i] = make([]float64, D)
		g[i][i] = float64(rep.Gains["n"][i])
	}
	for _, c := range []struct {
		w       string
		out, in int
		rot     func(w [][]float64) [][]float64 // the rotated weight
	}{
		{"v", heads * E, D, func(w [][]float64) [][]float64 { return mul(tr(Hb), mul(w, mul(g, Q))) }},
		{"o", D, heads * E, func(w [][]float64) [][]float64 { return mul(tr(Q), mul(w, Hb)) }},
	} {
		a, b := randn(rank*c.in), randn(c.out*rank)
		a2, b2, err := m.Map(c.w, rank, c.in, c.out, a, b)
		if err != nil {
			t.Fatal(err)
		}
		want := c.rot(mul(mat(b, c.out, rank), mat(a, rank, c.in)))
		got := mul(mat(b2, c.out, rank), mat(a2, rank, c.in))
		var d float64
		for i := range want {
			for j := range want[i] {
				d = math.Max(d, math.Abs(want[i][j]-got[i][j]))
			}
		}
		t.Logf("%s: max |mapped B·A - rotated B·A| %.3g", c.w, d)
		if d > 1e-5 {
			t.Errorf("%s: the mapped pair differs from the rotated product by %.3g", c.w, d)
		}
	}
}
