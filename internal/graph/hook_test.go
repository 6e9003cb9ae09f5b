package graph

import (
	"math/rand"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// TestInputHook checks the input hook: it sees every linear and attention
// input with its shape, a nil answer changes nothing, and a replacement
// reaches only the node it was made for (zeroing the classifier's input
// gives all-bias logits while the residual stream stays intact).
func TestInputHook(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	g, w := tinyGraph(r)
	in, err := NewInterpreter(g, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{3, 1, 4, 1, 5}
	want, _, err := in.Run(in.NewState(8), ids)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[op.Op]int{}
	in.SetInputHook(func(n *Node, slot int, x []float32, rows, cols int) []float32 {
		if rows*cols != len(x) || rows != len(ids) {
			t.Errorf("%v input %d: %d values for %dx%d", n.Op, slot, len(x), rows, cols)
		}
		seen[n.Op]++
		return nil
	})
	got, _, err := in.Run(in.NewState(8), ids)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("a hook returning nil changed logit %d: %v vs %v", i, got[i], want[i])
		}
	}
	// 7 linears (q, k, v, o, w1, w3, w2, classifier = 8) and 3 attention inputs
	if seen[op.Linear] != 8 || seen[op.Attention] != 3 {
		t.Fatalf("hook saw %d linear and %d attention inputs, want 8 and 3", seen[op.Linear], seen[op.Attention])
	}
	out := g.Nodes[g.Output]
	in.SetInputHook(func(n *Node, slot int, x []float32, rows, cols int) []float32 {
		if n == &g.Nodes[g.Output] || (n.Op == out.Op && n.Weight == out.Weight && n.Cols == out.Cols) {
			return make([]float32, len(x))
		}
		return nil
	})
	got, _, err = in.Run(in.NewState(8), ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("logit %d = %v with a zeroed classifier input (no bias), want 0", i, v)
		}
	}
	in.SetInputHook(func(n *Node, slot int, x []float32, rows, cols int) []float32 { return x[:1] })
	if _, _, err := in.Run(in.NewState(8), ids); err == nil {
		t.Fatal("a hook returning the wrong length was accepted")
	}
}
