//go:build !purego

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQ4ResidentSameBits: the resident row loops (one token's
// activations held in registers, _gen/q4resident.go) give every row the
// bits of the general row loop, in each scale form, for every K they
// take (one or two whole chunks, one chunk and 1-4 groups of a partial
// one, the last group whole or not) and K just past them; for row
// ranges that start anywhere and end anywhere (the whole quads go to the
// loop, the rows left to the one-row tile); and they write no output
// outside the range.
func TestQ4ResidentSameBits(t *testing.T) {
	if !q4VnniSupported() {
		t.Logf("AVX-512 VNNI not available: the resident row loops do not run here")
		return
	}
	r := rand.New(rand.NewPCG(71, 72))
	type run func(dst []float32, x *Q8, n0, n1 int)
	forms := []struct {
		name string
		new  func(N, K int) run
	}{
		{"lpbq", func(N, K int) run {
			w := randQ4(r, N, K, true, false)
			return func(d []float32, x *Q8, n0, n1 int) { q4MatMulWith(&q4VnniSets, d, N, w, x, n0, n1) }
		}},
		{"scales", func(N, K int) run {
			w := randQ4(r, N, K, false, false)
			return func(d []float32, x *Q8, n0, n1 int) { q4MatMulWith(&q4VnniSets, d, N, w, x, n0, n1) }
		}},
		{"zeros", func(N, K int) run {
			w := randQ4(r, N, K, false, true)
			w.PrepareZeros()
			return func(d []float32, x *Q8, n0, n1 int) { q4MatMulZerosWith(&q4VnniSets, d, N, w.sym, w.zs, x, n0, n1) }
		}},
		{"k4", func(N, K int) run {
			if K%Q4KSuper != 0 {
				return nil
			}
			w := randQ4K(r, N, K)
			return func(d []float32, x *Q8, n0, n1 int) { q4MatMulWith(&q4VnniSets, d, N, w, x, n0, n1) }
		}},
	}
	defer decodeWalk.Store(decodeWalk.Load())
	ran := 0
	for _, f := range forms {
		// blocks: 16 and 32 (whole chunks), 17..20 (one group), 22,
		// 24, 27, 28, 30, 31 (2-4 groups, the last whole or not),
		// 48 (no resident loop)
		for _, nb := range []int{16, 17, 18, 20, 22, 24, 27, 28, 30, 31, 32, 48} {
			K := nb * QK
			N := 37
			prod := f.new(N, K)
			if prod == nil {
				continue
			}
			x, _ := randQ8(r, 1, K)
			for _, rg := range [][2]int{{0, N}, {1, N}, {3, 30}, {5, 9}, {2, 5}} {
				checkResidentRange(t, fmt.Sprintf("%s K %d", f.name, K), N, rg[0], rg[1],
					func(dst []float32) { prod(dst, x, rg[0], rg[1]) })
				ran++
			}
		}
	}
	t.Logf("%d products compared", ran)
}

// TestW8ResidentSameBits: the 8-bit resident row loops (the first 1-4
// quads' activations in registers) give every row the bits of the
// general row loop, for K of fewer quads than they hold, as many, and
// more (with groups and a tail block after them), on row ranges that
// start and end anywhere, writing nothing outside the range.
func TestW8ResidentSameBits(t *testing.T) {
	if !q4VnniSupported() {
		t.Logf("AVX-512 VNNI not available: the resident row loops do not run here")
		return
	}
	r := rand.New(rand.NewPCG(73, 74))
	defer decodeWalk.Store(decodeWalk.Load())
	for _, nb := range []int{2, 7, 8, 9, 16, 18, 24, 32, 33, 40, 64, 67} {
		K := nb * QK
		N := 29
		w := randW8(r, N, K)
		x, _ := randQ8(r, 1, K)
		for _, rg := range [][2]int{{0, N}, {1, N}, {3, 22}, {2, 5}} {
			checkResidentRange(t, fmt.Sprintf("K %d", K), N, rg[0], rg[1],
				func(dst []float32) { w8MatMulWith(&w8Vnni, dst, N, w, x, rg[0], rg[1]) })
		}
	}
}

// checkResidentRange runs a product of rows [n0, n1) of N (run) walking
// rows with the activations from memory (walkRowsMemory) and in
// registers (walkRows), each with and without the prefetches
// (walkRowsMemoryPrefetch, walkRowsPrefetch), and checks that all give
// every row the same bits and write nothing outside the range.
func checkResidentRange(t *testing.T, name string, N, n0, n1 int, run func(dst []float32)) {
	t.Helper()
	want := make([]float32, N)
	for i := range want {
		want[i] = float32(i) + 0.5
	}
	decodeWalk.Store(walkRowsMemory)
	run(want)
	for _, w := range []int32{walkRows, walkRowsPrefetch, walkRowsMemoryPrefetch} {
		got := make([]float32, N)
		for i := range got {
			got[i] = float32(i) + 0.5
		}
		decodeWalk.Store(w)
		run(got)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s rows [%d, %d): row %d = %v walking %s, %v in the general loop", name, n0, n1, i, got[i], walkNames[w], want[i])
			}
			if (i < n0 || i >= n1) && got[i] != float32(i)+0.5 {
				t.Fatalf("%s rows [%d, %d): row %d outside the range written walking %s", name, n0, n1, i, walkNames[w])
			}
		}
	}
}
