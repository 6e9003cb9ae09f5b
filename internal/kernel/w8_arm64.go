//go:build !purego

package kernel

// The w8 row kernels compute, for nrows consecutive rows r of a packed
// 8-bit weight (u and scales pointing at its first row) and the tokens t
// of a tile (1 or 4; xq [t][K] and xd [t][nb] at the first token's
// activations),
//
//	dst[t*ldd+r] = scales[r] * Σ_b xd[t][b] * Σ_i (u[r][32b+i]-128) * xq[t][32b+i]
//
// flipping the top bit of U for the signed q, so the block sums of the
// activations are not needed. nrows and nb are at least 1.

//go:noescape
func w8Rows1SDOT(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)

//go:noescape
func w8Rows4SDOT(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)

//go:noescape
func w8Rows1NEON(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)

//go:noescape
func w8Rows4NEON(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)

type w8RowsFunc func(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)

func w8MatMulSDOT(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) {
	w8MatMulArm64(dst, ldd, w, x, n0, n1, w8Rows1SDOT, w8Rows4SDOT)
}

func w8MatMulNEON(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) {
	w8MatMulArm64(dst, ldd, w, x, n0, n1, w8Rows1NEON, w8Rows4NEON)
}

// w8MatMulArm64 walks chunks of rows by tiles of four tokens, then the
// remaining tokens one by one; sizes the slices cannot hold take the
// generic path.
func w8MatMulArm64(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int, rows1, rows4 w8RowsFunc) {
	K, T := w.K, x.T
	if n0 >= n1 || T <= 0 {
		return
	}
	nb := K / QK
	if K < QK || K%QK != 0 || x.K != K || n0 < 0 || n1 > w.N || ldd < n1 || len(dst) < (T-1)*ldd+n1 ||
		len(w.U) < n1*K || len(w.Scales) < n1 || len(x.Q) < T*K || len(x.D) < T*nb {
		w8MatMulGeneric(dst, ldd, w, x, n0, n1)
		return
	}
	chunk := max(1, q4TileBytes/K)
	for c0 := n0; c0 < n1; c0 += chunk {
		c1 := min(c0+chunk, n1)
		u, scales := &w.U[c0*K], &w.Scales[c0]
		t := 0
		for ; t+4 <= T; t += 4 {
			rows4(&dst[t*ldd+c0], ldd, u, c1-c0, nb, scales, &x.Q[t*K], K, &x.D[t*nb])
		}
		for ; t < T; t++ {
			rows1(&dst[t*ldd+c0], ldd, u, c1-c0, nb, scales, &x.Q[t*K], K, &x.D[t*nb])
		}
	}
}
