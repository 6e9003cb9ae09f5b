package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/plan"
)

// TestBidirectionalAttentionReference: biAttnTask (kernel.DotRows scores
// at the key row stride, kernel.AxpyRows outputs) with grouped heads,
// split across 3 workers, equals a float64 softmax attention over all
// rows on random inputs within 1e-5 (O(1) values, float32 sums of 37
// terms); with a symmetric window, over the rows at most window/2 away.
func TestBidirectionalAttentionReference(t *testing.T) {
	for _, window := range []int{0, 8, 9, 100} {
		biAttnReference(t, window)
	}
}

func biAttnReference(t *testing.T, window int) {
	const T, H, G, E = 37, 4, 2, 16
	r := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	q, k, v := rnd(T*H*E), rnd(T*G*E), rnd(T*G*E)
	scale := float32(1 / math.Sqrt(E))
	p := newPool(3)
	defer p.close()
	defer SplitEverything()()
	s := &Session{pool: p, threads: 3}
	s.attnTask.scores = [][]float32{make([]float32, T), make([]float32, T), make([]float32, T)}
	out := make([]float32, T*H*E)
	s.attendAll(&plan.Attn{Heads: H, KVHeads: G, HeadDim: E, Scale: scale, Window: window}, out, q, k, v, T)
	var worst float64
	for h := range H {
		g := h / (H / G)
		for t := range T {
			sc := make([]float64, T)
			mx := math.Inf(-1)
			for j := range T {
				if window > 0 && (j < t-window/2 || j > t+window/2) {
					sc[j] = math.Inf(-1)
					continue
				}
				for e := range E {
					sc[j] += float64(q[t*H*E+h*E+e]) * float64(k[j*G*E+g*E+e])
				}
				sc[j] *= float64(scale)
				mx = max(mx, sc[j])
			}
			sum := 0.0
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for e := range E {
				want := 0.0
				for j := range T {
					want += sc[j] / sum * float64(v[j*G*E+g*E+e])
				}
				worst = max(worst, math.Abs(float64(out[t*H*E+h*E+e])-want))
			}
		}
	}
	t.Logf("window %d: max |diff| %.3g", window, worst)
	if worst > 1e-5 {
		t.Fatalf("window %d: bidirectional attention differs from the reference by %.3g", window, worst)
	}
}
