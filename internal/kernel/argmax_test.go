package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestArgmax compares Argmax with the plain scan on random values of every
// length to 300 and a vocabulary's, with ties of the maximum, NaNs and
// infinities placed anywhere: the same index every time.
func TestArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	lengths := []int{151936, 2*argmaxBlock + 5}
	for n := range 300 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for trial := range 8 {
			x := make([]float32, n)
			for i := range x {
				x[i] = r.Float32()*20 - 10
			}
			if n > 0 {
				switch trial {
				case 1, 2: // ties of the maximum
					m := x[argmaxGeneric(x)]
					for range 1 + r.IntN(3) {
						x[r.IntN(n)] = m
					}
				case 3: // a NaN anywhere
					x[r.IntN(n)] = nan
				case 4: // NaN first
					x[0] = nan
				case 5: // every element -Inf but maybe one
					for i := range x {
						x[i] = -inf
					}
					if r.IntN(2) == 0 {
						x[r.IntN(n)] = -3
					}
				case 6: // +Inf and -0/+0
					x[r.IntN(n)] = inf
					x[r.IntN(n)] = inf
				case 7:
					for i := range x {
						x[i] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
					}
				}
			}
			if got, want := Argmax(x), argmaxGeneric(x); got != want {
				t.Fatalf("length %d, trial %d: Argmax %d, the plain scan %d", n, trial, got, want)
			}
		}
	}
}

func BenchmarkArgmax(b *testing.B) {
	x := make([]float32, 151936)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range x {
		x[i] = r.Float32()
	}
	b.Run("generic", func(b *testing.B) {
		for b.Loop() {
			argmaxGeneric(x)
		}
	})
	b.Run("kernel", func(b *testing.B) {
		for b.Loop() {
			Argmax(x)
		}
	})
}
