//go:build !purego

package kernel

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// q4LanesKern is the signature of the AVX-512 prefill tiles in row lanes
// (_gen/q4lanes.go): 16 rows of a repacked tile w by TT tokens of lane
// records x (token stride xs bytes), full and parts entries a lane (left
// blocks in the last, partial chunk), a scratch of TT*256 floats, and the first rows rows of the tile stored to
// dst (ldd floats a token), LPBQ's times their row scales rs.
type q4LanesKern func(w *byte, x *byte, xs int, full int, parts int, left int, a *float32, dst *float32, ldd int, rs *float32, rows int)

// q4LanesRepackKern is the signature of the assembly repacking of a tile
// of 16 whole rows (see q4LanesRepack).
type q4LanesRepackKern func(nib *byte, rstr int, codes *byte, nb int, full int, parts int, dst *byte, lstr int)

// q4LanesSet is one scale form's row-lane tiles by tokens (1..12), the
// repacking of its tiles, and the vectors after an entry's values: the
// codes (LPBQ) or scales of its 16 rows, then with zero points (and K4)
// their zero-point terms.
type q4LanesSet struct {
	k      [q4LanesMaxTT + 1]q4LanesKern
	repack q4LanesRepackKern
	extra  int
}

var (
	q4VnniLanesCodes = q4LanesSet{repack: q4VnniLanesRepackCodes, extra: 1, k: [...]q4LanesKern{nil,
		q4VnniLanesCodes1, q4VnniLanesCodes2, q4VnniLanesCodes3, q4VnniLanesCodes4, q4VnniLanesCodes5, q4VnniLanesCodes6,
		q4VnniLanesCodes7, q4VnniLanesCodes8, q4VnniLanesCodes9, q4VnniLanesCodes10, q4VnniLanesCodes11, q4VnniLanesCodes12}}
	q4VnniLanesScales = q4LanesSet{repack: q4VnniLanesRepackScales, extra: 1, k: [...]q4LanesKern{nil,
		q4VnniLanesScales1, q4VnniLanesScales2, q4VnniLanesScales3, q4VnniLanesScales4, q4VnniLanesScales5, q4VnniLanesScales6,
		q4VnniLanesScales7, q4VnniLanesScales8, q4VnniLanesScales9, q4VnniLanesScales10, q4VnniLanesScales11, q4VnniLanesScales12}}
	q4VnniLanesZeros = q4LanesSet{repack: q4VnniLanesRepackZeros, extra: 2, k: [...]q4LanesKern{nil,
		q4VnniLanesZeros1, q4VnniLanesZeros2, q4VnniLanesZeros3, q4VnniLanesZeros4, q4VnniLanesZeros5, q4VnniLanesZeros6,
		q4VnniLanesZeros7, q4VnniLanesZeros8, q4VnniLanesZeros9, q4VnniLanesZeros10, q4VnniLanesZeros11, q4VnniLanesZeros12}}
	q4VnniLanesK4 = q4LanesSet{repack: q4VnniLanesRepackK4, extra: 2, k: [...]q4LanesKern{nil,
		q4VnniLanesK41, q4VnniLanesK42, q4VnniLanesK43, q4VnniLanesK44, q4VnniLanesK45, q4VnniLanesK46,
		q4VnniLanesK47, q4VnniLanesK48, q4VnniLanesK49, q4VnniLanesK410, q4VnniLanesK411, q4VnniLanesK412}}
)

// entryBytes is the size of a full and of a partial entry of a tile.
func (ls *q4LanesSet) entryBytes() (full, part int) { return (8 + ls.extra) * 64, (2 + ls.extra) * 64 }

// tileBytes is the size of one repacked tile of 16 rows for K.
func (ls *q4LanesSet) tileBytes(K int) int {
	full, parts := q4LanesShape(K)
	fb, pb := ls.entryBytes()
	return 16 * (full*fb + parts*pb)
}

// The row-lane tiles' sizes (_gen/q4lanes.go).
const (
	q4LanesRows         = 16 // rows of a tile, one a lane
	q4LanesMaxTT        = 12 // tokens of the largest tile
	q4LanesFullRecBytes = 40 // a token's full entry: 32 values, -8*Sum, D
	q4LanesPartRecBytes = 16 // a token's partial entry: 8 values, -2*Sum, D
)

// q4LanesMinT is the fewest tokens a product takes in row lanes (4-bit
// and 8-bit): the repacking of each tile of 16 rows is then spread over
// enough tokens. Fewer tokens run on the chunk tiles (the same bits
// either way). BenchmarkQ4LanesCrossover on the AMD EPYC (Zen 4): at 8
// tokens the row lanes are 17% slower to 1% faster than the chunk tiles,
// at 12 tokens 2-10% faster, at 16 16-24% faster.
var q4LanesMinT = 12

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

// q4LanesBlock is the block of lane l's entry e (e < full: chunk e; else
// group e-full of the last chunk) and, for a partial entry, its dword i.
func q4LanesBlock(l, e, full int) (b, i int) {
	if e < full {
		return 16*e + 4*(l%4) + l/4, 0
	}
	return 16*full + 4*(e-full) + l/4, l % 4
}

// q4VnniRecords is the AVX-512 layout of activation records: each token's
// lane records for products of q4LanesMinT tokens or more (every 4-bit
// form has row-lane tiles), its chunk records (q4Prep) for fewer; a
// token's stride holds either.
var q4VnniRecords = &actLayout{
	tokenBytes: q4VnniTokenBytes,
	fill: func(rec []byte, x *Q8, t0, t1 int) {
		stride := q4VnniTokenBytes(x.K)
		if x.T >= q4LanesMinT {
			q4LanesPrep(rec, x, t0, t1, stride)
			return
		}
		q4PrepStride(rec, x, t0, t1, stride)
	},
}

// q4VnniTokenBytes is the stride of one token's AVX-512 records: its
// chunk or its lane records.
func q4VnniTokenBytes(K int) int { return max(q4TokenBytes(K), q4LanesTokenBytes(K)) }

// q4LanesPrep writes the lane records of tokens [t0, t1) of x, each at
// the start of its stride bytes of rec.
func q4LanesPrep(rec []byte, x *Q8, t0, t1, stride int) {
	K, nb := x.K, x.K/QK
	full, parts := q4LanesShape(K)
	q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x.Q))), len(x.Q))
	for t := t0; t < t1; t++ {
		r := rec[t*stride : (t+1)*stride]
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

// q4LanesRepack lays out rows [n, n+rows) of w (rows <= 16; the lanes
// past them are zeros) as a row-lane tile of ls in buf (ls.tileBytes):
// for each lane l, its full entries (one a chunk: 8 vectors of the
// values 4v..4v+3 of its block of the 16 rows, as bytes), then its
// partial entries (one a group of the last chunk: the 2 vectors of its
// dword), each followed by the rows' codes or scales of the block (and
// zero-point terms, zs for the zeros form). Tiles of 16 rows take their
// values (and LPBQ the codes of the full entries) from assembly.
func q4LanesRepack(ls *q4LanesSet, buf []byte, w *Q4, zs []float32, n, rows int) {
	nb := w.K / QK
	full, parts := q4LanesShape(w.K)
	fb, pb := ls.entryBytes()
	lstr := full*fb + parts*pb
	entry := func(l, e int) []byte {
		if e < full {
			return buf[l*lstr+e*fb : l*lstr+(e+1)*fb]
		}
		return buf[l*lstr+full*fb+(e-full)*pb : l*lstr+full*fb+(e-full+1)*pb]
	}
	e0 := 0 // the first entry whose codes or scales are set here
	if rows == q4LanesRows {
		var codes *byte
		if w.Codes != nil {
			codes, e0 = &w.Codes[n*nb], full
		}
		ls.repack(&w.Nib[n*nb*16], nb*16, codes, nb, full, parts, &buf[0], lstr)
	} else {
		for l := range 16 {
			for e := range full + parts {
				b, i := q4LanesBlock(l, e, full)
				ent := entry(l, e)
				for r := range 16 {
					var dw [4]uint32
					if r < rows && b < nb {
						blk := ((n+r)*nb + b) * 16
						for j := range dw {
							dw[j] = binary.LittleEndian.Uint32(w.Nib[blk+4*j:])
						}
					}
					if e < full {
						for j := range 4 {
							binary.LittleEndian.PutUint32(ent[64*j+4*r:], dw[j]&0x0f0f0f0f)
							binary.LittleEndian.PutUint32(ent[64*(4+j)+4*r:], dw[j]>>4&0x0f0f0f0f)
						}
					} else {
						binary.LittleEndian.PutUint32(ent[4*r:], dw[i]&0x0f0f0f0f)
						binary.LittleEndian.PutUint32(ent[64+4*r:], dw[i]>>4&0x0f0f0f0f)
					}
				}
			}
		}
	}
	// the codes or scales (and zero-point terms) row by row, each
	// block's to its entries: block 16c+j of a whole chunk to lane
	// 4(j%4)+j/4's entry c, one of the last chunk to its group's entry
	// in the 4 lanes 4(j%4)+i
	base := unsafe.Pointer(&buf[0])
	zOff := 64 // the zero-point terms after the codes or scales
	if ls.extra == 1 {
		zOff = 0 // (written, then the codes or scales over them)
	}
	put := func(b, r int, v, z uint32) {
		c, j := b>>4, b&15
		if c < full {
			o := (4*(j&3)+j>>2)*lstr + 512 + c*fb + 4*r
			*(*uint32)(unsafe.Add(base, o+zOff)) = z
			*(*uint32)(unsafe.Add(base, o)) = v
			return
		}
		o := 4*(j&3)*lstr + full*fb + (j>>2)*pb + 128 + 4*r
		for range 4 {
			*(*uint32)(unsafe.Add(base, o+zOff)) = z
			*(*uint32)(unsafe.Add(base, o)) = v
			o += lstr
		}
	}
	b0 := 16 * e0 // blocks before are set
	for r := range 16 {
		// zeros for the rows past the tile's and the blocks past the last
		for b := b0; b < 16*full+4*parts; b++ {
			if r >= rows || b >= nb {
				put(b, r, 0, 0)
			}
		}
	}
	nc := q4KChunks(w.K)
	for r := range rows {
		row := n + r
		switch {
		case w.Codes != nil:
			codes := w.Codes[row*nb : (row+1)*nb]
			for b := b0; b < nb; b++ {
				put(b, r, uint32(codes[b]), 0)
			}
		case w.K4 != nil:
			for c := range nc {
				rec := (*[Q4KChunkBytes]byte)(w.K4[(row*nc+c)*Q4KChunkBytes:])
				for h := 0; h < 16 && 16*c+h < nb; h += 8 {
					d := math.Float32frombits(binary.LittleEndian.Uint32(rec[32+h:]))
					dmin := math.Float32frombits(binary.LittleEndian.Uint32(rec[36+h:]))
					for j := h; j < h+8; j++ {
						// as k4Block; m/8 exact, as the kernels scale dmin
						sc, m := float32(d*float32(rec[j])), float32(dmin*float32(rec[16+j]))
						put(16*c+j, r, math.Float32bits(sc), math.Float32bits(m*0.125))
					}
				}
			}
		default:
			sc := w.Scales[row*nb : (row+1)*nb]
			for b := range nb {
				var z float32
				if zs != nil {
					z = zs[row*nb+b]
				}
				put(b, r, math.Float32bits(sc[b]), math.Float32bits(z))
			}
		}
	}
}

// q4LanesMatMul runs rows [n0, n1) of w for every token of x on the
// row-lane tiles of ls, from the lane records in rec (stride bytes a
// token); zs are the zero-point terms of the zeros form.
func q4LanesMatMul(ls *q4LanesSet, dst []float32, ldd int, w *Q4, zs []float32, x *Q8, rec []byte, stride, n0, n1 int) {
	full, parts := q4LanesShape(w.K)
	nb := w.K / QK
	tile := ls.tileBytes(w.K)
	buf, holder := getScratch(tile + 4*q4LanesMaxTT*256)
	defer scratch.Put(holder)
	a := (*float32)(unsafe.Pointer(&buf[tile]))
	// Every token against one repacked tile: the tile is repacked once.
	// The tokens' records are read once per tile, in order, from the L2
	// or L3 cache (K = 8192: 10 KiB a token); blocks of tokens that stay
	// in the L2 cache, each repacking the tile again, ran 8-9% slower on
	// Llama-3.2-1B and Qwen3-0.6B (128 tokens a pass, AMD Zen 4).
	for n := n0; n < n1; n += q4LanesRows {
		rows := min(q4LanesRows, n1-n)
		q4LanesRepack(ls, buf[:tile], w, zs, n, rows)
		if next := n + q4LanesRows; next < n1 {
			// the start of the next tile's weights while this one runs
			// (at least one line: prefetchStrided takes n >= 1)
			lines := (min(q4LanesRows, n1-next)*nb*16 + 63) / 64
			prefetchStrided(&w.Nib[next*nb*16], 64, min(lines, 128))
			if w.Codes != nil {
				prefetchStrided(&w.Codes[next*nb], 64, (min(q4LanesRows, n1-next)*nb+63)/64)
			}
		}
		var rs *float32
		if w.Codes != nil {
			rs = &w.Scales[n]
		}
		for t := 0; t < x.T; {
			TT := min(x.T-t, q4LanesMaxTT)
			ls.k[TT](&buf[0], &rec[t*stride], stride, full, parts, nb%16, a,
				&dst[t*ldd+n], ldd, rs, rows)
			t += TT
		}
	}
}
