//go:build !purego

package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkQ4Prep times laying out the 4-bit products' activation records
// (q4Prep) for a prefill pass of 128 tokens and a decode step of 1.
func BenchmarkQ4Prep(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, K := range []int{576, 1536} {
		for _, T := range []int{1, 128} {
			x := &Q8{T: T, K: K, Q: make([]int8, T*K), D: make([]float32, T*K/QK), Sum: make([]int32, T*K/QK)}
			for i := range x.Q {
				x.Q[i] = int8(r.IntN(255) - 127)
			}
			for i := range x.D {
				x.D[i], x.Sum[i] = r.Float32(), int32(r.IntN(4000)-2000)
			}
			rec := make([]byte, T*q4TokenBytes(K))
			b.Run(fmt.Sprintf("K=%d/T=%d", K, T), func(b *testing.B) {
				b.SetBytes(int64(T * K))
				for b.Loop() {
					q4Prep(rec, x, 0, T)
				}
			})
		}
	}
}
