package kernel

import (
	"math/rand/v2"
	"testing"
)

// TestSumWords: SumWords, with and without asking ahead, gives the
// wrapping sum of the plain loop (exact: integers) on random words of
// every length up to 40 lines and some longer, from starts that are not
// 64-byte aligned, and reads nothing outside the slice (the words
// around it would change the sum).
func TestSumWords(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	buf := make([]uint64, 4096+64)
	for i := range buf {
		buf[i] = r.Uint64()
	}
	lengths := []int{0, 1, 7, 31, 32, 33, 63, 64, 96, 127, 128, 1000, 4096}
	for n := 2; n < 320; n += 9 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, at := range []int{0, 1, 3, 5, 8, 13} {
			if at+n > len(buf) {
				continue
			}
			w := buf[at : at+n]
			var want uint64
			for _, x := range w {
				want += x
			}
			for _, ahead := range []bool{false, true} {
				if got := SumWords(w, ahead); got != want {
					t.Fatalf("%d words from %d, ahead %v: %#x, want %#x", n, at, ahead, got, want)
				}
			}
		}
	}
}
