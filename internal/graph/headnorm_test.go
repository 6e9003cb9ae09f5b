package graph

import (
	"math"
	"math/rand"
	"testing"
)

// TestHeadRMSNorm checks the interpreter's per-head RMSNorm against a
// float64 loop over heads, within 1e-5 relative to the output magnitude.
func TestHeadRMSNorm(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const T, heads, E = 5, 3, 8
	const eps, offset = 1e-6, 0.5
	g := New()
	x := g.Embed(g.Tokens(), "emb", T, heads*E)
	g.SetOutput(g.HeadRMSNorm(x, "w", E, eps, offset))
	w := Weights{"emb": randSlice(r, T*heads*E), "w": randSlice(r, E)}
	in, err := NewInterpreter(g, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{4, 0, 2, 2, 1}
	got, rows, err := in.Run(in.NewState(8), ids)
	if err != nil {
		t.Fatal(err)
	}
	if rows != T || len(got) != T*heads*E {
		t.Fatalf("got %d rows, %d values", rows, len(got))
	}
	for tt, id := range ids {
		row := w["emb"][id*heads*E : (id+1)*heads*E]
		for h := 0; h < heads; h++ {
			var ss float64
			for e := 0; e < E; e++ {
				ss += float64(row[h*E+e]) * float64(row[h*E+e])
			}
			inv := 1 / math.Sqrt(ss/E+eps)
			for e := 0; e < E; e++ {
				want := float64(row[h*E+e]) * inv * (float64(w["w"][e]) + offset)
				if d := math.Abs(float64(got[tt*heads*E+h*E+e]) - want); d > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("row %d head %d dim %d: got %v want %v", tt, h, e, got[tt*heads*E+h*E+e], want)
				}
			}
		}
	}
}
