package lora

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMovedBackByInverse: moving a pair by random row and column
// permutations and then by their inverses gives the pair back (what
// Resolve relies on to take a GGUF adapter back to a Hugging Face
// checkpoint's layout), and the first move alone changes it.
func TestMovedBackByInverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rank, in, out = 3, 7, 9
	p := &Pair{Rank: rank, In: in, Out: out, A: make([]float32, rank*in), B: make([]float32, out*rank), Magnitude: make([]float32, out)}
	for _, v := range [][]float32{p.A, p.B, p.Magnitude} {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
	}
	rows, cols := rng.Perm(out), rng.Perm(in)
	q := p.moved(rows, cols)
	if slices.Equal(q.A, p.A) || slices.Equal(q.B, p.B) {
		t.Fatal("the permutations left the pair unchanged")
	}
	back := q.moved(inverse(rows), inverse(cols))
	if !slices.Equal(back.A, p.A) || !slices.Equal(back.B, p.B) || !slices.Equal(back.Magnitude, p.Magnitude) {
		t.Error("moving by the inverse permutations does not give the pair back")
	}
	if inverse(nil) != nil {
		t.Error("the inverse of no permutation is not nil")
	}
}
