//go:build !purego

package kernel

import (
	"math"
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
			for j, T := range []int{q4LanesMinT, 17, 29, 41} {
				x, xf := randQ8(r, T, K)
				if j%2 == 1 {
					// records laid out once, as the engine does
					x.Begin(T, true, true)
					x.QuantizeRows(xf, 0, T)
				}
				n0, n1 := 0, N
				if j >= 2 {
					n0 = r.IntN(N)
					n1 = n0 + 1 + r.IntN(N-n0)
				}
				ldd := N + 3
				const guard = float32(-12345.5)
				got := make([]float32, T*ldd+5)
				for i := range got {
					got[i] = guard
				}
				w8MatMulWith(&w8Vnni, got, ldd, w, x, n0, n1)
				for tok := range T {
					one := NewQ8(1, K)
					one.Quantize(xf[tok*K:(tok+1)*K], 1)
					want := make([]float32, N)
					w8MatMulWith(&w8Vnni, want, N, w, one, 0, N)
					for n := range ldd {
						g := got[tok*ldd+n]
						if n < n0 || n >= n1 {
							if g != guard {
								t.Fatalf("K %d N %d T %d rows [%d, %d): token %d column %d written (%g)", K, N, T, n0, n1, tok, n, g)
							}
							continue
						}
						if math.Float32bits(g) != math.Float32bits(want[n]) {
							t.Fatalf("K %d N %d T %d rows [%d, %d): token %d row %d = %g among %d tokens, %g alone",
								K, N, T, n0, n1, tok, n, g, T, want[n])
						}
					}
				}
				for i := T * ldd; i < len(got); i++ {
					if got[i] != guard {
						t.Fatalf("K %d N %d T %d: written past the output (%d)", K, N, T, i)
					}
				}
			}
		}
	}
}
