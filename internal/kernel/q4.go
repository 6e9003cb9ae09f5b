package kernel

import (
	"errors"
	"fmt"
)

// Q4 is a packed 4-bit weight W [N, K] (see the package comment for the
// byte layout). Exactly one of two scale forms is used: with Codes set,
// a block's scale is float32(Codes[n*nb+b]) * Scales[n] (LPBQ, Scales
// [N]); without, it is Scales[n*nb+b] ([N][nb]). Zeros, when set, holds a
// zero point per block ([N][nb]); when nil the zero point is 8.
//
// A third form, K4, is ggml's Q4_K as it is: blocks of 32 in super-blocks
// of 8, each block with a 6-bit scale sc and minimum m, each super-block
// with a float scale d and dmin, and the weights d*sc*u - dmin*m
// (u = 0..15). K4 holds, per row, one record of Q4KChunkBytes per 16
// blocks (see Q4KChunk); Codes, Scales and Zeros are then nil and K a
// multiple of 256. That is 4.75 bits a weight where the per-block form
// of the same weights takes 6. Every implementation of MatMul takes it.
type Q4 struct {
	N, K   int
	Nib    []byte    // [N][nb][16]
	Codes  []uint8   // [N][nb] or nil
	Scales []float32 // [N] with Codes, else [N][nb]
	Zeros  []float32 // [N][nb] or nil
	K4     []byte    // [N][ceil(nb/16)][Q4KChunkBytes] or nil

	// sym and zs, set by PrepareZeros, run a weight with zero points as
	// the same codes with zero point 8 (sym, on the fast kernels) plus
	// the block terms zs[n][b] = scale * (zero - 8) / 8 times each
	// block's -8 * activation sum (= scale * (8 - zero) * Sum).
	sym *Q4
	zs  []float32
}

// PrepareZeros readies a weight with zero points for the fast kernels,
// which assume the zero point 8: since
//
//	sc*(u - z) = sc*(u - 8) + sc*(8 - z),
//
// MatMul then runs the codes with zero point 8 and adds, per output, the
// block terms sc*(8 - z) times the block sums of the activations (an
// [N, K/32] float32 product, 1/32 of the main one). It allocates N*K/32
// floats; without it such weights run on the plain-Go reference. It does
// nothing for weights without zero points.
// A weight in the K4 form needs nothing: every product takes it as it is.
func (w *Q4) PrepareZeros() {
	if w.Zeros == nil || w.Codes != nil || w.sym != nil {
		return
	}
	nb := w.K / QK
	zs := make([]float32, len(w.Zeros))
	for i, z := range w.Zeros {
		zs[i] = w.Scales[i] * (z - 8) / 8 // /8 is exact
	}
	w.sym = &Q4{N: w.N, K: w.K, Nib: w.Nib, Scales: w.Scales[:w.N*nb]}
	w.zs = zs
}

// addZeroTerms adds to dst[t*ldd+n], for rows [n0, n1) and every token,
// -8 * Σ_b zs[n][b] * D[t][b] * Sum[t][b] (see PrepareZeros; the factor
// -8 is exact).
func (w *Q4) addZeroTerms(dst []float32, ldd int, x *Q8, n0, n1 int) {
	nb := w.K / QK
	var stack [512]float32
	buf := stack[:]
	if nb+(n1-n0) > len(buf) {
		buf = make([]float32, nb+(n1-n0))
	}
	xs, tmp := buf[:nb], buf[nb:nb+(n1-n0)]
	for t := 0; t < x.T; t++ {
		for b := range nb {
			xs[b] = x.D[t*nb+b] * float32(x.Sum[t*nb+b])
		}
		for lo := n0; lo < n1; lo += len(tmp) {
			hi := min(lo+len(tmp), n1)
			DotRows(tmp[:hi-lo], xs, w.zs[lo*nb:hi*nb], nb)
			row := dst[t*ldd+lo : t*ldd+hi]
			for i, v := range tmp[:hi-lo] {
				row[i] += -8 * v
			}
		}
	}
}

// Check reports whether w's parts have the sizes N and K imply.
func (w *Q4) Check() error {
	if w.N < 1 || w.K < QK || w.K%QK != 0 {
		return fmt.Errorf("kernel: q4 weight [%d, %d]: K must be a positive multiple of %d", w.N, w.K, QK)
	}
	nb := w.K / QK
	switch {
	case len(w.Nib) != w.N*nb*16:
		return fmt.Errorf("kernel: q4 weight [%d, %d]: %d bytes of 4-bit codes, want %d", w.N, w.K, len(w.Nib), w.N*nb*16)
	case w.Codes != nil && (len(w.Codes) != w.N*nb || len(w.Scales) != w.N):
		return fmt.Errorf("kernel: q4 weight [%d, %d]: %d block codes and %d row scales, want %d and %d", w.N, w.K, len(w.Codes), len(w.Scales), w.N*nb, w.N)
	case w.Codes == nil && w.K4 == nil && len(w.Scales) != w.N*nb:
		return fmt.Errorf("kernel: q4 weight [%d, %d]: %d block scales, want %d", w.N, w.K, len(w.Scales), w.N*nb)
	case w.Zeros != nil && len(w.Zeros) != w.N*nb:
		return fmt.Errorf("kernel: q4 weight [%d, %d]: %d zero points, want %d", w.N, w.K, len(w.Zeros), w.N*nb)
	case w.K4 != nil && (w.Codes != nil || w.Scales != nil || w.Zeros != nil):
		return fmt.Errorf("kernel: q4 weight [%d, %d]: the K4 form has no codes, scales or zero points", w.N, w.K)
	case w.K4 != nil && w.K%Q4KSuper != 0:
		return fmt.Errorf("kernel: q4 weight [%d, %d]: the K4 form needs K a multiple of %d", w.N, w.K, Q4KSuper)
	case w.K4 != nil && len(w.K4) != w.N*q4KChunks(w.K)*Q4KChunkBytes:
		return fmt.Errorf("kernel: q4 weight [%d, %d]: %d bytes of K4 records, want %d", w.N, w.K, len(w.K4), w.N*q4KChunks(w.K)*Q4KChunkBytes)
	}
	return nil
}

// PackNibbles writes the 4-bit unsigned codes u [N][K] (each 0..15) as
// Q4.Nib. It fails when K is not a multiple of QK or a code is out of
// range.
func PackNibbles(dst []byte, u []uint8, N, K int) error {
	if K%QK != 0 || len(u) != N*K || len(dst) != N*K/2 {
		return errors.New("kernel: pack: sizes do not fit")
	}
	for blk := 0; blk < N*K/QK; blk++ {
		src := u[blk*QK : (blk+1)*QK]
		out := dst[blk*16 : (blk+1)*16]
		for i := range 16 {
			lo, hi := src[i], src[16+i]
			if lo > 15 || hi > 15 {
				return fmt.Errorf("kernel: pack: block %d: code out of 0..15", blk)
			}
			out[i] = lo | hi<<4
		}
	}
	return nil
}

// blockScale is the scale of block b of row n.
func (w *Q4) blockScale(n, b, nb int) float32 {
	if w.K4 != nil {
		sc, _ := w.k4Block(n, b)
		return sc
	}
	if w.Codes != nil {
		return float32(w.Codes[n*nb+b]) * w.Scales[n]
	}
	return w.Scales[n*nb+b]
}

// zero is the zero point of block b of row n.
func (w *Q4) zero(n, b, nb int) float32 {
	if w.Zeros != nil {
		return w.Zeros[n*nb+b]
	}
	return 8
}

// Row writes the dequantized row n into dst [K]:
// dst[k] = (u[n][k] - z) * sc for the block of k.
func (w *Q4) Row(dst []float32, n int) {
	nb := w.K / QK
	if w.K4 != nil {
		for b := range nb {
			sc, m := w.k4Block(n, b)
			nib := w.Nib[(n*nb+b)*16 : (n*nb+b+1)*16]
			for i, v := range nib {
				// explicit roundings: no fused multiply-add (arm64),
				// the products ggml rounds
				dst[b*QK+i] = float32(sc*float32(v&15)) - m
				dst[b*QK+16+i] = float32(sc*float32(v>>4)) - m
			}
		}
		return
	}
	for b := range nb {
		sc, z := w.blockScale(n, b, nb), w.zero(n, b, nb)
		nib := w.Nib[(n*nb+b)*16 : (n*nb+b+1)*16]
		for i, v := range nib {
			dst[b*QK+i] = (float32(v&15) - z) * sc
			dst[b*QK+16+i] = (float32(v>>4) - z) * sc
		}
	}
}

// MatMul computes rows [n0, n1) of the product for the T activation rows
// of x: dst[t*ldd+n] = Σ_k w[n][k] * x[t][k] over the quantized x,
//
//	= Σ_b sc[n][b] * D[t][b] * (Σ_i u[n][32b+i]*Q[t][32b+i] - z[n][b]*Sum[t][b])
//
// with the integer sums exact and the block terms added in float32.
//
// A weight with zero points runs on the fast kernels once PrepareZeros
// has been called, else on the plain-Go reference.
//
// A weight in the K4 form computes each block as
// D[t][b] * (d*sc * Σ_i u*Q - dmin*m * Sum[t][b]).
func (w *Q4) MatMul(dst []float32, ldd int, x *Q8, n0, n1 int) {
	switch {
	case w.sym == nil || n1 <= n0 || x.T <= 0:
		q4MatMulImpl(dst, ldd, w, x, n0, n1)
	case q4ZerosImpl != nil:
		q4ZerosImpl(dst, ldd, w.sym, w.zs, x, n0, n1)
	default:
		q4MatMulImpl(dst, ldd, w.sym, x, n0, n1)
		w.addZeroTerms(dst, ldd, x, n0, n1)
	}
}

// q4MatMulGeneric is the reference of Q4.MatMul.
func q4MatMulGeneric(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
	K, nb := w.K, w.K/QK
	for t := 0; t < x.T; t++ {
		xq, xd, xs := x.Q[t*K:(t+1)*K], x.D[t*nb:(t+1)*nb], x.Sum[t*nb:(t+1)*nb]
		for n := n0; n < n1; n++ {
			var acc float32
			for b := range nb {
				nib := w.Nib[(n*nb+b)*16 : (n*nb+b+1)*16]
				xb := xq[b*QK : (b+1)*QK]
				var dot int32
				for i, v := range nib {
					dot += int32(v&15)*int32(xb[i]) + int32(v>>4)*int32(xb[16+i])
				}
				if w.K4 != nil {
					sc, m := w.k4Block(n, b)
					acc += xd[b] * (sc*float32(dot) - m*float32(xs[b]))
					continue
				}
				acc += w.blockScale(n, b, nb) * xd[b] * (float32(dot) - w.zero(n, b, nb)*float32(xs[b]))
			}
			dst[t*ldd+n] = acc
		}
	}
}
