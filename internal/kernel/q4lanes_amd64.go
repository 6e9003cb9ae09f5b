//go:build !purego

package kernel

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// q4LanesKern is the signature of the AVX-512 LPBQ prefill tiles in row
// lanes (_gen/q4lanes.go): 16 rows of a repacked tile w by TT tokens of
// lane records x (token stride xs bytes), full and parts entries a lane,
// a scratch of TT*256 floats, and the first rows rows of the tile stored
// to dst (ldd floats a token) times their row scales rs.
type q4LanesKern func(w *byte, x *byte, xs int, full int, parts int, a *float32, dst *float32, ldd int, rs *float32, rows int)

// q4VnniLanes is the AVX-512 row-lane tiles by tokens (1..12).
var q4VnniLanes = [...]q4LanesKern{nil,
	q4VnniLanes1, q4VnniLanes2, q4VnniLanes3, q4VnniLanes4, q4VnniLanes5, q4VnniLanes6,
	q4VnniLanes7, q4VnniLanes8, q4VnniLanes9, q4VnniLanes10, q4VnniLanes11, q4VnniLanes12}

// The row-lane tiles' sizes (_gen/q4lanes.go).
const (
	q4LanesRows         = 16     // rows of a tile, one a lane
	q4LanesMaxTT        = 12     // tokens of the largest tile
	q4LanesFullBytes    = 9 * 64 // a full entry: 8 vectors of values, the codes
	q4LanesPartBytes    = 3 * 64 // a partial entry: 2 vectors, the codes
	q4LanesFullRecBytes = 40     // a token's full entry: 32 values, -8*Sum, D
	q4LanesPartRecBytes = 16     // a token's partial entry: 8 values, -2*Sum, D
)

// q4LanesMinT is the fewest tokens a product takes in row lanes: the
// repacking of each tile of 16 rows is then spread over enough tokens.
// Fewer tokens run on the chunk tiles (the same bits either way).
var q4LanesMinT = 16

// q4LanesShape returns, for K inputs, the full entries a lane (whole
// chunks of 16 blocks) and the partial ones (groups of 4 blocks of the
// last, partial chunk).
func q4LanesShape(K int) (full, parts int) {
	nb := K / QK
	return nb / 16, (nb%16 + 3) / 4
}

// q4LanesTokenBytes is the size of one token's lane records for K.
func q4LanesTokenBytes(K int) int {
	full, parts := q4LanesShape(K)
	return 16 * (full*q4LanesFullRecBytes + parts*q4LanesPartRecBytes)
}

// q4LanesTileBytes is the size of one repacked tile of 16 rows for K.
func q4LanesTileBytes(K int) int {
	full, parts := q4LanesShape(K)
	return 16 * (full*q4LanesFullBytes + parts*q4LanesPartBytes)
}

// q4LanesBlock is the block of lane l's entry e (e < full: chunk e; else
// group e-full of the last chunk) and, for a partial entry, its dword i.
func q4LanesBlock(l, e, full int) (b, i int) {
	if e < full {
		return 16*e + 4*(l%4) + l/4, 0
	}
	return 16*full + 4*(e-full) + l/4, l % 4
}

// q4VnniRecords is the AVX-512 layout of activation records: each token's
// chunk records (q4Prep), then, for products of at least q4LanesMinT
// tokens, its lane records.
var q4VnniRecords = &actLayout{
	tokenBytes: q4VnniTokenBytes,
	fill: func(rec []byte, x *Q8, t0, t1 int) {
		stride := q4VnniTokenBytes(x.K)
		q4PrepStride(rec, x, t0, t1, stride)
		if x.T >= q4LanesMinT {
			q4LanesPrep(rec, x, t0, t1, stride)
		}
	},
}

// q4VnniTokenBytes is one token's AVX-512 records: chunk and lane records.
func q4VnniTokenBytes(K int) int { return q4TokenBytes(K) + q4LanesTokenBytes(K) }

// q4LanesPrep writes the lane records of tokens [t0, t1) of x, each at
// q4TokenBytes(K) into its stride bytes of rec.
func q4LanesPrep(rec []byte, x *Q8, t0, t1, stride int) {
	K, nb := x.K, x.K/QK
	full, parts := q4LanesShape(K)
	q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x.Q))), len(x.Q))
	off0 := q4TokenBytes(K)
	for t := t0; t < t1; t++ {
		r := rec[t*stride+off0 : (t+1)*stride]
		qt := q[t*K : (t+1)*K]
		d, sum := x.D[t*nb:(t+1)*nb], x.Sum[t*nb:(t+1)*nb]
		o := 0
		for l := range 16 {
			for e := range full {
				b, _ := q4LanesBlock(l, e, full)
				*(*[32]byte)(r[o:]) = *(*[32]byte)(qt[b*QK:])
				binary.LittleEndian.PutUint32(r[o+32:], uint32(-8*sum[b]))
				binary.LittleEndian.PutUint32(r[o+36:], math.Float32bits(d[b]))
				o += q4LanesFullRecBytes
			}
			for e := full; e < full+parts; e++ {
				b, i := q4LanesBlock(l, e, full)
				if b >= nb {
					*(*[16]byte)(r[o:]) = [16]byte{}
				} else {
					*(*[4]byte)(r[o:]) = *(*[4]byte)(qt[b*QK+4*i:])
					*(*[4]byte)(r[o+4:]) = *(*[4]byte)(qt[b*QK+16+4*i:])
					binary.LittleEndian.PutUint32(r[o+8:], uint32(-2*sum[b]))
					binary.LittleEndian.PutUint32(r[o+12:], math.Float32bits(d[b]))
				}
				o += q4LanesPartRecBytes
			}
		}
	}
}

// q4LanesRepack lays out rows [n, n+rows) of the LPBQ weight w (rows <=
// 16; the lanes past them are zeros) as a row-lane tile in buf
// (q4LanesTileBytes).
func q4LanesRepack(buf []byte, w *Q4, n, rows int) {
	nb := w.K / QK
	full, parts := q4LanesShape(w.K)
	lstr := full*q4LanesFullBytes + parts*q4LanesPartBytes
	if rows == q4LanesRows {
		// all but the partial entries' codes in assembly
		q4VnniLanesRepack(&w.Nib[n*nb*16], nb*16, &w.Codes[n*nb], nb, full, parts, &buf[0], lstr)
		codes := w.Codes[n*nb : (n+q4LanesRows)*nb]
		for g := range parts {
			for k := range 4 {
				var c [16]int32
				if b := 16*full + 4*g + k; b < nb {
					for r := range c {
						c[r] = int32(codes[r*nb+b])
					}
				}
				for i := range 4 {
					*(*[16]int32)(unsafe.Pointer(&buf[(4*k+i)*lstr+full*q4LanesFullBytes+g*q4LanesPartBytes+128])) = c
				}
			}
		}
		return
	}
	for l := range 16 {
		o := l * lstr
		for e := range full + parts {
			b, i := q4LanesBlock(l, e, full)
			size, vecs := q4LanesFullBytes, 8
			if e >= full {
				size, vecs = q4LanesPartBytes, 2
			}
			ent := buf[o : o+size]
			o += size
			for r := range 16 {
				if r >= rows || b >= nb {
					for v := range vecs + 1 {
						binary.LittleEndian.PutUint32(ent[64*v+4*r:], 0)
					}
					continue
				}
				blk := ((n+r)*nb + b) * 16
				nib := w.Nib[blk : blk+16]
				if vecs == 8 {
					for j := range 4 {
						dw := binary.LittleEndian.Uint32(nib[4*j:])
						binary.LittleEndian.PutUint32(ent[64*j+4*r:], dw&0x0f0f0f0f)
						binary.LittleEndian.PutUint32(ent[64*(4+j)+4*r:], dw>>4&0x0f0f0f0f)
					}
				} else {
					dw := binary.LittleEndian.Uint32(nib[4*i:])
					binary.LittleEndian.PutUint32(ent[4*r:], dw&0x0f0f0f0f)
					binary.LittleEndian.PutUint32(ent[64+4*r:], dw>>4&0x0f0f0f0f)
				}
				binary.LittleEndian.PutUint32(ent[64*vecs+4*r:], uint32(w.Codes[(n+r)*nb+b]))
			}
		}
	}
}

// q4LanesMatMul runs rows [n0, n1) of the LPBQ weight w for every token
// of x on the row-lane tiles, from the lane records in rec (stride bytes
// a token).
func q4LanesMatMul(kern *[q4LanesMaxTT + 1]q4LanesKern, dst []float32, ldd int, w *Q4, x *Q8, rec []byte, stride, n0, n1 int) {
	full, parts := q4LanesShape(w.K)
	tile := q4LanesTileBytes(w.K)
	buf, holder := getScratch(tile + 4*q4LanesMaxTT*256)
	defer scratch.Put(holder)
	a := (*float32)(unsafe.Pointer(&buf[tile]))
	off0 := q4TokenBytes(w.K)
	// Every token against one repacked tile: the tile is repacked once.
	// The tokens' records are read once per tile, in order, from the L2
	// or L3 cache (K = 8192: 10 KiB a token); blocks of tokens that stay
	// in the L2 cache, each repacking the tile again, ran 8-9% slower on
	// Llama-3.2-1B and Qwen3-0.6B (128 tokens a pass, AMD Zen 4).
	for n := n0; n < n1; n += q4LanesRows {
		rows := min(q4LanesRows, n1-n)
		q4LanesRepack(buf[:tile], w, n, rows)
		if next := n + q4LanesRows; next < n1 {
			// the start of the next tile's weights, and its codes,
			// while this one runs
			nb := w.K / QK
			prefetchStrided(&w.Nib[next*nb*16], 64, min(min(q4LanesRows, n1-next)*nb/4, 128))
			prefetchStrided(&w.Codes[next*nb], 64, (min(q4LanesRows, n1-next)*nb+63)/64)
		}
		for t := 0; t < x.T; {
			TT := min(x.T-t, q4LanesMaxTT)
			kern[TT](&buf[0], &rec[t*stride+off0], stride, full, parts, a,
				&dst[t*ldd+n], ldd, &w.Scales[n], rows)
			t += TT
		}
	}
}
