//go:build !purego

package kernel

import (
	"sync"
	"unsafe"
)

//go:generate go run -C _gen . -out ../kernel_amd64.s -stubs ../kernel_stub_amd64.go -pkg kernel

// q4Kern is the signature of the generated 4-bit tile kernels: rows
// [n, n+R) by tokens [t, t+TT) over all of K, against prepared
// activations (q4Prep). nib and sc address row n's codes and block
// scales (row strides rstr and scstr bytes), ng and tail are the number
// of whole 4-block groups and the blocks left over, x the first token's
// records (token stride xs bytes), dst the output of (t, n) with ldd
// floats per token, rs the row scales of the code form.
type q4Kern func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32)

// q4FewKern is the signature of the generated row loops of a few
// tokens: n consecutive rows from the row nib and sc address, for the
// tokens of x (as q4Kern), one row after another against all of them.
type q4FewKern func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32, n int)

// q4RowsKern is the signature of the generated decode kernels:
// n consecutive rows from row n0 (nib, sc and rs address it, as in
// q4Kern) for one token, walked one row after another.
type q4RowsKern func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)

// q4Set is one ISA's generated kernels for one scale form, by tile shape.
//
// For one token (decode, bound by memory bandwidth) the kernels walk one
// row at a time, so each worker reads a single sequential
// stream of weights: on Qwen3-0.6B's classifier shape that streams
// 30-32 GB/s on one thread and 46-52 GB/s on two (the machine's read
// bandwidth), where 8-row tiles, which read 8 rows side by side, reached
// 26 and 31 (BenchmarkQ4MatMulT1, docs/lab/benchmarks-2026.md). They do so in one
// call per range of rows (seq): called once per row, the call, its
// arguments and the tail masks cost as much as a 576-wide row's
// arithmetic, and the store of each row's sum, right before the next
// row's loads, stalled them (4 KiB aliasing with the activation records),
// so seq sums four rows at once and stores them together. The AVX2 kernels
// did not walk so at first (bound by their arithmetic from cache, they kept
// 5-row tiles), but streamed from memory those read 6.6-10 GB/s where the
// row walk reads 14-20 on the same AMD EPYC (BenchmarkQ4MatMulT1).
type q4Set struct {
	lanes *q4LanesSet  // tiles in row lanes for q4LanesMinT tokens or more, or nil
	k     [9][5]q4Kern // [R][TT], nil where not generated
	seq   q4RowsKern   // one token over many rows in one call, or nil
	seqPf q4RowsKern   // seq asking for its weights ahead (_gen/prefetch.go), or nil
	// resident[C][G] is seq for rows of C whole chunks of 16 blocks and
	// G groups of a last, partial chunk, with the token's activations
	// held in registers (_gen/q4resident.go), or nil.
	resident *[3][5]q4RowsKern
	// residentPf is resident asking for its weights ahead, or nil.
	residentPf *[3][5]q4RowsKern
	// few[T] is the row loop of T tokens (2..8, q4FewMaxT), or nil.
	few    *[9]q4FewKern
	decode int // rows per tile for one token
	rows   int // rows per tile for several tokens
	tokens int // largest TT
}

var (
	q4VnniCodes = q4Set{few: &q4VnniCodesFew, lanes: &q4VnniLanesCodes, seq: q4VnniCodesRows, seqPf: q4VnniCodesRowsPf, resident: &q4VnniCodesResident, residentPf: &q4VnniCodesResidentPf, decode: 1, rows: 4, tokens: 3, k: [9][5]q4Kern{
		1: {1: q4VnniCodes1x1, 2: q4VnniCodes1x2, 3: q4VnniCodes1x3},
		2: {1: q4VnniCodes2x1, 2: q4VnniCodes2x2, 3: q4VnniCodes2x3},
		4: {1: q4VnniCodes4x1, 2: q4VnniCodes4x2, 3: q4VnniCodes4x3},
	}}
	q4VnniScales = q4Set{lanes: &q4VnniLanesScales, seq: q4VnniScalesRows, seqPf: q4VnniScalesRowsPf, resident: &q4VnniScalesResident, residentPf: &q4VnniScalesResidentPf, decode: 1, rows: 4, tokens: 3, k: [9][5]q4Kern{
		1: {1: q4VnniScales1x1, 2: q4VnniScales1x2, 3: q4VnniScales1x3},
		2: {1: q4VnniScales2x1, 2: q4VnniScales2x2, 3: q4VnniScales2x3},
		4: {1: q4VnniScales4x1, 2: q4VnniScales4x2, 3: q4VnniScales4x3},
	}}
	// q4VnniZeros is the per-block-scale form with zero points: the rs
	// argument carries the weight's zero-point terms (Q4.zs), shaped as
	// its block scales.
	q4VnniZeros = q4Set{lanes: &q4VnniLanesZeros, seq: q4VnniZerosRows, seqPf: q4VnniZerosRowsPf, resident: &q4VnniZerosResident, residentPf: &q4VnniZerosResidentPf, decode: 1, rows: 4, tokens: 3, k: [9][5]q4Kern{
		1: {1: q4VnniZeros1x1, 2: q4VnniZeros1x2, 3: q4VnniZeros1x3},
		2: {1: q4VnniZeros2x1, 2: q4VnniZeros2x2, 3: q4VnniZeros2x3},
		4: {1: q4VnniZeros4x1, 2: q4VnniZeros4x2, 3: q4VnniZeros4x3},
	}}
	// q4VnniK4 is the K4 form (Q4_K super-blocks): sc addresses a row's
	// 48-byte chunk records.
	q4VnniK4 = q4Set{few: &q4VnniK4Few, lanes: &q4VnniLanesK4, seq: q4VnniK4Rows, seqPf: q4VnniK4RowsPf, resident: &q4VnniK4Resident, residentPf: &q4VnniK4ResidentPf, decode: 1, rows: 4, tokens: 3, k: [9][5]q4Kern{
		1: {1: q4VnniK41x1, 2: q4VnniK41x2, 3: q4VnniK41x3},
		2: {1: q4VnniK42x1, 2: q4VnniK42x2, 3: q4VnniK42x3},
		4: {1: q4VnniK44x1, 2: q4VnniK44x2, 3: q4VnniK44x3},
	}}
	q4Avx2K4 = q4Set{seq: q4Avx2K4Rows, seqPf: q4Avx2K4RowsPf, decode: 1, rows: 2, tokens: 3, k: [9][5]q4Kern{
		1: {1: q4Avx2K41x1, 2: q4Avx2K41x2, 3: q4Avx2K41x3},
		2: {1: q4Avx2K42x1, 2: q4Avx2K42x2, 3: q4Avx2K42x3},
		4: {1: q4Avx2K44x1, 2: q4Avx2K44x2},
	}}
	q4Avx2Codes = q4Set{seq: q4Avx2CodesRows, seqPf: q4Avx2CodesRowsPf, decode: 1, rows: 2, tokens: 3, k: [9][5]q4Kern{
		1: {1: q4Avx2Codes1x1, 2: q4Avx2Codes1x2, 3: q4Avx2Codes1x3},
		2: {1: q4Avx2Codes2x1, 2: q4Avx2Codes2x2, 3: q4Avx2Codes2x3},
		4: {1: q4Avx2Codes4x1, 2: q4Avx2Codes4x2},
	}}
	q4Avx2Scales = q4Set{seq: q4Avx2ScalesRows, seqPf: q4Avx2ScalesRowsPf, decode: 1, rows: 2, tokens: 3, k: [9][5]q4Kern{
		1: {1: q4Avx2Scales1x1, 2: q4Avx2Scales1x2, 3: q4Avx2Scales1x3},
		2: {1: q4Avx2Scales2x1, 2: q4Avx2Scales2x2, 3: q4Avx2Scales2x3},
		4: {1: q4Avx2Scales4x1, 2: q4Avx2Scales4x2},
	}}
)

// q4VnniCodesFew and q4VnniK4Few are the row loops of a few tokens by
// token count.
var (
	q4VnniCodesFew = [9]q4FewKern{2: q4VnniCodesFew2, 3: q4VnniCodesFew3, 4: q4VnniCodesFew4, 5: q4VnniCodesFew5, 6: q4VnniCodesFew6, 7: q4VnniCodesFew7, 8: q4VnniCodesFew8}
	q4VnniK4Few    = [9]q4FewKern{2: q4VnniK4Few2, 3: q4VnniK4Few3, 4: q4VnniK4Few4, 5: q4VnniK4Few5, 6: q4VnniK4Few6, 7: q4VnniK4Few7, 8: q4VnniK4Few8}
)

// q4VnniCodesResident are q4VnniCodes's resident row loops by [C][G].
var q4VnniCodesResident = [3][5]q4RowsKern{
	1: {0: q4VnniCodesRowsC1G0, 1: q4VnniCodesRowsC1G1, 2: q4VnniCodesRowsC1G2, 3: q4VnniCodesRowsC1G3, 4: q4VnniCodesRowsC1G4},
	2: {0: q4VnniCodesRowsC2G0},
}

// q4VnniCodesResidentPf are the prefetching forms of q4VnniCodes's resident row loops by [C][G].
var q4VnniCodesResidentPf = [3][5]q4RowsKern{
	1: {0: q4VnniCodesRowsC1G0Pf, 1: q4VnniCodesRowsC1G1Pf, 2: q4VnniCodesRowsC1G2Pf, 3: q4VnniCodesRowsC1G3Pf, 4: q4VnniCodesRowsC1G4Pf},
	2: {0: q4VnniCodesRowsC2G0Pf},
}

// q4VnniScalesResident are q4VnniScales's resident row loops by [C][G].
var q4VnniScalesResident = [3][5]q4RowsKern{
	1: {0: q4VnniScalesRowsC1G0, 1: q4VnniScalesRowsC1G1, 2: q4VnniScalesRowsC1G2, 3: q4VnniScalesRowsC1G3, 4: q4VnniScalesRowsC1G4},
	2: {0: q4VnniScalesRowsC2G0},
}

// q4VnniScalesResidentPf are the prefetching forms of q4VnniScales's resident row loops by [C][G].
var q4VnniScalesResidentPf = [3][5]q4RowsKern{
	1: {0: q4VnniScalesRowsC1G0Pf, 1: q4VnniScalesRowsC1G1Pf, 2: q4VnniScalesRowsC1G2Pf, 3: q4VnniScalesRowsC1G3Pf, 4: q4VnniScalesRowsC1G4Pf},
	2: {0: q4VnniScalesRowsC2G0Pf},
}

// q4VnniZerosResident are q4VnniZeros's resident row loops by [C][G].
var q4VnniZerosResident = [3][5]q4RowsKern{
	1: {0: q4VnniZerosRowsC1G0, 1: q4VnniZerosRowsC1G1, 2: q4VnniZerosRowsC1G2, 3: q4VnniZerosRowsC1G3, 4: q4VnniZerosRowsC1G4},
	2: {0: q4VnniZerosRowsC2G0},
}

// q4VnniZerosResidentPf are the prefetching forms of q4VnniZeros's resident row loops by [C][G].
var q4VnniZerosResidentPf = [3][5]q4RowsKern{
	1: {0: q4VnniZerosRowsC1G0Pf, 1: q4VnniZerosRowsC1G1Pf, 2: q4VnniZerosRowsC1G2Pf, 3: q4VnniZerosRowsC1G3Pf, 4: q4VnniZerosRowsC1G4Pf},
	2: {0: q4VnniZerosRowsC2G0Pf},
}

// q4VnniK4Resident are q4VnniK4's resident row loops by [C][G].
var q4VnniK4Resident = [3][5]q4RowsKern{
	1: {0: q4VnniK4RowsC1G0, 2: q4VnniK4RowsC1G2, 4: q4VnniK4RowsC1G4},
	2: {0: q4VnniK4RowsC2G0},
}

// q4VnniK4ResidentPf are the prefetching forms of q4VnniK4's resident row loops by [C][G].
var q4VnniK4ResidentPf = [3][5]q4RowsKern{
	1: {0: q4VnniK4RowsC1G0Pf, 2: q4VnniK4RowsC1G2Pf, 4: q4VnniK4RowsC1G4Pf},
	2: {0: q4VnniK4RowsC2G0Pf},
}

// The forms each ISA's products take as they are.
var (
	q4VnniSets = q4Sets{layout: q4VnniRecords, codes: &q4VnniCodes, scales: &q4VnniScales, zeros: &q4VnniZeros, k4: &q4VnniK4}
	q4Avx2Sets = q4Sets{layout: q4Records, codes: &q4Avx2Codes, scales: &q4Avx2Scales, k4: &q4Avx2K4}
)

// q4RecBytes is the size of one token's prepared record per 4-block
// group: the 4 blocks' first and second halves of Q (64 bytes each),
// then D and -2*Sum of each block repeated over its 4 int32 lanes.
const q4RecBytes = 256

// q4ChunkBytes is the size of a 16-block chunk's records after the
// groups: D and -8*Sum (64 bytes each, read by every chunk kernel), then
// its activations transposed for the AVX-512 prefill tiles: vector v
// (64 bytes) holds at byte 16k+4g+i value 4v+i (v < 4) or 16+4(v-4)+i
// of block 4g+k (_gen/q4chunk.go, transposedTiles).
const q4ChunkBytes = 128 + 512

// q4Groups is the number of groups in a token's records for K inputs:
// whole chunks of 4 groups, the last padded with zero blocks.
func q4Groups(K int) int { return (K/QK + 15) / 16 * 4 }

// q4TokenBytes is the size of one token's records for K inputs: its
// groups, then each chunk's D and -8*Sum of its 16 blocks, block 4g+k
// at int32 lane 4k+g (the lane order of the chunk kernels' sums).
func q4TokenBytes(K int) int {
	g := q4Groups(K)
	return g*q4RecBytes + g/4*q4ChunkBytes
}

// q4FewMaxT is the most tokens multiplied by the one-row tiles of all
// the tokens at once (q4MatMulZerosWith) where a set has them; more go
// in tiles of several rows and at most set.tokens tokens.
var q4FewMaxT = 8

// q4TokenBlock is the number of tokens whose records are walked against
// one range of weight rows before moving on (they stay in L2).
const q4TokenBlock = 64

// scratch holds the prepared activations of a call.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// getScratch returns a 64-byte aligned buffer of n bytes and its holder
// (to give back to scratch).
func getScratch(n int) ([]byte, *[]byte) {
	p := scratch.Get().(*[]byte)
	return alignedGrow(p, n), p
}

// q4Records is the 4-bit products' layout of activation records, shared
// by the AVX2 and AVX-512 kernels.
var q4Records = &actLayout{
	tokenBytes: q4TokenBytes,
	fill:       q4Prep,
}

// q4Prep writes the records of tokens [t0, t1) of x (q4TokenBytes
// each): the groups of 4 blocks (padded with zero blocks), then the
// chunks' D and -8*Sum.
func q4Prep(rec []byte, x *Q8, t0, t1 int) { q4PrepStride(rec, x, t0, t1, q4TokenBytes(x.K)) }

// q4PrepStride is q4Prep with the records of token t at t*xs in rec
// (xs >= q4TokenBytes(K)).
func q4PrepStride(rec []byte, x *Q8, t0, t1, xs int) {
	K, nb := x.K, x.K/QK
	ng4 := q4Groups(K)
	q := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x.Q))), len(x.Q))
	for t := t0; t < t1; t++ {
		tr := rec[t*xs : t*xs+q4TokenBytes(K)]
		qt := q[t*K : (t+1)*K]
		d, sum := x.D[t*nb:(t+1)*nb], x.Sum[t*nb:(t+1)*nb]
		for g := range ng4 {
			r := (*[q4RecBytes]byte)(tr[g*q4RecBytes:])
			for j := range 4 {
				b := 4*g + j
				if b >= nb {
					*(*[16]byte)(r[16*j:]) = [16]byte{}
					*(*[16]byte)(r[64+16*j:]) = [16]byte{}
					*(*[16]byte)(r[128+16*j:]) = [16]byte{}
					*(*[16]byte)(r[192+16*j:]) = [16]byte{}
					continue
				}
				// array moves: 16-byte loads and stores, not memmove calls
				blk := (*[QK]byte)(qt[b*QK:])
				*(*[16]byte)(r[16*j:]) = *(*[16]byte)(blk[:16])
				*(*[16]byte)(r[64+16*j:]) = *(*[16]byte)(blk[16:])
				db, sb := d[b], -2*sum[b]
				*(*[4]float32)(unsafe.Pointer(&r[128+16*j])) = [4]float32{db, db, db, db}
				*(*[4]int32)(unsafe.Pointer(&r[192+16*j])) = [4]int32{sb, sb, sb, sb}
			}
		}
		for c := range ng4 / 4 {
			r := tr[ng4*q4RecBytes+c*q4ChunkBytes:]
			dv := (*[16]float32)(unsafe.Pointer(&r[0]))
			sv := (*[16]int32)(unsafe.Pointer(&r[64]))
			// lane 4k+g holds block 16c+4g+k
			for g := range 4 {
				for k := range 4 {
					l, b := 4*k+g, 16*c+4*g+k
					if b < nb {
						dv[l], sv[l] = d[b], -8*sum[b]
					} else {
						dv[l], sv[l] = 0, 0
					}
				}
			}
			if x.T == 1 {
				continue // one token: no tile of several reads them
			}
			// Vector v takes 4-byte word v of each block's 32 values.
			rw := (*[q4ChunkBytes / 4]uint32)(unsafe.Pointer(&r[0]))
			for g := range 4 {
				for k := range 4 {
					b := 16*c + 4*g + k
					var sw [8]uint32
					if b < nb {
						sw = *(*[8]uint32)(unsafe.Pointer(&qt[b*QK]))
					}
					for v, word := range sw {
						rw[32+16*v+4*k+g] = word
					}
				}
			}
		}
	}
}

// q4Fits reports whether the slices hold what rows [n0, n1) of x.T tokens
// touch, so that the assembly stays in bounds; when not, the generic
// version runs (and fails as it does).
func q4Fits(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) bool {
	nb := w.K / QK
	if w.K%QK != 0 || nb == 0 || n0 < 0 || n1 > w.N || x.K != w.K || x.T < 1 || ldd < n1 {
		return false
	}
	if len(w.Nib) < n1*nb*16 || len(x.Q) < x.T*w.K || len(x.D) < x.T*nb || len(x.Sum) < x.T*nb || len(dst) < (x.T-1)*ldd+n1 {
		return false
	}
	switch {
	case w.K4 != nil:
		return w.K%Q4KSuper == 0 && len(w.K4) >= n1*q4KChunks(w.K)*Q4KChunkBytes
	case w.Codes != nil:
		return len(w.Codes) >= n1*nb && len(w.Scales) >= n1
	}
	return len(w.Scales) >= n1*nb
}

// q4Sets is one ISA's kernels for each form of Q4; a nil set sends its
// form to the generic version.
type q4Sets struct {
	layout *actLayout // the activation records the kernels read
	codes  *q4Set     // LPBQ: block codes times a row scale
	scales *q4Set     // a float32 scale per block
	zeros  *q4Set     // the same with zero-point terms (PrepareZeros)
	k4     *q4Set     // the K4 form (Q4_K super-blocks)
}

// q4MatMulWith runs Q4.MatMul on the kernels of sets; zero points that
// are not prepared go to the generic version.
func q4MatMulWith(sets *q4Sets, dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int) {
	q4MatMulZerosWith(sets, dst, ldd, w, nil, x, n0, n1)
}

// q4MatMulZerosWith is q4MatMulWith, and with zs (the zero-point terms of
// a weight prepared by PrepareZeros, w its symmetric part) on the kernels
// of zeros, which add them block by block; the product is then that of
// the weight with its zero points.
func q4MatMulZerosWith(sets *q4Sets, dst []float32, ldd int, w *Q4, zs []float32, x *Q8, n0, n1 int) {
	if n1 <= n0 || x.T == 0 {
		return
	}
	set := sets.scales
	switch {
	case w.K4 != nil:
		set = sets.k4
	case w.Codes != nil:
		set = sets.codes
	case zs != nil:
		set = sets.zeros
	}
	if set == nil || w.Zeros != nil || !q4Fits(dst, ldd, w, x, n0, n1) || (zs != nil && (w.Codes != nil || w.K4 != nil || len(zs) < n1*(w.K/QK))) {
		q4MatMulGeneric(dst, ldd, w, x, n0, n1)
		return
	}
	nb := w.K / QK
	ng, tail := nb/4, nb%4
	xs := sets.layout.tokenBytes(w.K)
	rec := x.recs.q4
	var holder *[]byte
	if !x.recs.useQ4 || x.recs.q4Layout != sets.layout {
		rec, holder = getScratch(x.T * xs)
		sets.layout.fill(rec, x, 0, x.T)
		defer scratch.Put(holder)
	}
	if set.lanes != nil && x.T >= q4LanesMinT {
		q4LanesMatMul(set.lanes, dst, ldd, w, zs, x, rec, xs, n0, n1)
		return
	}

	var rs *float32 // row n's at rs + n*rsStr
	rsStr := 4
	scBase, scStr := unsafe.Pointer(nil), 0
	switch {
	case w.K4 != nil:
		scBase, scStr = unsafe.Pointer(unsafe.SliceData(w.K4)), q4KChunks(w.K)*Q4KChunkBytes
	case w.Codes != nil:
		scBase, scStr = unsafe.Pointer(unsafe.SliceData(w.Codes)), nb
		rs = unsafe.SliceData(w.Scales)
	default:
		scBase, scStr = unsafe.Pointer(unsafe.SliceData(w.Scales)), 4*nb
		if zs != nil {
			rs, rsStr = unsafe.SliceData(zs), scStr // the zero-point terms, shaped as the scales
		}
	}
	nib := unsafe.SliceData(w.Nib)
	out := unsafe.SliceData(dst)
	tile := func(n, R, t, TT int) {
		var r *float32
		if rs != nil {
			r = (*float32)(unsafe.Add(unsafe.Pointer(rs), n*rsStr))
		}
		set.k[R][TT]((*byte)(unsafe.Add(unsafe.Pointer(nib), n*nb*16)), nb*16,
			(*byte)(unsafe.Add(scBase, n*scStr)), scStr, ng, tail,
			&rec[t*xs], xs, (*float32)(unsafe.Add(unsafe.Pointer(out), 4*(t*ldd+n))), ldd, r)
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
		var r *float32
		if rs != nil {
			r = (*float32)(unsafe.Add(unsafe.Pointer(rs), n0*rsStr))
		}
		whole := (n1 - n0) &^ 3
		walk := decodeWalk.Load()
		seq, res := set.seq, set.resident
		if prefetchWalk(walk) && set.seqPf != nil {
			seq, res = set.seqPf, set.residentPf
		}
		if res != nil && residentWalk(walk) {
			if c, g := nb/16, (nb%16+3)/4; c < len(res) {
				if k := res[c][g]; k != nil {
					seq = k
				}
			}
		}
		seq((*byte)(unsafe.Add(unsafe.Pointer(nib), n0*nb*16)), nb*16,
			(*byte)(unsafe.Add(scBase, n0*scStr)), scStr, ng, tail,
			&rec[0], whole, (*float32)(unsafe.Add(unsafe.Pointer(out), 4*n0)), r)
		n0 += whole
	}
	if x.T > 1 && x.T <= q4FewMaxT && set.few != nil && set.few[x.T] != nil {
		// A few tokens (a verify pass, a few sessions' decode): one row
		// at a time against all of them, in one call, so each row's
		// codes are loaded and unpacked once and the weights stream in
		// one sequence, as for one token.
		var r *float32
		if rs != nil {
			r = (*float32)(unsafe.Add(unsafe.Pointer(rs), n0*rsStr))
		}
		set.few[x.T]((*byte)(unsafe.Add(unsafe.Pointer(nib), n0*nb*16)), nb*16,
			(*byte)(unsafe.Add(scBase, n0*scStr)), scStr, ng, tail,
			&rec[0], xs, (*float32)(unsafe.Add(unsafe.Pointer(out), 4*n0)), ldd, r, n1-n0)
		return
	}
	if x.T > 1 && x.T <= q4FewMaxT && x.T < len(set.k[1]) && set.k[1][x.T] != nil {
		// The other forms: their one-row tiles of 2 or 3 tokens.
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
	} else {
		for t0 := 0; t0 < x.T; t0 += q4TokenBlock {
			t1 := min(t0+q4TokenBlock, x.T)
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
}
