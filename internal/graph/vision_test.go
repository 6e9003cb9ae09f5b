package graph

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestRowsAndGroupRows: a Rows input through a linear, then GroupRows,
// against plain loops; bad input lengths are refused.
func TestRowsAndGroupRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	g := New()
	ids := g.Tokens()
	x := g.Rows(5)
	y := g.Linear(x, "w", 3, "b")
	y = g.Add(y, g.Embed(ids, "pos", 8, 3))
	g.SetOutput(g.GroupRows(y, 2))
	w := Weights{"w": randVec(r, 15), "b": randVec(r, 3), "pos": randVec(r, 24)}
	in, err := NewInterpreter(g, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	T := 4
	rows := randVec(r, T*5)
	pos := []int{3, 0, 7, 1}
	out, n, err := in.RunInput(in.NewState(T), Input{IDs: pos, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || len(out) != 12 {
		t.Fatalf("%d rows, %d values; want 2 rows of 6", n, len(out))
	}
	for tt := 0; tt < T; tt++ {
		for j := 0; j < 3; j++ {
			var s float32
			for k := 0; k < 5; k++ {
				s += rows[tt*5+k] * w["w"][j*5+k]
			}
			s += w["b"][j] + w["pos"][pos[tt]*3+j]
			// row tt lands in group tt/2 at column (tt%2)*3+j
			if got := out[(tt/2)*6+(tt%2)*3+j]; math.Abs(float64(got-s)) > 1e-5 {
				t.Fatalf("row %d col %d: %v, want %v", tt, j, got, s)
			}
		}
	}
	if _, _, err := in.RunInput(in.NewState(T), Input{IDs: pos, Rows: rows[:7]}); err == nil || !strings.Contains(err.Error(), "input rows") {
		t.Errorf("short rows: %v", err)
	}
	if _, _, err := in.RunInput(in.NewState(3), Input{IDs: pos[:3], Rows: rows[:15]}); err == nil || !strings.Contains(err.Error(), "group") {
		t.Errorf("3 rows grouped by 2: %v", err)
	}
}

// TestBidirectionalAttention: every row attends to every row of the pass
// (checked against plain softmax loops), unlike causal attention.
func TestBidirectionalAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const T, H, E = 4, 2, 3
	build := func(bi bool) *Interpreter {
		g := New()
		g.Tokens()
		x := g.Rows(3 * H * E)
		q, k, v := g.Columns(x, 0, H*E), g.Columns(x, H*E, 2*H*E), g.Columns(x, 2*H*E, 3*H*E)
		g.SetOutput(g.Attention(q, k, v, Attn{Heads: H, KVHeads: H, HeadDim: E, Scale: 0.5, Bidirectional: bi}))
		in, err := NewInterpreter(g, Weights{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	rows := randVec(r, T*3*H*E)
	ids := make([]int, T)
	run := func(in *Interpreter) []float32 {
		out, _, err := in.RunInput(in.NewState(T), Input{IDs: ids, Rows: rows})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	bi, causal := run(build(true)), run(build(false))
	at := func(row, part, h, e int) float32 { return rows[row*3*H*E+part*H*E+h*E+e] }
	for i := 0; i < T; i++ {
		for h := 0; h < H; h++ {
			var w [T]float64
			var sum float64
			for j := 0; j < T; j++ {
				var s float64
				for e := 0; e < E; e++ {
					s += float64(at(i, 0, h, e) * at(j, 1, h, e))
				}
				w[j] = math.Exp(0.5 * s)
				sum += w[j]
			}
			for e := 0; e < E; e++ {
				var o float64
				for j := 0; j < T; j++ {
					o += w[j] / sum * float64(at(j, 2, h, e))
				}
				if got := bi[i*H*E+h*E+e]; math.Abs(float64(got)-o) > 1e-5 {
					t.Fatalf("row %d head %d dim %d: %v, want %v", i, h, e, got, o)
				}
			}
		}
	}
	if maxAbsDiff(bi[:H*E], causal[:H*E]) < 1e-3 {
		t.Fatal("row 0 sees the same rows bidirectionally as causally")
	}
	if maxAbsDiff(bi[(T-1)*H*E:], causal[(T-1)*H*E:]) > 1e-6 {
		t.Fatal("the last row should see the same rows either way")
	}
}

// TestEmbedRows: ids of -1 take their row from Input.Embeds.
func TestEmbedRows(t *testing.T) {
	g := New()
	g.SetOutput(g.Embed(g.Tokens(), "emb", 3, 2))
	in, err := NewInterpreter(g, Weights{"emb": {1, 2, 3, 4, 5, 6}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := in.RunInput(in.NewState(3), Input{IDs: []int{2, -1, 0}, Embeds: []float32{9, 9, 7, 8, 9, 9}})
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{5, 6, 7, 8, 1, 2}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("got %v, want %v", out, want)
		}
	}
	if _, _, err := in.RunInput(in.NewState(3), Input{IDs: []int{-1}}); err == nil {
		t.Error("id -1 without embedding rows accepted")
	}
	if _, _, err := in.RunInput(in.NewState(3), Input{IDs: []int{-1}, Embeds: []float32{1}}); err == nil {
		t.Error("short embedding rows accepted")
	}
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// TestGroupRowsAfter: group_rows with leading rows skipped drops them and
// joins the rest k at a time, in the interpreter; a pass whose rows after
// the skipped ones do not group is refused.
func TestGroupRowsAfter(t *testing.T) {
	g := New()
	g.Tokens()
	x := g.Rows(2)
	g.SetOutput(g.GroupRowsAfter(x, 1, 2))
	in, err := NewInterpreter(g, Weights{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	rows := []float32{9, 9, 1, 2, 3, 4, 5, 6, 7, 8}
	out, n, err := in.RunInput(in.NewPassState(5), Input{IDs: make([]int, 5), Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	if n != 2 || len(out) != len(want) {
		t.Fatalf("%d rows, %v; want 2 rows of 4", n, out)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("out %v, want %v", out, want)
		}
	}
	if _, _, err := in.RunInput(in.NewPassState(4), Input{IDs: make([]int, 4), Rows: rows[:8]}); err == nil {
		t.Error("3 rows after the skipped one grouped by 2")
	}
}
