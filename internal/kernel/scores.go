package kernel

import "fmt"

// The 8-bit scores of attention over a uint8 cache: a block of keys is
// packed in key lanes (PackKeysU8) and several int8 queries are summed
// against it at once (ScoresU8), 4 elements of 16 keys a VPDPBUSD on
// AVX-512 VNNI.

// PackKeysU8 packs n keys of E biased bytes, key j at src[j*stride:],
// in key lanes: dst[r*ld+4j+b] = src[j*stride+4r+b] for r < E/4, b < 4.
// E must be a multiple of 4 and ld at least 4n.
func PackKeysU8(dst []uint8, ld int, src []uint8, stride, n, E int) {
	if n == 0 {
		return
	}
	if E%4 != 0 || ld < 4*n || len(dst) < (E/4-1)*ld+4*n || len(src) < (n-1)*stride+E {
		panic(fmt.Sprintf("kernel: PackKeysU8: %d keys of %d at stride %d into rows of %d: spans too short (%d, %d) or E not a multiple of 4", n, E, stride, ld, len(src), len(dst)))
	}
	for j := range n {
		row := src[j*stride : j*stride+E]
		for r := 0; r < E/4; r++ {
			d := dst[r*ld+4*j : r*ld+4*j+4]
			s := row[4*r : 4*r+4]
			d[0], d[1], d[2], d[3] = s[0], s[1], s[2], s[3]
		}
	}
}

// ScoresU8 sets dst[i*ldd+j] = float32(Σ_e k[j][e]*q[i*ldq+e] - corr[i])
// * qs[i] * ks[j] for i < m, j < n: m int8 queries of E elements (a
// multiple of 4) against n keys of biased bytes packed by PackKeysU8 in
// rows of ld bytes, k[j][e] being the stored byte. With corr[i] =
// 128*Σ_e q[i*ldq+e] the sum is the one over the signed values the bytes
// stand for. The results are exact integer sums converted and scaled
// the same way on every path. Spans past a slice panic before anything
// is written.
func ScoresU8(dst []float32, ldd, n int, q []int8, ldq, m int, k []uint8, ld, E int, corr []int32, qs, ks []float32) {
	if m == 0 || n == 0 {
		return
	}
	if E%4 != 0 || E == 0 || m > attnMultiMax || ld < 4*n || len(k) < (E/4-1)*ld+4*n ||
		len(dst) < (m-1)*ldd+n || len(q) < (m-1)*ldq+E || len(corr) < m || len(qs) < m || len(ks) < n {
		panic(fmt.Sprintf("kernel: ScoresU8: %d queries of %d against %d keys: a span is too short or E not a multiple of 4", m, E, n))
	}
	scoresU8Impl(dst, ldd, n, q, ldq, m, k, ld, E, corr, qs, ks)
}

// scoresU8Impl is the selected overlay's ScoresU8 over checked spans.
var scoresU8Impl = scoresU8Generic

func scoresU8Generic(dst []float32, ldd, n int, q []int8, ldq, m int, k []uint8, ld, E int, corr []int32, qs, ks []float32) {
	for i := range m {
		qi := q[i*ldq : i*ldq+E]
		for j := range n {
			var s int32
			for e, v := range qi {
				s += int32(k[(e/4)*ld+4*j+e%4]) * int32(v)
			}
			dst[i*ldd+j] = float32(s-corr[i]) * qs[i] * ks[j]
		}
	}
}
