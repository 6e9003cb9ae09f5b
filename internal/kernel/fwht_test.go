package kernel

import (
	"math"
	"math/rand"
	"testing"
)

// TestFWHT checks FWHT, through the installed butterfly and through every
// supported overlay's, against the plain matrix product with
// H[i][j] = (-1)^popcount(i&j) in float64, on random non-zero inputs of
// every power-of-two length from 1 to 4096 (spans shorter than, equal to
// and longer than a vector). Tolerance: 1e-5 relative to the input's norm
// times sqrt(n), the growth of the transform, since both sides round
// differently (the reference sums in float64).
func TestFWHT(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	type impl struct {
		name string
		bf   func(a, b []float32)
	}
	impls := []impl{{"generic", butterflyGeneric}, {"installed", butterflyImpl}}
	for _, o := range supported(t) {
		if o.Butterfly != nil {
			impls = append(impls, impl{o.Name, o.Butterfly})
		}
	}
	for n := 1; n <= 4096; n *= 2 {
		x := make([]float32, n)
		var norm float64
		for i := range x {
			x[i] = float32(r.NormFloat64()) + 0.1
			norm += float64(x[i]) * float64(x[i])
		}
		want := append([]float32(nil), x...)
		fwhtGeneric(want)
		tol := 1e-5 * math.Sqrt(norm) * math.Sqrt(float64(n))
		for _, im := range impls {
			got := append([]float32(nil), x...)
			fwhtWith(got, im.bf)
			for i := range got {
				if math.Abs(float64(got[i])-float64(want[i])) > tol {
					t.Fatalf("%s n=%d: [%d] = %v, want %v", im.name, n, i, got[i], want[i])
				}
			}
		}
		got := append([]float32(nil), x...)
		if err := FWHT(got); err != nil {
			t.Fatal(err)
		}
		// applied twice, H H = n I
		if err := FWHT(got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Abs(float64(got[i])/float64(n)-float64(x[i])) > 1e-5*math.Sqrt(norm) {
				t.Fatalf("n=%d: H H x / n at %d = %v, want %v", n, i, got[i]/float32(n), x[i])
			}
		}
	}
	if err := FWHT(make([]float32, 12)); err == nil {
		t.Error("length 12 accepted")
	}
}

// BenchmarkFWHT measures one transform of 4096 values.
func BenchmarkFWHT(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	b.SetBytes(4 * 4096)
	for b.Loop() {
		FWHT(x)
	}
}
