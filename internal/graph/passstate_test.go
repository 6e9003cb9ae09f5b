package graph

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestNewPassState: a bidirectional encoder of three attention layers
// gives the same output on a single-pass state as on a plain one, its
// layers holding no cache; a second pass on the single-pass state is
// refused.
func TestNewPassState(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	g := New()
	x := g.Rows(8)
	w := Weights{}
	for l := 0; l < 3; l++ {
		names := []string{"q", "k", "v"}
		var qkv [3]int
		for i, n := range names {
			name := string(rune('a'+l)) + n
			qkv[i] = g.Linear(x, name, 8, "")
			w[name] = randVec(r, 64)
		}
		a := g.Attention(qkv[0], qkv[1], qkv[2], Attn{Layer: l, Heads: 2, KVHeads: 2, HeadDim: 4, Scale: 0.5, Bidirectional: true})
		x = g.Add(x, a)
	}
	g.SetOutput(x)
	in, err := NewInterpreter(g, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	const T = 6
	rows := randVec(r, T*8)
	inp := Input{IDs: make([]int, T), Rows: rows}
	want, _, err := in.RunInput(in.NewState(T), inp)
	if err != nil {
		t.Fatal(err)
	}
	st := in.NewPassState(T + 1) // room for a second pass, refused all the same
	got, _, err := in.RunInput(st, inp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: single-pass state %v, plain state %v", i, got[i], want[i])
		}
	}
	if len(st.K) != 0 || len(st.V) != 0 {
		t.Errorf("bidirectional layers hold a cache of %d layers", len(st.K))
	}
	if _, _, err := in.RunInput(st, Input{IDs: []int{0}, Rows: rows[:8]}); err == nil || !strings.Contains(err.Error(), "single-pass") {
		t.Error("a second pass on a single-pass state was accepted")
	}
}
