//go:build !purego

package kernel

import (
	"math/rand/v2"
	"testing"
)

// TestW8LanesSameBits: an 8-bit product of q4LanesMinT tokens or more
// (the AVX-512 row-lane tiles) gives every (row, token) the bits the
// one-token kernel gives that token alone, for every K (whole quads,
// groups and a last block after them, or none), row counts around the
// 16-row tile, row ranges that start anywhere, token counts around the
// 12-token tile, through records laid out once (Q8.Begin) or per call;
// and it writes nothing outside its rows.
func TestW8LanesSameBits(t *testing.T) {
	if !q4VnniSupported() {
		t.Logf("AVX-512 VNNI not available: the row-lane tiles do not run here")
		return
	}
	r := rand.New(rand.NewPCG(71, 72))
	for _, K := range []int{QK, 2 * QK, 3 * QK, 8 * QK, 9 * QK, 11 * QK, 18 * QK, 32 * QK, 37 * QK} {
		for _, N := range []int{1, 13, 16, 23, 40} {
			w := randW8(r, N, K)
			checkLanesSameBits(t, r, "w8", N, K, func(d []float32, ldd int, x *Q8, n0, n1 int) {
				w8MatMulWith(&w8Vnni, d, ldd, w, x, n0, n1)
			})
		}
	}
}
