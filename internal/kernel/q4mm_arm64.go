//go:build !purego

package kernel

import (
	"sync"
	"unsafe"
)

// q4Rows2x4MMLA computes, for npairs pairs of rows (nib, codes and scales
// pointing at the first row's, as for the q4 row kernels) and the four
// tokens whose records rec holds (q4MMLAPrep), the 2x4 outputs of each
// pair: dst[t*ldd+r] for t < 4 and the pair's two rows r.
//
//go:noescape
func q4Rows2x4MMLA(dst *float32, ldd int, nib *byte, npairs, nb int, codes *uint8, scales *float32, rec *byte)

// q4MMLARecBytes is the size of four tokens' record of one block: the
// int8 activations of tokens (0, 1) and then (2, 3) interleaved by 8
// bytes as SMMLA reads a 2x8 matrix ([t0 k0..7 | t1 k0..7], [t0 k8..15 |
// t1 k8..15], ...; 64 bytes a pair), then the block scales of each pair
// as the lanes [d0, d1, d0, d1] of the 2x2 products (16 bytes a pair).
const q4MMLARecBytes = 160

// mmlaScratch holds the records of a call.
var mmlaScratch = sync.Pool{New: func() any { return new([]byte) }}

// q4MMLAPrep writes the records of the quads of tokens [4q, 4q+4) of x
// for q < quads: rec[q][b] for the nb blocks.
func q4MMLAPrep(rec []byte, x *Q8, quads int) {
	K, nb := x.K, x.K/QK
	q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x.Q))), len(x.Q))
	for qd := range quads {
		for b := range nb {
			r := rec[(qd*nb+b)*q4MMLARecBytes : (qd*nb+b+1)*q4MMLARecBytes]
			for p := range 2 {
				t0, t1 := 4*qd+2*p, 4*qd+2*p+1
				for c := range 4 {
					copy(r[64*p+16*c:64*p+16*c+8], q[t0*K+b*QK+8*c:t0*K+b*QK+8*c+8])
					copy(r[64*p+16*c+8:64*p+16*c+16], q[t1*K+b*QK+8*c:t1*K+b*QK+8*c+8])
				}
				d := (*[4]float32)(unsafe.Pointer(&r[128+16*p]))
				d[0], d[1], d[2], d[3] = x.D[t0*nb+b], x.D[t1*nb+b], x.D[t0*nb+b], x.D[t1*nb+b]
			}
		}
	}
}

// q4MatMulI8MM is Q4.MatMul on the Int8 matrix-multiply extension: tiles
// of two rows by four tokens with SMMLA (twice the multiply-adds of SDOT
// per instruction), for prefill. Decode (fewer than four tokens), the
// asymmetric form, the tokens past the last whole four and an odd last
// row take the SDOT kernels.
func q4MatMulI8MM(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
	K, T := w.K, x.T
	if n0 >= n1 || T <= 0 {
		return
	}
	if T < 4 || n1-n0 < 2 || w.Zeros != nil || !q4Fits(dst, ldd, w, x, n0, n1) {
		q4MatMulSDOT(dst, ldd, w, x, n0, n1)
		return
	}
	nb := K / QK
	quads := T / 4
	p := mmlaScratch.Get().(*[]byte)
	defer mmlaScratch.Put(p)
	rec := alignedGrow(p, quads*nb*q4MMLARecBytes)
	q4MMLAPrep(rec, x, quads)

	pairsEnd := n0 + (n1-n0)/2*2
	chunk := max(2, q4TileBytes/(nb*16)) &^ 1
	for c0 := n0; c0 < pairsEnd; c0 += chunk {
		c1 := min(c0+chunk, pairsEnd)
		var codes *uint8
		var scales *float32
		if w.Codes != nil {
			codes, scales = &w.Codes[c0*nb], &w.Scales[c0]
		} else {
			scales = &w.Scales[c0*nb]
		}
		for qd := range quads {
			q4Rows2x4MMLA(&dst[4*qd*ldd+c0], ldd, &w.Nib[c0*nb*16], (c1-c0)/2, nb, codes, scales, &rec[qd*nb*q4MMLARecBytes])
		}
	}
	// the odd last row, for the tokens of the quads
	if pairsEnd < n1 {
		var codes *uint8
		var scales *float32
		if w.Codes != nil {
			codes, scales = &w.Codes[pairsEnd*nb], &w.Scales[pairsEnd]
		} else {
			scales = &w.Scales[pairsEnd*nb]
		}
		for t := 0; t < 4*quads; t += 4 {
			q4Rows4SDOT(&dst[t*ldd+pairsEnd], ldd, &w.Nib[pairsEnd*nb*16], n1-pairsEnd, nb, codes, scales, &x.Q[t*K], K, &x.D[t*nb])
		}
	}
	// the tokens past the last four, every row
	if 4*quads < T {
		var codes *uint8
		var scales *float32
		if w.Codes != nil {
			codes, scales = &w.Codes[n0*nb], &w.Scales[n0]
		} else {
			scales = &w.Scales[n0*nb]
		}
		for t := 4 * quads; t < T; t++ {
			q4Rows1SDOT(&dst[t*ldd+n0], ldd, &w.Nib[n0*nb*16], n1-n0, nb, codes, scales, &x.Q[t*K], K, &x.D[t*nb])
		}
	}
}

// w8Rows2x4MMLA is q4Rows2x4MMLA's 8-bit form: npairs pairs of rows of u
// (row stride nb*32 bytes) against the four tokens of rec.
//
//go:noescape
func w8Rows2x4MMLA(dst *float32, ldd int, u *uint8, npairs, nb int, scales *float32, rec *byte)

// w8MatMulI8MM is W8.MatMul with SMMLA tiles of two rows by four tokens
// for prefill; decode, the tokens past the last whole four and an odd last
// row take the SDOT kernels.
func w8MatMulI8MM(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) {
	K, T := w.K, x.T
	if n0 >= n1 || T <= 0 {
		return
	}
	nb := K / QK
	if T < 4 || n1-n0 < 2 || K < QK || K%QK != 0 || x.K != K || n0 < 0 || n1 > w.N || ldd < n1 || len(dst) < (T-1)*ldd+n1 ||
		len(w.U) < n1*K || len(w.Scales) < n1 || len(x.Q) < T*K || len(x.D) < T*nb {
		w8MatMulSDOT(dst, ldd, w, x, n0, n1)
		return
	}
	quads := T / 4
	p := mmlaScratch.Get().(*[]byte)
	defer mmlaScratch.Put(p)
	rec := alignedGrow(p, quads*nb*q4MMLARecBytes)
	q4MMLAPrep(rec, x, quads)

	pairsEnd := n0 + (n1-n0)/2*2
	chunk := max(2, q4TileBytes/K) &^ 1
	for c0 := n0; c0 < pairsEnd; c0 += chunk {
		c1 := min(c0+chunk, pairsEnd)
		for qd := range quads {
			w8Rows2x4MMLA(&dst[4*qd*ldd+c0], ldd, &w.U[c0*K], (c1-c0)/2, nb, &w.Scales[c0], &rec[qd*nb*q4MMLARecBytes])
		}
	}
	if pairsEnd < n1 {
		for t := 0; t < 4*quads; t += 4 {
			w8Rows4SDOT(&dst[t*ldd+pairsEnd], ldd, &w.U[pairsEnd*K], n1-pairsEnd, nb, &w.Scales[pairsEnd], &x.Q[t*K], K, &x.D[t*nb])
		}
	}
	for t := 4 * quads; t < T; t++ {
		w8Rows1SDOT(&dst[t*ldd+n0], ldd, &w.U[n0*K], n1-n0, nb, &w.Scales[n0], &x.Q[t*K], K, &x.D[t*nb])
	}
}
