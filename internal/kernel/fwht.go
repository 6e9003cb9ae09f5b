package kernel

import (
	"fmt"
	"math/bits"
)

// FWHT applies the fast Walsh-Hadamard transform to x in place: x becomes
// H x with H the Sylvester-ordered Hadamard matrix of order len(x)
// (H[i][j] = (-1)^popcount(i&j)), unnormalized (scale by 1/sqrt(n) for the
// orthonormal transform). len(x) must be a power of two. It runs log2(n)
// butterfly stages; stages whose span is a whole number of vectors use the
// SIMD butterfly.
func FWHT(x []float32) error {
	n := len(x)
	if n == 0 || n&(n-1) != 0 {
		return fmt.Errorf("kernel: fwht: length %d is not a power of two", n)
	}
	fwhtWith(x, butterflyImpl)
	return nil
}

// fwhtSmall is the span below which stages run inline rather than through
// the butterfly (one call per pair of spans would cost more than it saves).
const fwhtSmall = 8

func fwhtWith(x []float32, bf func(a, b []float32)) {
	n := len(x)
	for h := 1; h < n; h <<= 1 {
		if h < fwhtSmall {
			for i := 0; i < n; i += 2 * h {
				for j := i; j < i+h; j++ {
					u, v := x[j], x[j+h]
					x[j], x[j+h] = u+v, u-v
				}
			}
			continue
		}
		for i := 0; i < n; i += 2 * h {
			bf(x[i:i+h], x[i+h:i+2*h])
		}
	}
}

// butterflyGeneric sets (a[i], b[i]) = (a[i]+b[i], a[i]-b[i]).
func butterflyGeneric(a, b []float32) {
	b = b[:len(a)]
	for i, u := range a {
		v := b[i]
		a[i], b[i] = u+v, u-v
	}
}

// fwhtGeneric is the reference of FWHT: the plain matrix product with
// H[i][j] = (-1)^popcount(i&j), in float64.
func fwhtGeneric(x []float32) {
	n := len(x)
	out := make([]float64, n)
	for i := range n {
		var s float64
		for j, v := range x {
			if bits.OnesCount(uint(i&j))&1 == 0 {
				s += float64(v)
			} else {
				s -= float64(v)
			}
		}
		out[i] = s
	}
	for i, v := range out {
		x[i] = float32(v)
	}
}
