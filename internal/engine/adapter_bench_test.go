package engine

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAdapterApply times one row's low-rank product of a rank-16
// adapter on a 1024 -> 3072 linear (Qwen3-0.6B's gate and up).
func BenchmarkAdapterApply(b *testing.B) {
	for _, st := range []AdapterStorage{AdapterF32, AdapterF16, AdapterQ8} {
		rng := rand.New(rand.NewPCG(1, 2))
		l := AdapterLinear{Weight: "w", Rank: 16, In: 1024, Out: 3072, Scale: 1, A: make([]float32, 16*1024), B: make([]float32, 3072*16)}
		for i := range l.A {
			l.A[i] = float32(rng.NormFloat64())
		}
		a, _ := NewAdapter("a", []AdapterLinear{l}, st)
		x, y := make([]float32, 1024), make([]float32, 3072)
		b.Run(st.String(), func(b *testing.B) {
			for b.Loop() {
				applyOne(a.linears["w"], y, x, 1)
			}
		})
	}
}
