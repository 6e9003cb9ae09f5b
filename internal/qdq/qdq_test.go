package qdq

import (
	"math"
	"math/rand"
	"testing"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/quant"
)

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()*scale) + 0.01
	}
	return v
}

// TestInt8BlocksMatchKernel checks that the simulated int8 activations are
// exactly the values the int8 kernels compute with: Q*D of kernel.Q8.
func TestInt8BlocksMatchKernel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	const T, K = 3, 96
	x := randVec(r, T*K, 3)
	x[5] = 40 // an outlier block
	a := kernel.NewQ8(T, K)
	a.Quantize(x, T)
	got := make([]float32, len(x))
	Int8Blocks(got, x)
	for i := range x {
		want := float32(a.Q[i]) * a.D[i/Int8Block]
		if got[i] != want {
			t.Fatalf("[%d] of %v: %v, kernel %v", i, x[i], got[i], want)
		}
	}
}

// TestKVRoundMatchesCache checks the simulated KV cache against the uint8
// cache codec (quant.KVQuant) round trip, per head, values beyond the clip
// included.
func TestKVRoundMatchesCache(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	const T, H, E = 4, 3, 8
	x := randVec(r, T*H*E, 2)
	clip := []float32{1.5, 3, 0}
	kq, err := quant.NewKVQuant(H, E, clip)
	if err != nil {
		t.Fatal(err)
	}
	u := make([]uint8, len(x))
	want := make([]float32, len(x))
	if err := kq.Quantize(u, x); err != nil {
		t.Fatal(err)
	}
	if err := kq.Dequantize(want, u); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(x))
	KVRound(got, x, H*E, E, kq.Scales)
	for i := range x {
		if got[i] != want[i] {
			t.Fatalf("[%d] of %v: %v, cache %v", i, x[i], got[i], want[i])
		}
	}
}

// TestStatic16 checks the 16-bit static rounding: within a step of the
// value clamped to the range, and exact at zero.
func TestStatic16(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	x := randVec(r, 1000, 1)
	rg := Range{Min: -2, Max: 3}
	got := make([]float32, len(x))
	Static16(got, x, rg)
	step := 5.0 / 65535
	for i, v := range x {
		want := math.Min(math.Max(float64(v), -2), 3)
		// half a step of rounding, and the range's ends sit on the grid
		// only up to the zero point's rounding (another half step)
		if math.Abs(float64(got[i])-want) > step+1e-6 {
			t.Fatalf("%v -> %v (step %v)", v, got[i], step)
		}
	}
	z := []float32{0}
	Static16(z, z, rg)
	if z[0] != 0 {
		t.Fatalf("0 -> %v", z[0])
	}
}
