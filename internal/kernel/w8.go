package kernel

import "fmt"

// W8 is a packed 8-bit weight W [N, K] with one scale per row:
// w[n][k] = float32(int(U[n*K+k]) - 128) * Scales[n].
type W8 struct {
	N, K   int
	U      []uint8   // [N][K], q + 128
	Scales []float32 // [N]
}

// Check reports whether w's parts have the sizes N and K imply.
func (w *W8) Check() error {
	if w.N < 1 || w.K < QK || w.K%QK != 0 {
		return fmt.Errorf("kernel: w8 weight [%d, %d]: K must be a positive multiple of %d", w.N, w.K, QK)
	}
	if len(w.U) != w.N*w.K || len(w.Scales) != w.N {
		return fmt.Errorf("kernel: w8 weight [%d, %d]: %d bytes and %d scales, want %d and %d", w.N, w.K, len(w.U), len(w.Scales), w.N*w.K, w.N)
	}
	return nil
}

// Row writes the dequantized row n into dst [K].
func (w *W8) Row(dst []float32, n int) {
	s := w.Scales[n]
	for k, u := range w.U[n*w.K : (n+1)*w.K] {
		dst[k] = float32(int32(u)-128) * s
	}
}

// MatMul computes rows [n0, n1) of the product for the T activation rows
// of x: dst[t*ldd+n] = Σ_k w[n][k] * x[t][k] over the quantized x,
//
//	= Scales[n] * Σ_b D[t][b] * (Σ_i U[n][32b+i]*Q[t][32b+i] - 128*Sum[t][b])
//
// with the integer sums exact and the block terms added in float32.
func (w *W8) MatMul(dst []float32, ldd int, x *Q8, n0, n1 int) {
	w8MatMulImpl(dst, ldd, w, x, n0, n1)
}

// w8MatMulGeneric is the reference of W8.MatMul.
func w8MatMulGeneric(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) {
	K, nb := w.K, w.K/QK
	for t := 0; t < x.T; t++ {
		xq, xd, xs := x.Q[t*K:(t+1)*K], x.D[t*nb:(t+1)*nb], x.Sum[t*nb:(t+1)*nb]
		for n := n0; n < n1; n++ {
			ur := w.U[n*K : (n+1)*K]
			var acc float32
			for b := range nb {
				var dot int32
				for i := b * QK; i < (b+1)*QK; i++ {
					dot += int32(ur[i]) * int32(xq[i])
				}
				acc += xd[b] * float32(dot-128*xs[b])
			}
			dst[t*ldd+n] = acc * w.Scales[n]
		}
	}
}
