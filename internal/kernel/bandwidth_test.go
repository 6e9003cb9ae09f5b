package kernel

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkMemoryRead measures the machine's memory read bandwidth, the
// bound of decode speed: g goroutines each sum (SumWords: vector loads)
// their share of a 512 MiB buffer, far larger than any cache, once per
// iteration. The decode floor of a model is its weight bytes per token
// divided by this figure (docs/bench.md). SumWords, not Dot: on an Intel
// Xeon (Emerald Rapids) Dot read 10 GB/s on one thread where SumWords
// reads 15-16.
func BenchmarkMemoryRead(b *testing.B) {
	const n = 512 << 20 / 8
	buf := make([]uint64, n)
	for i := range buf {
		buf[i] = uint64(i & 7)
	}
	for _, g := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", g), func(b *testing.B) {
			b.SetBytes(8 * n)
			sums := make([]uint64, g)
			for b.Loop() {
				var wg sync.WaitGroup
				per := n / g
				for w := range g {
					wg.Add(1)
					go func() {
						defer wg.Done()
						part := buf[w*per : (w+1)*per]
						sums[w] = SumWords(part, false)
					}()
				}
				wg.Wait()
			}
		})
	}
}
