package kernel

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkMemoryRead measures the machine's memory read bandwidth, the
// bound of decode speed: g goroutines each sum (Dot) their share of a
// 512 MiB buffer, far larger than any cache, once per iteration. The
// decode floor of a model is its weight bytes per token divided by this
// figure (docs/benchmarks.md).
func BenchmarkMemoryRead(b *testing.B) {
	const n = 512 << 20 / 4
	buf := make([]float32, n)
	for i := range buf {
		buf[i] = float32(i & 7)
	}
	for _, g := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", g), func(b *testing.B) {
			b.SetBytes(4 * n)
			sums := make([]float32, g)
			for b.Loop() {
				var wg sync.WaitGroup
				per := n / g
				for w := range g {
					wg.Add(1)
					go func() {
						defer wg.Done()
						part := buf[w*per : (w+1)*per]
						var s float32
						for i := 0; i < len(part); i += 1 << 16 {
							s += Dot(part[i:min(i+1<<16, len(part))], part[i:min(i+1<<16, len(part))])
						}
						sums[w] = s
					}()
				}
				wg.Wait()
			}
		})
	}
}
