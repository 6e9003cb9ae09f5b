//go:build !purego

package kernel

import "sync"

// The q4 row kernels compute, for nrows consecutive rows r of a packed
// weight (nib, codes and scales pointing at its first row) and the
// tokens t of a tile (1 or 4; xq [t][K] and xd [t][nb] pointing at the
// first token's activations),
//
//	dst[t*ldd+r] = rs[r] * Σ_b s[r][b] * xd[t][b] * Σ_i (u[r][32b+i]-8) * xq[t][32b+i]
//
// with s = float32(codes[r*nb+b]) and rs = scales[r] when codes is not
// nil (LPBQ), else s = scales[r*nb+b] and rs = 1. The zero point 8 is
// subtracted from the 4-bit codes before the signed int8 products, so
// the block sums of the activations are not needed. nrows and nb are at
// least 1.

//go:noescape
func q4Rows1SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)

//go:noescape
func q4Rows4SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)

//go:noescape
func q4Rows1NEON(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)

//go:noescape
func q4Rows4NEON(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)

type q4RowsFunc func(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)

// The K4 row kernels (Q4_K super-blocks, Q4.K4) compute, for nrows
// consecutive rows from the one whose codes are at nib and whose 48-byte
// records start at rec, and the tokens of a tile (1 or 4),
//
//	dst[t*ldd+r] = Σ_b xd[t][b]*(d*sc)*Σ_i u*xq[t][32b+i] - Σ_b sumd[t][b]*(dmin*m)
//
// with the codes u taken as they are (0..15) and sumd[t][b] = xd*Sum of
// the block's activations, laid out by q4K4SumD. nb is a positive
// multiple of 8.

//go:noescape
func q4K4Rows1SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)

//go:noescape
func q4K4Rows4SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)

//go:noescape
func q4K4Rows1NEON(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)

//go:noescape
func q4K4Rows4NEON(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)

type q4K4RowsFunc func(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)

// sumdScratch holds the D*Sum of a call's tokens (q4K4SumD).
var sumdScratch = sync.Pool{New: func() any { return new([]float32) }}

// q4TileBytes is the size of the packed weights a tile of tokens walks
// before the next tile of tokens reuses them: about a core's L2 share.
const q4TileBytes = 128 << 10

func q4MatMulSDOT(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
	if w.K4 != nil {
		q4K4MatMulArm64(dst, ldd, w, x, n0, n1, q4K4Rows1SDOT, q4K4Rows4SDOT)
		return
	}
	q4MatMulArm64(dst, ldd, w, x, n0, n1, q4Rows1SDOT, q4Rows4SDOT)
}

func q4MatMulNEON(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
	if w.K4 != nil {
		q4K4MatMulArm64(dst, ldd, w, x, n0, n1, q4K4Rows1NEON, q4K4Rows4NEON)
		return
	}
	q4MatMulArm64(dst, ldd, w, x, n0, n1, q4Rows1NEON, q4Rows4NEON)
}

// q4K4MatMulArm64 is Q4.MatMul of a weight in the K4 form, split as
// q4MatMulArm64 splits it; sizes the slices cannot hold take the generic
// path.
func q4K4MatMulArm64(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int, rows1, rows4 q4K4RowsFunc) {
	K, T := w.K, x.T
	if n0 >= n1 || T <= 0 {
		return
	}
	nb := K / QK
	stride := q4KChunks(K) * Q4KChunkBytes
	if !q4FitsBase(dst, ldd, w, x, n0, n1) || K%Q4KSuper != 0 || len(w.K4) < n1*stride || len(x.Sum) < T*nb {
		q4MatMulGeneric(dst, ldd, w, x, n0, n1)
		return
	}
	p := sumdScratch.Get().(*[]float32)
	defer sumdScratch.Put(p)
	if cap(*p) < T*nb {
		*p = make([]float32, T*nb)
	}
	sumd := (*p)[:T*nb]
	q4K4SumD(sumd, x)
	chunk := max(1, q4TileBytes/(nb*16))
	for c0 := n0; c0 < n1; c0 += chunk {
		c1 := min(c0+chunk, n1)
		nib, rec := &w.Nib[c0*nb*16], &w.K4[c0*stride]
		t := 0
		for ; t+4 <= T; t += 4 {
			rows4(&dst[t*ldd+c0], ldd, nib, c1-c0, nb, rec, &x.Q[t*K], K, &x.D[t*nb], &sumd[t*nb])
		}
		for ; t < T; t++ {
			rows1(&dst[t*ldd+c0], ldd, nib, c1-c0, nb, rec, &x.Q[t*K], K, &x.D[t*nb], &sumd[t*nb])
		}
	}
}

// q4K4SumD writes D*Sum of every block of x's tokens: for the tokens of
// whole fours, per four and block the four tokens' values side by side
// ([T/4][nb][4], read by the 4-token kernels), then per remaining token
// its blocks ([t][nb]); either way token t's start at t*nb.
func q4K4SumD(sumd []float32, x *Q8) {
	nb := x.K / QK
	T4 := x.T &^ 3
	for t := range x.T {
		for b := range nb {
			v := x.D[t*nb+b] * float32(x.Sum[t*nb+b])
			if t < T4 {
				sumd[(t&^3)*nb+4*b+t%4] = v
			} else {
				sumd[t*nb+b] = v
			}
		}
	}
}

// q4MatMulArm64 splits the product into chunks of rows, each walked by
// tiles of four tokens and then the remaining tokens one by one. The
// asymmetric form, and any size the slices cannot hold, take the
// generic path (which reports bad sizes by its own index checks).
func q4MatMulArm64(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int, rows1, rows4 q4RowsFunc) {
	K, T := w.K, x.T
	if n0 >= n1 || T <= 0 {
		return
	}
	nb := K / QK
	if w.Zeros != nil || !q4Fits(dst, ldd, w, x, n0, n1) {
		q4MatMulGeneric(dst, ldd, w, x, n0, n1)
		return
	}
	chunk := max(1, q4TileBytes/(nb*16))
	for c0 := n0; c0 < n1; c0 += chunk {
		c1 := min(c0+chunk, n1)
		nib := &w.Nib[c0*nb*16]
		var codes *uint8
		var scales *float32
		if w.Codes != nil {
			codes, scales = &w.Codes[c0*nb], &w.Scales[c0]
		} else {
			scales = &w.Scales[c0*nb]
		}
		t := 0
		for ; t+4 <= T; t += 4 {
			rows4(&dst[t*ldd+c0], ldd, nib, c1-c0, nb, codes, scales, &x.Q[t*K], K, &x.D[t*nb])
		}
		for ; t < T; t++ {
			rows1(&dst[t*ldd+c0], ldd, nib, c1-c0, nb, codes, scales, &x.Q[t*K], K, &x.D[t*nb])
		}
	}
}

// q4Fits reports whether every slice holds what the kernels read or
// write for rows [n0, n1) and x.T tokens.
func q4Fits(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) bool {
	nb := w.K / QK
	if !q4FitsBase(dst, ldd, w, x, n0, n1) {
		return false
	}
	switch {
	case w.K4 != nil:
		return false // the K4 form: q4K4MatMulArm64
	case w.Codes != nil:
		return len(w.Codes) >= n1*nb && len(w.Scales) >= n1
	}
	return len(w.Scales) >= n1*nb
}

// q4FitsBase reports whether the codes, activations and output hold what
// the kernels touch for rows [n0, n1) and x.T tokens, whatever the form.
func q4FitsBase(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) bool {
	K, T, nb := w.K, x.T, w.K/QK
	return K >= QK && K%QK == 0 && x.K == K && n0 >= 0 && n1 <= w.N && ldd >= n1 && len(dst) >= (T-1)*ldd+n1 &&
		len(w.Nib) >= n1*nb*16 && len(x.Q) >= T*K && len(x.D) >= T*nb
}
