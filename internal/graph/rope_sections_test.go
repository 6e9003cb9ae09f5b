package graph

import (
	"math"
	"math/rand"
	"testing"
)

// TestRopeSections: a sectioned RoPE turns each run of pairs by its own
// position component (checked against rotations written out by hand);
// without Input.Positions it is plain RoPE.
func TestRopeSections(t *testing.T) {
	const E, heads, T = 8, 2, 3
	freq := []float64{1, 0.1, 0.01, 0.001}
	plain := Rope{Style: RopeHalf, HeadDim: E, RotDim: E, InvFreq: freq}
	sec := plain
	sec.Sections = []int{1, 2, 1} // pair 0: t, pairs 1-2: h, pair 3: w
	run := func(r Rope, pos []int) []float32 {
		g := New()
		x := g.Rows(heads * E)
		g.SetOutput(g.RoPE(x, r))
		in, err := NewInterpreter(g, Weights{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if g.PosComponents() != r.Components() {
			t.Fatalf("graph reads %d components, rope %d", g.PosComponents(), r.Components())
		}
		rng := rand.New(rand.NewSource(1))
		rows := make([]float32, T*heads*E)
		for i := range rows {
			rows[i] = rng.Float32()*2 - 1
		}
		st := in.NewState(T)
		st.Pos = 0
		out, _, err := in.RunInput(st, Input{IDs: make([]int, T), Rows: rows, Positions: pos})
		if err != nil {
			t.Fatal(err)
		}
		return append(out, rows...) // output, then input
	}
	a, b := run(plain, nil), run(sec, nil)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("sections without positions differ from plain rope at %d: %v vs %v", i, a[i], b[i])
		}
	}
	pos := []int{5, 7, 11, 0, 3, 2, 9, 9, 9}
	got := run(sec, pos)
	out, in := got[:T*heads*E], got[T*heads*E:]
	comp := []int{0, 1, 1, 2}
	for r := 0; r < T; r++ {
		for h := 0; h < heads; h++ {
			for i := 0; i < E/2; i++ {
				ang := float64(pos[3*r+comp[i]]) * freq[i]
				o := r*heads*E + h*E
				x0, x1 := float64(in[o+i]), float64(in[o+i+E/2])
				w0 := x0*math.Cos(ang) - x1*math.Sin(ang)
				w1 := x0*math.Sin(ang) + x1*math.Cos(ang)
				if math.Abs(w0-float64(out[o+i])) > 1e-6 || math.Abs(w1-float64(out[o+i+E/2])) > 1e-6 {
					t.Fatalf("row %d head %d pair %d: got %v %v, want %v %v", r, h, i, out[o+i], out[o+i+E/2], w0, w1)
				}
			}
		}
	}
	// a wrong number of position values is refused
	g := New()
	g.SetOutput(g.RoPE(g.Rows(E), sec))
	inter, _ := NewInterpreter(g, Weights{}, 1)
	if _, _, err := inter.RunInput(inter.NewState(1), Input{IDs: []int{0}, Rows: make([]float32, E), Positions: []int{1, 2}}); err == nil {
		t.Error("2 position values for a row of 3 components accepted")
	}
}
