package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Q5 is a packed 5-bit LPBQ weight W [N, K] (K a multiple of QK): a
// 5-bit code u (1..31, the integer q = u - 16 in -15..15) per weight, a
// code k (1..16) per block of QK inputs and a float32 scale per row,
//
//	w[n][k] = float32((u - 16) * Codes[n*nb+k/QK]) * Scales[n]
//
// The codes lie in two planes (PackQ5): Nib holds the low 4 bits of
// weight i = n*K + k in byte i/2 (the low nibble for even i), Hi its
// fifth bit as bit i%8 of byte i/8.
//
// Its product is plain Go on every architecture: the integer sums over
// a block are exact, the block and row terms are float32.
type Q5 struct {
	N, K   int
	Nib    []byte    // [N*K/2]
	Hi     []byte    // [N*K/8]
	Codes  []uint8   // [N][K/QK]
	Scales []float32 // [N]
}

// Check reports whether w's parts have the sizes N and K imply.
func (w *Q5) Check() error {
	if w.N < 1 || w.K < QK || w.K%QK != 0 {
		return fmt.Errorf("kernel: q5 weight [%d, %d]: K must be a positive multiple of %d", w.N, w.K, QK)
	}
	n := w.N * w.K
	if len(w.Nib) != n/2 || len(w.Hi) != n/8 || len(w.Codes) != n/QK || len(w.Scales) != w.N {
		return fmt.Errorf("kernel: q5 weight [%d, %d]: %d, %d, %d and %d parts, want %d, %d, %d and %d",
			w.N, w.K, len(w.Nib), len(w.Hi), len(w.Codes), len(w.Scales), n/2, n/8, n/QK, w.N)
	}
	return nil
}

// PackQ5 writes the 5-bit codes u (each 0..31) as Q5.Nib and Q5.Hi; len(u)
// must be a multiple of 8.
func PackQ5(nib, hi []byte, u []uint8) error {
	if len(u)%8 != 0 || len(nib) != len(u)/2 || len(hi) != len(u)/8 {
		return errors.New("kernel: pack q5: sizes do not fit")
	}
	clear(hi)
	for i, v := range u {
		if v > 31 {
			return fmt.Errorf("kernel: pack q5: code %d of weight %d is out of 0..31", v, i)
		}
		if i%2 == 0 {
			nib[i/2] = v & 15
		} else {
			nib[i/2] |= (v & 15) << 4
		}
		hi[i/8] |= (v >> 4) << (i % 8)
	}
	return nil
}

// q5Block writes the integers q = u - 16 of the block of QK weights
// starting at weight i0 (a multiple of QK) into q.
func (w *Q5) q5Block(q *[QK]int32, i0 int) {
	nib := w.Nib[i0/2 : i0/2+QK/2]
	hi := binary.LittleEndian.Uint32(w.Hi[i0/8:])
	for j, b := range nib {
		q[2*j] = int32(b&15|byte(hi>>(2*j)&1)<<4) - 16
		q[2*j+1] = int32(b>>4|byte(hi>>(2*j+1)&1)<<4) - 16
	}
}

// Row writes the dequantized row n into dst [K].
func (w *Q5) Row(dst []float32, n int) {
	nb := w.K / QK
	var q [QK]int32
	s := w.Scales[n]
	for b := range nb {
		w.q5Block(&q, n*w.K+b*QK)
		k := int32(w.Codes[n*nb+b])
		for j, v := range q {
			dst[b*QK+j] = float32(v*k) * s
		}
	}
}

// MatMul computes rows [n0, n1) of the product for the T activation rows
// of x: dst[t*ldd+n] = Scales[n] * Σ_b D_x[t][b] * float32(Codes[n][b] *
// Σ_i q_i*Q[t][i]), the sum over a block's QK inputs exact in integers.
// Every token is multiplied alone, so its outputs have the same bits in
// any batch.
func (w *Q5) MatMul(dst []float32, ldd int, x *Q8, n0, n1 int) {
	K, nb := w.K, w.K/QK
	var q [QK]int32
	for n := n0; n < n1; n++ {
		for t := 0; t < x.T; t++ {
			dst[t*ldd+n] = 0
		}
		for b := range nb {
			w.q5Block(&q, n*K+b*QK)
			k := int32(w.Codes[n*nb+b])
			for t := 0; t < x.T; t++ {
				xq := x.Q[t*K+b*QK : t*K+(b+1)*QK]
				var sum int32
				for j, v := range q {
					sum += v * int32(xq[j])
				}
				dst[t*ldd+n] += x.D[t*nb+b] * float32(sum*k)
			}
		}
		for t := 0; t < x.T; t++ {
			dst[t*ldd+n] *= w.Scales[n]
		}
	}
}
