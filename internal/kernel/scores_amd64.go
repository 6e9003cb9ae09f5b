//go:build !purego

package kernel

import "unsafe"

// scoresVnni is ScoresU8 with the AVX-512 VNNI kernels: they cover
// n - n%16 keys, the generic loop the rest.
func scoresVnni(dst []float32, ldd, n int, q []int8, ldq, m int, k []uint8, ld, E int, corr []int32, qs, ks []float32) {
	full := n &^ 15
	if full > 0 {
		qp := (*byte)(unsafe.Pointer(unsafe.SliceData(q)))
		d, kp, c, s, w := unsafe.SliceData(dst), unsafe.SliceData(k), unsafe.SliceData(corr), unsafe.SliceData(qs), unsafe.SliceData(ks)
		switch m {
		case 1:
			scoresU8Vnni1(d, ldd, qp, ldq, kp, full, E/4, ld, c, s, w)
		case 2:
			scoresU8Vnni2(d, ldd, qp, ldq, kp, full, E/4, ld, c, s, w)
		case 3:
			scoresU8Vnni3(d, ldd, qp, ldq, kp, full, E/4, ld, c, s, w)
		default:
			scoresU8Vnni4(d, ldd, qp, ldq, kp, full, E/4, ld, c, s, w)
		}
	}
	if full == n {
		return
	}
	for i := range m {
		qi := q[i*ldq : i*ldq+E]
		for j := full; j < n; j++ {
			var s int32
			for e, v := range qi {
				s += int32(k[(e/4)*ld+4*j+e%4]) * int32(v)
			}
			dst[i*ldd+j] = float32(s-corr[i]) * qs[i] * ks[j]
		}
	}
}
