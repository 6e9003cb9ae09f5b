//go:build !purego

package kernel

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

// q4TileBytes is the size of the packed weights a tile of tokens walks
// before the next tile of tokens reuses them: about a core's L2 share.
const q4TileBytes = 128 << 10

func q4MatMulSDOT(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
	q4MatMulArm64(dst, ldd, w, x, n0, n1, q4Rows1SDOT, q4Rows4SDOT)
}

func q4MatMulNEON(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
	q4MatMulArm64(dst, ldd, w, x, n0, n1, q4Rows1NEON, q4Rows4NEON)
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
	K, T, nb := w.K, x.T, w.K/QK
	if K < QK || K%QK != 0 || x.K != K || n0 < 0 || n1 > w.N || ldd < n1 || len(dst) < (T-1)*ldd+n1 ||
		len(w.Nib) < n1*nb*16 || len(x.Q) < T*K || len(x.D) < T*nb {
		return false
	}
	switch {
	case w.K4 != nil:
		return false // the K4 form: expanded by PrepareZeros, else generic
	case w.Codes != nil:
		return len(w.Codes) >= n1*nb && len(w.Scales) >= n1
	}
	return len(w.Scales) >= n1*nb
}
