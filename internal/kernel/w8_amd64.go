//go:build !purego

package kernel

import (
	"bytes"
	"unsafe"
)

// w8Kern is the signature of the generated 8-bit tile kernels: rows
// [n, n+R) by tokens [t, t+TT) over all of K, against prepared
// activations (w8Prep). u addresses row n's bytes (row stride rstr), ng
// and tail are the number of whole 2-block groups and the block left
// over, x the first token's records (token stride xs bytes), dst the
// output of (t, n) with ldd floats per token, rs the row scales from n.
type w8Kern func(u *byte, rstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32)

// w8RowsKern is the signature of the generated decode kernels: n
// consecutive rows from the row u addresses, for one token, one row
// after another (see q4RowsKern).
type w8RowsKern func(u *byte, rstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)

// w8Set is one ISA's generated kernels by tile shape. Like the 4-bit
// ones (q4Set), the kernels take one row at a time for one token.
type w8Set struct {
	k   [9][9]w8Kern // [R][TT], nil where not generated
	seq w8RowsKern   // one token over many rows in one call, or nil
	// resident[q] is seq for K of q quads or more (q the last index for
	// more), the token's activations of the first q held in registers
	// (_gen/w8.go), or nil.
	resident []w8RowsKern
	// seqPf and residentPf are seq and resident asking for their
	// weights ahead (_gen/prefetch.go), or nil.
	seqPf      w8RowsKern
	residentPf []w8RowsKern
	decode     int        // rows per tile for one token
	rows       int        // rows per tile for several tokens
	tokens     int        // largest TT
	signed     bool       // the kernels need Q > -128 (AVX2's sign trick)
	lanes      bool       // q4LanesMinT tokens or more run on the row-lane tiles
	layout     *actLayout // the records the kernels read
	// prep writes tokens [t0, t1) of layout's records and reports
	// whether some Q is -128.
	prep func(rec []byte, x *Q8, t0, t1 int) bool
}

var (
	w8Vnni = w8Set{seq: w8VnniRows, resident: []w8RowsKern{1: w8VnniRowsQ1, 2: w8VnniRowsQ2, 3: w8VnniRowsQ3, 4: w8VnniRowsQ4},
		seqPf: w8VnniRowsPf, residentPf: []w8RowsKern{1: w8VnniRowsQ1Pf, 2: w8VnniRowsQ2Pf, 3: w8VnniRowsQ3Pf, 4: w8VnniRowsQ4Pf}, decode: 1, rows: 4, tokens: 3, lanes: true, layout: w8VnniRecords, prep: w8VnniPrep, k: [9][9]w8Kern{
			1: {1: w8Vnni1x1, 2: w8Vnni1x2, 3: w8Vnni1x3, 4: w8Vnni1x4, 5: w8Vnni1x5, 6: w8Vnni1x6, 7: w8Vnni1x7, 8: w8Vnni1x8},
			2: {1: w8Vnni2x1, 2: w8Vnni2x2, 3: w8Vnni2x3, 4: w8Vnni2x4},
			4: {1: w8Vnni4x1, 2: w8Vnni4x2, 3: w8Vnni4x3},
		}}
	w8Avx2 = w8Set{seq: w8Avx2Rows, seqPf: w8Avx2RowsPf, decode: 1, rows: 2, tokens: 4, signed: true, layout: w8Records, prep: w8PrepGroups, k: [9][9]w8Kern{
		1: {1: w8Avx21x1, 2: w8Avx21x2, 3: w8Avx21x3, 4: w8Avx21x4},
		2: {1: w8Avx22x1, 2: w8Avx22x2, 3: w8Avx22x3, 4: w8Avx22x4},
		4: {1: w8Avx24x1},
	}}
)

// w8RecBytes is the size of one token's prepared record per group of 2
// blocks: Q of the 2 blocks (64 bytes), then D of each block repeated
// over its 8 int32 lanes (the layout in _gen/w8.go).
const w8RecBytes = 128

// w8TokenBytes is the size of one token's records for K inputs: its
// groups, then C = Σ_b -128*D[b]*Sum[b], padded to 64 bytes.
func w8TokenBytes(K int) int { return w8RecordBytes(K, false) }

// w8FewMaxT is the most tokens multiplied by the one-row tiles of all
// the tokens at once (w8MatMulWith) where the set has them.
var w8FewMaxT = 8

// w8RecCache is the size of the records walked against one range of
// weight rows before moving on (they stay in L2).
const w8RecCache = 512 << 10

// w8Records is the AVX2 8-bit products' layout of activation records.
var w8Records = &actLayout{
	tokenBytes: w8TokenBytes,
	fill: func(rec []byte, x *Q8, t0, t1 int) {
		if w8PrepGroups(rec, x, t0, t1) {
			x.recs.w8Min128.Store(true)
		}
	},
}

// w8QuadBytes is the size of the AVX-512 kernels' record of a quad of
// 8 blocks: Q transposed as the kernels transpose each row's 256 bytes
// (4x4 dwords in each 128-bit lane), then the D of each int32 lane's
// block (the layout in _gen/w8.go). The blocks past the whole quads
// follow as w8Records' groups.
const w8QuadBytes = 320

// w8QuadTokenBytes is the size of one token's AVX-512 records for K
// inputs: its quads, its groups left, C padded to 64 bytes.
func w8QuadTokenBytes(K int) int { return w8RecordBytes(K, true) }

// w8RecordBytes is the size of one token's records for K inputs, with
// or without quads first.
func w8RecordBytes(K int, quads bool) int {
	nb, nq := K/QK, 0
	if quads {
		nq = nb / 8
	}
	return nq*w8QuadBytes + (nb-8*nq+1)/2*w8RecBytes + 64
}

// w8PrepGroups writes the records of tokens [t0, t1) of x in groups
// (w8Records) and reports whether some Q is -128.
func w8PrepGroups(rec []byte, x *Q8, t0, t1 int) bool { return w8Prep(rec, x, false, t0, t1) }

// w8Prep writes the records of tokens [t0, t1) of x: with quads its
// whole quads of 8 blocks first; then the blocks left in groups of 2
// (the last padded with a zero block), then C.
func w8Prep(rec []byte, x *Q8, quads bool, t0, t1 int) bool {
	return w8PrepStride(rec, x, quads, t0, t1, w8RecordBytes(x.K, quads))
}

// w8PrepStride is w8Prep with token t's records at t*xs in rec (xs at
// least w8RecordBytes).
func w8PrepStride(rec []byte, x *Q8, quads bool, t0, t1, xs int) bool {
	K, nb := x.K, x.K/QK
	nq := 0
	if quads {
		nq = nb / 8
	}
	q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x.Q))), len(x.Q))
	min128 := false
	for t := t0; t < t1; t++ {
		tr := rec[t*xs : t*xs+w8RecordBytes(K, quads)]
		qt := q[t*K : (t+1)*K]
		if bytes.IndexByte(qt, 0x80) >= 0 {
			min128 = true
		}
		for qd := range nq {
			r := tr[qd*w8QuadBytes : (qd+1)*w8QuadBytes]
			src := qt[qd*256 : (qd+1)*256]
			for d := range 4 {
				for L := range 4 {
					for j := range 4 {
						o := 64*d + 16*L + 4*j
						*(*[4]byte)(r[o:]) = *(*[4]byte)(src[64*j+16*L+4*d:])
					}
				}
			}
			dv := (*[16]float32)(unsafe.Pointer(&r[256]))
			for L := range 4 {
				for j := range 4 {
					dv[4*L+j] = x.D[t*nb+qd*8+2*j+L/2]
				}
			}
		}
		rest := tr[nq*w8QuadBytes:]
		left := nb - 8*nq
		for b := range (left + 1) / 2 * 2 {
			g, j := b/2, b%2
			r := rest[g*w8RecBytes : (g+1)*w8RecBytes]
			qr := r[32*j : 32*j+32]
			dv := (*[8]float32)(unsafe.Pointer(&r[64+32*j]))
			if b >= left {
				*(*[32]byte)(qr) = [32]byte{}
				*dv = [8]float32{}
				continue
			}
			bb := 8*nq + b
			*(*[32]byte)(qr) = *(*[32]byte)(qt[bb*QK:]) // one array move, not a memmove call
			d := x.D[t*nb+bb]
			for i := range 8 {
				dv[i] = d
			}
		}
		var c float32
		for b := range nb {
			c += -128 * float32(x.Sum[t*nb+b]) * x.D[t*nb+b]
		}
		*(*float32)(unsafe.Pointer(&rest[(left+1)/2*w8RecBytes])) = c
	}
	return min128
}

// w8Fits reports whether the slices hold what rows [n0, n1) of x.T
// tokens touch, so that the assembly stays in bounds; when not, the
// generic version runs (and fails as it does).
func w8Fits(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) bool {
	nb := w.K / QK
	if w.K%QK != 0 || nb == 0 || n0 < 0 || n1 > w.N || x.K != w.K || x.T < 1 || ldd < n1 {
		return false
	}
	return len(w.U) >= n1*w.K && len(w.Scales) >= n1 && len(x.Q) >= x.T*w.K &&
		len(x.D) >= x.T*nb && len(x.Sum) >= x.T*nb && len(dst) >= (x.T-1)*ldd+n1
}

// w8MatMulWith runs W8.MatMul on set's kernels: one token in row tiles
// of set.decode, several in tiles of set.rows by set.tokens, token blocks
// of about w8RecCache bytes of records at a time.
func w8MatMulWith(set *w8Set, dst []float32, ldd int, w *W8, x *Q8, n0, n1 int) {
	if n1 <= n0 || x.T == 0 {
		return
	}
	if !w8Fits(dst, ldd, w, x, n0, n1) {
		w8MatMulGeneric(dst, ldd, w, x, n0, n1)
		return
	}
	K, nb := w.K, w.K/QK
	ng, tail := nb/2, nb%2
	xs := set.layout.tokenBytes(K)
	rec, min128 := x.recs.w8, x.recs.w8Min128.Load()
	if !x.recs.useW8 || x.recs.w8Layout != set.layout {
		var holder *[]byte
		rec, holder = getScratch(x.T * xs)
		defer scratch.Put(holder)
		min128 = set.prep(rec, x, 0, x.T)
	}
	if min128 && set.signed {
		w8MatMulGeneric(dst, ldd, w, x, n0, n1)
		return
	}
	if set.lanes && x.T >= q4LanesMinT {
		w8LanesMatMul(dst, ldd, w, x, rec, xs, n0, n1)
		return
	}
	u := unsafe.SliceData(w.U)
	rs := unsafe.SliceData(w.Scales)
	out := unsafe.SliceData(dst)
	tile := func(n, R, t, TT int) {
		set.k[R][TT]((*byte)(unsafe.Add(unsafe.Pointer(u), n*K)), K, ng, tail,
			&rec[t*xs], xs, (*float32)(unsafe.Add(unsafe.Pointer(out), 4*(t*ldd+n))), ldd,
			(*float32)(unsafe.Add(unsafe.Pointer(rs), 4*n)))
	}
	rowsFor := func(rem, most int) int {
		for R := min(rem, most); R > 0; R-- {
			if set.k[R][1] != nil {
				return R
			}
		}
		return 1
	}
	decode := set.decode
	if set.seq != nil && decodeWalk.Load() == walkTiles4 {
		decode = 4
	}
	if x.T == 1 && set.seq != nil && decode == 1 && n1-n0 >= 4 {
		// Whole quads of rows in one call, the rest below.
		whole := (n1 - n0) &^ 3
		walk := decodeWalk.Load()
		seq, res := set.seq, set.resident
		if prefetchWalk(walk) && set.seqPf != nil {
			seq, res = set.seqPf, set.residentPf
		}
		if q := min(ng/4, len(res)-1); q > 0 && residentWalk(walk) {
			seq = res[q]
		}
		seq((*byte)(unsafe.Add(unsafe.Pointer(u), n0*K)), K, ng, tail, &rec[0], whole,
			(*float32)(unsafe.Add(unsafe.Pointer(out), 4*n0)), (*float32)(unsafe.Add(unsafe.Pointer(rs), 4*n0)))
		n0 += whole
	}
	if x.T > 1 && x.T <= w8FewMaxT && set.k[1][x.T] != nil {
		// A few tokens: one row at a time against all of them (as
		// q4MatMulZerosWith).
		for n := n0; n < n1; n++ {
			tile(n, 1, 0, x.T)
		}
		return
	}
	if x.T == 1 {
		for n := n0; n < n1; {
			R := rowsFor(n1-n, decode)
			tile(n, R, 0, 1)
			n += R
		}
		return
	}
	tb := max(set.tokens, min(64, w8RecCache/xs))
	for t0 := 0; t0 < x.T; t0 += tb {
		t1 := min(t0+tb, x.T)
		for n := n0; n < n1; {
			R := rowsFor(n1-n, set.rows)
			for t := t0; t < t1; {
				TT := min(t1-t, set.tokens)
				tile(n, R, t, TT)
				t += TT
			}
			n += R
		}
	}
}
