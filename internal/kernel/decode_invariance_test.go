package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDecodeSameWhateverRange: for one token, a row's output is the same
// bits whether the row is computed alone, within the whole range, or in
// any range starting at another row. The AVX-512 decode kernels take
// whole quads of rows in one call and the rest one row at a time, so a
// worker's share decides which kernel takes a row; if their sums were
// added in different orders, logits would change with the thread count.
func TestDecodeSameWhateverRange(t *testing.T) { eachWalk(t, decodeSameWhateverRange) }

func decodeSameWhateverRange(t *testing.T, walk string) {
	r := rand.New(rand.NewPCG(41, 42))
	const N = 23
	for _, o := range supported(t) {
		for _, K := range []int{QK, 3 * QK, 18 * QK, 24 * QK, 32 * QK} {
			x, _ := randQ8(r, 1, K)
			type product struct {
				name string
				run  func(dst []float32, n0, n1 int)
			}
			var products []product
			if o.Q4MatMul != nil {
				for _, lpbq := range []bool{true, false} {
					w := randQ4(r, N, K, lpbq, false)
					products = append(products, product{fmt.Sprintf("q4 lpbq=%v", lpbq),
						func(d []float32, n0, n1 int) { o.Q4MatMul(d, N, w, x, n0, n1) }})
				}
			}
			if o.q4Zeros != nil {
				w := randQ4(r, N, K, false, true)
				w.PrepareZeros()
				products = append(products, product{"q4 zeros",
					func(d []float32, n0, n1 int) { o.q4Zeros(d, N, w.sym, w.zs, x, n0, n1) }})
			}
			if o.Q4MatMul != nil && K%Q4KSuper == 0 {
				w := randQ4K(r, N, K)
				products = append(products, product{"q4 K4",
					func(d []float32, n0, n1 int) { o.Q4MatMul(d, N, w, x, n0, n1) }})
			}
			if o.W8MatMul != nil {
				w := randW8(r, N, K)
				products = append(products, product{"w8", func(d []float32, n0, n1 int) { o.W8MatMul(d, N, w, x, n0, n1) }})
			}
			for _, p := range products {
				whole := make([]float32, N)
				p.run(whole, 0, N)
				for n0 := 0; n0 < N; n0++ {
					for _, n1 := range []int{n0 + 1, min(n0+4, N), min(n0+5, N), N} {
						got := make([]float32, N)
						p.run(got, n0, n1)
						for n := n0; n < n1; n++ {
							if math.Float32bits(got[n]) != math.Float32bits(whole[n]) {
								t.Fatalf("%s %s walk %s K %d: row %d of [%d, %d) = %g, of [0, %d) %g",
									o.Name, p.name, walk, K, n, n0, n1, got[n], N, whole[n])
							}
						}
					}
				}
			}
		}
	}
}

// TestTokenSameWhateverBatch: a token's output row is the same bits
// whether it is multiplied alone (the one-token kernels) or among others
// (the tiles of several tokens, at any place in them). The engine's
// batched decode puts the next tokens of several sessions in one product;
// if the tiles summed in another order than the one-token kernels, a
// session's logits would depend on which sessions decode beside it, and
// a binary16 or uint8 cache could round what it stores to another value.
func TestTokenSameWhateverBatch(t *testing.T) { eachWalk(t, tokenSameWhateverBatch) }

func tokenSameWhateverBatch(t *testing.T, walk string) {
	r := rand.New(rand.NewPCG(43, 44))
	// 4 and 8 tokens go in the one-row tiles of a few tokens (q4FewMaxT,
	// w8FewMaxT), 9 in tiles of several rows and up to 3 tokens.
	for _, T := range []int{4, 8, 9} {
		tokenSameWhateverBatchOf(t, r, walk, T)
	}
}

func tokenSameWhateverBatchOf(t *testing.T, r *rand.Rand, walk string, T int) {
	const N = 13
	for _, o := range supported(t) {
		if !o.BatchExact {
			t.Logf("overlay %s: not BatchExact, its batches are checked by TestOverlaysMatMul's tolerance", o.Name)
			continue
		}
		for _, K := range []int{QK, 3 * QK, 18 * QK, 24 * QK, 32 * QK, 37 * QK} {
			x, xf := randQ8(r, T, K)
			type product struct {
				name string
				run  func(dst []float32, x *Q8)
			}
			var products []product
			if o.Q4MatMul != nil {
				for _, lpbq := range []bool{true, false} {
					w := randQ4(r, N, K, lpbq, false)
					products = append(products, product{fmt.Sprintf("q4 lpbq=%v", lpbq),
						func(d []float32, x *Q8) { o.Q4MatMul(d, N, w, x, 0, N) }})
				}
			}
			if o.q4Zeros != nil {
				w := randQ4(r, N, K, false, true)
				w.PrepareZeros()
				products = append(products, product{"q4 zeros",
					func(d []float32, x *Q8) { o.q4Zeros(d, N, w.sym, w.zs, x, 0, N) }})
			}
			if o.Q4MatMul != nil && K%Q4KSuper == 0 {
				w := randQ4K(r, N, K)
				products = append(products, product{"q4 K4",
					func(d []float32, x *Q8) { o.Q4MatMul(d, N, w, x, 0, N) }})
			}
			if o.W8MatMul != nil {
				w := randW8(r, N, K)
				products = append(products, product{"w8", func(d []float32, x *Q8) { o.W8MatMul(d, N, w, x, 0, N) }})
			}
			for _, p := range products {
				all := make([]float32, T*N)
				p.run(all, x)
				for tok := range T {
					one := NewQ8(1, K)
					one.Quantize(xf[tok*K:(tok+1)*K], 1)
					got := make([]float32, N)
					p.run(got, one)
					for n := range N {
						if math.Float32bits(got[n]) != math.Float32bits(all[tok*N+n]) {
							t.Fatalf("%s %s walk %s K %d: token %d row %d = %g alone, %g among %d tokens",
								o.Name, p.name, walk, K, tok, n, got[n], all[tok*N+n], T)
						}
					}
				}
			}
		}
	}
}
