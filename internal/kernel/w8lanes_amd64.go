//go:build !purego

package kernel

import (
	"encoding/binary"
	"unsafe"
)

// w8LanesKern is the signature of the AVX-512 8-bit prefill tiles in row
// lanes (_gen/w8lanes.go): 16 rows of a repacked tile w by TT tokens of
// lane records x (token stride xs bytes), quads and groups entries a
// lane, a scratch of TT*256 floats, and the first rows rows of the tile
// stored to dst (ldd floats a token) times their row scales rs.
type w8LanesKern func(w *byte, x *byte, xs int, quads int, groups int, a *float32, dst *float32, ldd int, rs *float32, rows int)

// w8VnniLanes is the AVX-512 8-bit row-lane tiles by tokens (1..12).
var w8VnniLanes = [...]w8LanesKern{nil,
	w8VnniLanes1, w8VnniLanes2, w8VnniLanes3, w8VnniLanes4, w8VnniLanes5, w8VnniLanes6,
	w8VnniLanes7, w8VnniLanes8, w8VnniLanes9, w8VnniLanes10, w8VnniLanes11, w8VnniLanes12}

// The 8-bit row-lane tiles' sizes (_gen/w8lanes.go).
const (
	w8LanesQuadBytes    = 4 * 64 // a quad entry: 4 vectors
	w8LanesGroupBytes   = 64     // a group entry: 1 vector
	w8LanesQuadRecBytes = 20     // a token's quad entry: 16 values, D
	w8LanesGrpRecBytes  = 8      // a token's group entry: 4 values, D
)

// w8LanesShape returns, for K inputs, a lane's quad entries (whole quads
// of 8 blocks) and group entries (the groups of 2 blocks left, and the
// last block if one is left).
func w8LanesShape(K int) (quads, groups int) {
	nb := K / QK
	nq := nb / 8
	return nq, (nb - 8*nq + 1) / 2
}

// w8LanesTokenBytes is the size of one token's lane records for K: the
// 16 lanes' entries, then C, padded to 64 bytes.
func w8LanesTokenBytes(K int) int {
	quads, groups := w8LanesShape(K)
	return (16*(quads*w8LanesQuadRecBytes+groups*w8LanesGrpRecBytes) + 4 + 63) &^ 63
}

// w8VnniRecords is the AVX-512 8-bit layout of activation records: each
// token's lane records for products of q4LanesMinT tokens or more, its
// quad records (w8Prep with quads) for fewer; a token's stride holds
// either.
var w8VnniRecords = &actLayout{
	tokenBytes: w8VnniTokenBytes,
	fill: func(rec []byte, x *Q8, t0, t1 int) {
		if w8VnniPrep(rec, x, t0, t1) {
			x.recs.w8Min128.Store(true)
		}
	},
}

// w8VnniTokenBytes is the stride of one token's AVX-512 8-bit records:
// its quad or its lane records.
func w8VnniTokenBytes(K int) int { return max(w8QuadTokenBytes(K), w8LanesTokenBytes(K)) }

// w8VnniPrep writes the AVX-512 8-bit records of tokens [t0, t1) of x
// (w8VnniTokenBytes each) that its products read, and reports whether
// some Q is -128 (only the quad records look: the AVX-512 kernels take
// -128, which only the AVX2 ones cannot).
func w8VnniPrep(rec []byte, x *Q8, t0, t1 int) bool {
	stride := w8VnniTokenBytes(x.K)
	if x.T >= q4LanesMinT {
		w8LanesPrep(rec, x, t0, t1, stride)
		return false
	}
	return w8PrepStride(rec, x, true, t0, t1, stride)
}

// w8LanesPrep writes the lane records of tokens [t0, t1) of x, each at
// the start of its stride bytes of rec, and C after them, summed as
// w8Prep sums it.
func w8LanesPrep(rec []byte, x *Q8, t0, t1, stride int) {
	K, nb := x.K, x.K/QK
	quads, groups := w8LanesShape(K)
	q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x.Q))), len(x.Q))
	for t := t0; t < t1; t++ {
		r := rec[t*stride : (t+1)*stride]
		qt := q[t*K : (t+1)*K]
		d := x.D[t*nb : (t+1)*nb]
		o := 0
		for l := range 16 {
			L, rr := l/4, l%4
			for qd := range quads {
				at := qd*256 + 64*rr + 16*L
				*(*[16]byte)(r[o:]) = *(*[16]byte)(qt[at:])
				*(*float32)(unsafe.Pointer(&r[o+16])) = d[at/QK]
				o += w8LanesQuadRecBytes
			}
			for g := range groups {
				at := quads*256 + 64*g + 4*l
				if at >= K {
					*(*[8]byte)(r[o:]) = [8]byte{}
				} else {
					*(*[4]byte)(r[o:]) = *(*[4]byte)(qt[at:])
					*(*float32)(unsafe.Pointer(&r[o+4])) = d[at/QK]
				}
				o += w8LanesGrpRecBytes
			}
		}
		var c float32 // as w8Prep, in the same order
		for b := range nb {
			c += -128 * float32(x.Sum[t*nb+b]) * x.D[t*nb+b]
		}
		*(*float32)(unsafe.Pointer(&r[o])) = c
	}
}

// w8LanesRepack lays out rows [n, n+rows) of w (rows <= 16; the lanes
// past them are zeros) as a row-lane tile in buf: for each lane l =
// 4L+r, its quad entries (vector v: bytes 64r+16L+4v.. of the quad of
// the 16 rows), then its group entries (bytes 4l.. of the group, zeros
// past the row).
func w8LanesRepack(buf []byte, w *W8, n, rows int) {
	K := w.K
	quads, groups := w8LanesShape(K)
	lstr := quads*w8LanesQuadBytes + groups*w8LanesGroupBytes
	if rows == q4LanesRows {
		// the whole groups after the quads, then the last block's 32 bytes
		w8VnniLanesRepack(&w.U[n*K], K, quads, (K-256*quads)/64, K%64, &buf[0], lstr)
		return
	}
	dword := func(r, at int) uint32 {
		if r >= rows || at >= K {
			return 0
		}
		return binary.LittleEndian.Uint32(w.U[(n+r)*K+at:])
	}
	for l := range 16 {
		L, rr := l/4, l%4
		o := l * lstr
		for qd := range quads {
			for v := range 4 {
				for r := range 16 {
					binary.LittleEndian.PutUint32(buf[o+64*v+4*r:], dword(r, qd*256+64*rr+16*L+4*v))
				}
			}
			o += w8LanesQuadBytes
		}
		for g := range groups {
			for r := range 16 {
				binary.LittleEndian.PutUint32(buf[o+4*r:], dword(r, quads*256+64*g+4*l))
			}
			o += w8LanesGroupBytes
		}
	}
}

// w8LanesMatMul runs rows [n0, n1) of w for every token of x on the
// 8-bit row-lane tiles, from the lane records in rec (stride bytes a
// token).
func w8LanesMatMul(dst []float32, ldd int, w *W8, x *Q8, rec []byte, stride, n0, n1 int) {
	quads, groups := w8LanesShape(w.K)
	tile := 16 * (quads*w8LanesQuadBytes + groups*w8LanesGroupBytes)
	buf, holder := getScratch(tile + 4*q4LanesMaxTT*256)
	defer scratch.Put(holder)
	a := (*float32)(unsafe.Pointer(&buf[tile]))
	// every token against one repacked tile (see q4LanesMatMul)
	for n := n0; n < n1; n += q4LanesRows {
		rows := min(q4LanesRows, n1-n)
		w8LanesRepack(buf[:tile], w, n, rows)
		if next := n + q4LanesRows; next < n1 {
			lines := (min(q4LanesRows, n1-next)*w.K + 63) / 64
			prefetchStrided(&w.U[next*w.K], 64, min(lines, 128))
		}
		for t := 0; t < x.T; {
			TT := min(x.T-t, q4LanesMaxTT)
			w8VnniLanes[TT](&buf[0], &rec[t*stride], stride, quads, groups, a,
				&dst[t*ldd+n], ldd, &w.Scales[n], rows)
			t += TT
		}
	}
}
