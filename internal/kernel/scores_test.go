package kernel

import (
	"math/rand/v2"
	"testing"
)

// TestScoresU8: keys packed by PackKeysU8 and summed by ScoresU8 give,
// bit for bit, the scores computed from the unpacked bytes in a plain
// loop (the sums are exact integers, converted and scaled in one order),
// for every supported overlay's kernels and the generic ones, for 1-4
// queries, key counts with and without a tail of the 16-key vectors,
// and several head sizes.
func TestScoresU8(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	kerns := map[string]func(dst []float32, ldd, n int, q []int8, ldq, m int, k []uint8, ld, E int, corr []int32, qs, ks []float32){
		"generic": scoresU8Generic,
	}
	for _, o := range Overlays() {
		if o.Supported && o.scoresU8 != nil {
			kerns[o.Name] = o.scoresU8
		}
	}
	t.Logf("kernels: %d", len(kerns))
	for name, kern := range kerns {
		for _, E := range []int{4, 40, 64, 128} {
			for _, n := range []int{1, 16, 37, 64, 100, 256} {
				for m := 1; m <= 4; m++ {
					const stride, ldq, ldd = 131, 133, 300
					src := make([]uint8, (n-1)*stride+E)
					for i := range src {
						src[i] = uint8(r.IntN(256))
					}
					q := make([]int8, (m-1)*ldq+E)
					for i := range q {
						q[i] = int8(r.IntN(255) - 127)
					}
					corr, qs, ks := make([]int32, m), make([]float32, m), make([]float32, n)
					for i := range m {
						for _, v := range q[i*ldq : i*ldq+E] {
							corr[i] += 128 * int32(v)
						}
						qs[i] = r.Float32() * 0.01
					}
					for j := range ks {
						ks[j] = r.Float32()
					}
					ld := 4*n + 12
					packed := make([]uint8, (E/4)*ld)
					PackKeysU8(packed, ld, src, stride, n, E)
					got := make([]float32, (m-1)*ldd+n)
					kern(got, ldd, n, q, ldq, m, packed, ld, E, corr, qs, ks)
					for i := range m {
						for j := range n {
							var s int32
							for e := range E {
								s += (int32(src[j*stride+e]) - 128) * int32(q[i*ldq+e])
							}
							want := float32(s) * qs[i] * ks[j]
							if g := got[i*ldd+j]; g != want {
								t.Fatalf("%s: E %d, %d keys, %d queries: score [%d][%d] = %g, want %g", name, E, n, m, i, j, g, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestScoresU8Spans: short spans panic before anything is written.
func TestScoresU8Spans(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("ScoresU8 with a short key block did not panic")
		}
	}()
	dst := make([]float32, 16)
	ScoresU8(dst, 16, 16, make([]int8, 8), 8, 1, make([]uint8, 60), 64, 8, []int32{0}, []float32{1}, make([]float32, 16))
}
