//go:build !purego

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ4LanesSameBits: a 4-bit product of q4LanesMinT tokens or more (the
// AVX-512 row-lane tiles) gives every (row, token) the bits the one-token
// kernel gives that token alone, in each scale form (LPBQ codes, float
// scales, scales with zero points, K4 super-blocks), for every K (whole
// chunks, a partial last chunk, only a partial chunk), row counts around
// the 16-row tile, row ranges that start anywhere, and token counts
// around the 12-token tile, through records laid out once (Q8.Begin) or
// per call; and it writes nothing outside its rows: the
// guard values around them (the output's other rows, the columns between
// tokens, past the end) stay as they were.
func TestQ4LanesSameBits(t *testing.T) {
	if !q4VnniSupported() {
		t.Logf("AVX-512 VNNI not available: the row-lane tiles do not run here")
		return
	}
	r := rand.New(rand.NewPCG(61, 62))
	type form struct {
		name string
		new  func(N, K int) (run func(dst []float32, ldd int, x *Q8, n0, n1 int))
	}
	forms := []form{
		{"lpbq", func(N, K int) func([]float32, int, *Q8, int, int) {
			w := randQ4(r, N, K, true, false)
			return func(d []float32, ldd int, x *Q8, n0, n1 int) { q4MatMulWith(&q4VnniSets, d, ldd, w, x, n0, n1) }
		}},
		{"scales", func(N, K int) func([]float32, int, *Q8, int, int) {
			w := randQ4(r, N, K, false, false)
			return func(d []float32, ldd int, x *Q8, n0, n1 int) { q4MatMulWith(&q4VnniSets, d, ldd, w, x, n0, n1) }
		}},
		{"zeros", func(N, K int) func([]float32, int, *Q8, int, int) {
			w := randQ4(r, N, K, false, true)
			w.PrepareZeros()
			return func(d []float32, ldd int, x *Q8, n0, n1 int) {
				q4MatMulZerosWith(&q4VnniSets, d, ldd, w.sym, w.zs, x, n0, n1)
			}
		}},
		{"k4", func(N, K int) func([]float32, int, *Q8, int, int) {
			if K%Q4KSuper != 0 {
				return nil
			}
			w := randQ4K(r, N, K)
			return func(d []float32, ldd int, x *Q8, n0, n1 int) { q4MatMulWith(&q4VnniSets, d, ldd, w, x, n0, n1) }
		}},
	}
	for _, f := range forms {
		for _, K := range []int{QK, 3 * QK, 8 * QK, 16 * QK, 18 * QK, 24 * QK, 32 * QK, 37 * QK, 48 * QK} {
			for _, N := range []int{1, 13, 16, 23, 40} {
				run := f.new(N, K)
				if run == nil {
					continue
				}
				checkLanesSameBits(t, r, f.name, N, K, run)
			}
		}
	}
}

// checkLanesSameBits runs a product of N rows and K inputs (run) over
// q4LanesMinT tokens or more, through records laid out once (Q8.Begin)
// or per call, on whole tiles of rows and on random ranges, and checks
// every (row, token) against the same product of that token alone, bit
// for bit, and the guard values around the rows (other rows, the columns
// between tokens, past the end) unwritten.
func checkLanesSameBits(t *testing.T, r *rand.Rand, name string, N, K int, run func(dst []float32, ldd int, x *Q8, n0, n1 int)) {
	t.Helper()
	for j, T := range []int{q4LanesMinT, 17, 29, 41} {
		x, xf := randQ8(r, T, K)
		if j%2 == 1 {
			// records laid out once, as the engine does
			x.Begin(T, true, true)
			x.QuantizeRows(xf, 0, T)
		}
		n0, n1 := 0, N // whole tiles of 16 rows, then any range
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
		run(got, ldd, x, n0, n1)
		for tok := range T {
			one := NewQ8(1, K)
			one.Quantize(xf[tok*K:(tok+1)*K], 1)
			want := make([]float32, N)
			run(want, N, one, 0, N)
			for n := range ldd {
				g := got[tok*ldd+n]
				if n < n0 || n >= n1 {
					if g != guard {
						t.Fatalf("%s K %d N %d T %d rows [%d, %d): token %d column %d written (%g)", name, K, N, T, n0, n1, tok, n, g)
					}
					continue
				}
				if math.Float32bits(g) != math.Float32bits(want[n]) {
					t.Fatalf("%s K %d N %d T %d rows [%d, %d): token %d row %d = %g among %d tokens, %g alone",
						name, K, N, T, n0, n1, tok, n, g, T, want[n])
				}
			}
		}
		for i := T * ldd; i < len(got); i++ {
			if got[i] != guard {
				t.Fatalf("%s K %d N %d T %d: written past the output (%d)", name, K, N, T, i)
			}
		}
	}
}

// q4VnniSupported reports whether the AVX-512 VNNI overlay runs here.
func q4VnniSupported() bool {
	for _, o := range Overlays() {
		if o.Name == "avx512vnni" {
			return o.Supported
		}
	}
	return false
}

// BenchmarkQ4LanesCrossover times LPBQ products of few tokens on the
// AVX-512 chunk tiles and on the row-lane tiles (which repack each tile
// of 16 rows per call), to place q4LanesMinT: records laid out once per
// call, as the engine's Begin does.
func BenchmarkQ4LanesCrossover(b *testing.B) {
	if !q4VnniSupported() {
		b.Skip("AVX-512 VNNI not available")
	}
	r := rand.New(rand.NewPCG(81, 82))
	saved := q4LanesMinT
	defer func() { q4LanesMinT = saved }()
	for _, s := range [][2]int{{1536, 576}, {1024, 1024}, {3072, 1024}} {
		N, K := s[0], s[1]
		w := randQ4(r, N, K, true, false)
		for _, T := range []int{4, 8, 12, 16, 24, 32} {
			for _, lanes := range []bool{false, true} {
				b.Run(fmt.Sprintf("%dx%d/T%d/lanes=%v", N, K, T, lanes), func(b *testing.B) {
					q4LanesMinT = 1 << 30
					if lanes {
						q4LanesMinT = 1
					}
					x, xf := randQ8(r, T, K)
					x.Begin(T, true, true)
					dst := make([]float32, T*N)
					for b.Loop() {
						x.QuantizeRows(xf, 0, T)
						q4MatMulWith(&q4VnniSets, dst, N, w, x, 0, N)
					}
					b.ReportMetric(2*float64(N*K*T)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
