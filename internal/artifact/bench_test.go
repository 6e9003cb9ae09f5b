package artifact

import (
	"fmt"
	"testing"
)

// BenchmarkOpen opens artifacts with 10 MB and 100 MB of weights. Without
// Verify the cost must not grow with the weights; with Verify it does.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	for _, mb := range []int64{10, 100} {
		path := writeBig(b, dir, 10, mb<<20/10)
		for _, verify := range []bool{false, true} {
			b.Run(fmt.Sprintf("weights=%dMB/verify=%v", mb, verify), func(b *testing.B) {
				b.SetBytes(0)
				for b.Loop() {
					a, err := Open(path, OpenOptions{Verify: verify})
					if err != nil {
						b.Fatal(err)
					}
					a.Close()
				}
			})
		}
	}
}
