//go:build !purego

package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkArm64Q4 times each supported overlay's 4-bit product (LPBQ)
// on a decode token and a prefill tile; bytes are the packed weights.
func BenchmarkArm64Q4(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 14))
	const N, K = 1024, 2048
	w := randQ4(r, N, K, true, false)
	for _, o := range Overlays() {
		if !o.Supported || o.Q4MatMul == nil {
			continue
		}
		for _, T := range []int{1, 16} {
			x, _ := randQ8(r, T, K)
			dst := make([]float32, T*N)
			b.Run(fmt.Sprintf("%s/T%d", o.Name, T), func(b *testing.B) {
				b.SetBytes(int64(len(w.Nib)))
				for b.Loop() {
					o.Q4MatMul(dst, N, w, x, 0, N)
				}
			})
		}
	}
}

// BenchmarkArm64Quantize times each supported overlay's activation
// quantization of one row.
func BenchmarkArm64Quantize(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	const K = 2048
	x := randFloats(r, K, 1)
	a := NewQ8(1, K)
	for _, o := range Overlays() {
		if !o.Supported || o.QuantizeQ8 == nil {
			continue
		}
		b.Run(o.Name, func(b *testing.B) {
			b.SetBytes(4 * K)
			for b.Loop() {
				o.QuantizeQ8(a.Q, a.D, a.Sum, x)
			}
		})
	}
}
