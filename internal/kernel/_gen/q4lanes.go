package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX-512 4-bit prefill tiles in row lanes (q4VnniLanes<form><TT>,
// TT = 1..12, for each scale form): 16 rows by TT tokens, each row in its
// own int32/float32 lane.
//
// The chunk tiles (q4chunk.go) keep a row's blocks in the lanes and
// reload each token's 64-byte activation vectors for every row: on AMD
// Zen 4 that is more than one vector load per VPDPBUSD, and the loads
// bound them (about 30 multiply-adds a cycle). Here the lanes are 16 rows
// and the activations come as 4-byte broadcasts (VPDPBUSD.BCST): a weight
// vector (4 values of one block of 16 rows) is loaded once for TT = 12
// tokens, and each token's 4 activation bytes are one broadcast load.
// That runs at about 50 multiply-adds a cycle.
//
// The weights must then be in that order: kernel.q4LanesRepack lays out
// 16 rows at a time (their codes unpacked to bytes) in the buffer this
// kernel reads, once per row tile for all the tokens of a call; the
// activations are laid out likewise once per call (q4LanesPrep).
//
// Every (row, token) gets the bits of the one-token kernels: those keep,
// per row, 16 float32 lanes l, each summing its blocks over the chunks
// (lane 4k+g: block 4g+k of each chunk of 16), then the last partial
// chunk's groups (lane 4k+i: dword i of block 4g+k, from -2*Sum), and at
// the end add the 16 lanes in hsum's order. Here lane l of the chunk
// kernels is a separate accumulator per token (kept in registers while
// the tile walks lane l's entries, then stored), and the final 15
// additions follow hsum's order across those 16 accumulators.
//
// The tile's buffer, for each lane l: its full entries (one per chunk:
// 8 vectors of the block's values 4v..4v+3 of 16 rows as bytes, then the
// rows' 16 block codes as int32, q4LanesFullBytes), then its partial
// entries (one per group of the last chunk: the 2 vectors of dword i,
// then the codes, q4LanesPartBytes). A token's records follow the same
// order: per full entry the block's 32 values, -8*Sum and D; per partial
// entry the 4 values of dword i and the 4 of dword 4+i, -2*Sum and D.
const (
	q4LanesFullBytes    = 9 * 64
	q4LanesPartBytes    = 3 * 64
	q4LanesFullRecBytes = 40
	q4LanesPartRecBytes = 16
	q4LanesMaxTT        = 12
)

// q4LanesIota is the int32 lanes 0..15.
var q4LanesIota Mem

func genQ4Lanes() {
	q4LanesIota = GLOBL("q4lanesiota", RODATA|NOPTR)
	for l := 0; l < 16; l++ {
		DATA(4*l, U32(uint32(l)))
	}
	for _, form := range []q4Form{formCodes, formScales, formZeros, formK4} {
		q4LanesRepackKernel(form)
		for TT := 1; TT <= q4LanesMaxTT; TT++ {
			q4LanesKernel(form, TT)
		}
	}
}

// q4LanesFormName names a form in the row-lane kernels' names.
func q4LanesFormName(form q4Form) string {
	return [...]string{formCodes: "Codes", formScales: "Scales", formZeros: "Zeros", formK4: "K4"}[form]
}

// q4LanesExtra is the number of vectors after an entry's values: the
// codes (LPBQ, int32) or scales (float32) of its 16 rows, and with zero
// points (and K4) their zero-point terms (float32).
func q4LanesExtra(form q4Form) int {
	if form == formZeros || form == formK4 {
		return 2
	}
	return 1
}

func q4LanesKernel(form q4Form, TT int) {
	name := fmt.Sprintf("q4VnniLanes%s%d", q4LanesFormName(form), TT)
	lpbq, k4 := form == formCodes, form == formK4
	zeros := q4LanesExtra(form) == 2
	fullBytes, partBytes := (8+q4LanesExtra(form))*64, (2+q4LanesExtra(form))*64
	TEXT(name, NOSPLIT, "func(w *byte, x *byte, xs int, full int, parts int, left int, a *float32, dst *float32, ldd int, rs *float32, rows int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes a tile of 16 rows (the first rows of them stored) by %d tokens of a 4-bit product in row lanes, from a repacked tile and lane records (see _gen/q4lanes.go); a holds %d*16*16 floats of scratch.", name, TT, TT))

	lt := newLaneTile(TT)
	s, acc, wp, tok := lt.s, lt.acc, lt.wp, lt.x.at
	cnt := GP64()

	Label("lane")
	lt.startLane()
	advance := lt.advance
	// finish scales the block sums of an entry (its codes or scales at
	// wp+ex, zero-point terms at wp+ex+64) and adds them into acc, as
	// the chunk kernels' finish and lastSum do per lane: the codes in
	// int32 then a conversion, or a conversion then the scales; the
	// zero-point terms times the record's -8*Sum (or -2*Sum) at s8Off;
	// D at dOff.
	finish := func(ex, s8Off, dOff int) {
		sc := ZMM()
		VMOVDQU32(Mem{Base: wp, Disp: ex}, sc)
		var zs VecVirtual
		if zeros {
			zs = ZMM()
			VMOVUPS(Mem{Base: wp, Disp: ex + 64}, zs)
		}
		for t := range TT {
			if lpbq {
				VPMULLD(sc, s[t], s[t])
				VCVTDQ2PS(s[t], s[t])
			} else {
				VCVTDQ2PS(s[t], s[t])
				VMULPS(sc, s[t], s[t])
			}
			if zeros {
				f := ZMM()
				VPBROADCASTD(tok(t, s8Off), f)
				VCVTDQ2PS(f, f)
				VFMADD231PS(zs, f, s[t])
			}
			VFMADD231PS_BCST(tok(t, dOff), s[t], acc[t])
		}
	}
	// start sets the sums of an entry: from the record's -8*Sum (or
	// -2*Sum) at off, the zero point 8's term; K4's codes have none.
	start := func(off int) {
		for t := range TT {
			if k4 {
				VPXORD(s[t], s[t], s[t])
			} else {
				VPBROADCASTD(tok(t, off), s[t])
			}
		}
	}
	// the full entries of this lane
	Load(Param("full"), cnt)
	Label("full")
	TESTQ(cnt, cnt)
	JZ(LabelRef("parts"))
	start(32) // -8*Sum
	for v := range 8 {
		w := ZMM()
		VMOVDQU32(Mem{Base: wp, Disp: 64 * v}, w)
		for t := range TT {
			vpdpbusdBcst(tok(t, 4*v), w, s[t])
		}
	}
	finish(512, 32, 36)
	advance(fullBytes, q4LanesFullRecBytes)
	DECQ(cnt)
	JMP(LabelRef("full"))

	// the partial entries (groups of the last chunk)
	// Lane l = 4k+i takes block 4g+k of the last chunk (left blocks):
	// the groups g with 4g+k < left, (left-k+3)/4 of them; the entries
	// after those (blocks past the row) would add zeros, and are skipped.
	Label("parts")
	skip := GP64()
	Load(Param("left"), cnt)
	MOVQ(U32(16), skip)
	SUBQ(lt.lane, skip) // l
	SHRQ(U8(2), skip)   // k
	SUBQ(skip, cnt)
	ADDQ(U8(3), cnt)
	SARQ(U8(2), cnt) // >= 0: left-k >= -3
	Load(Param("parts"), skip)
	SUBQ(cnt, skip)
	Label("part")
	TESTQ(cnt, cnt)
	JZ(LabelRef("skip"))
	start(8) // -2*Sum
	for v := range 2 {
		w := ZMM()
		VMOVDQU32(Mem{Base: wp, Disp: 64 * v}, w)
		for t := range TT {
			vpdpbusdBcst(tok(t, 4*v), w, s[t])
		}
	}
	finish(128, 8, 12)
	advance(partBytes, q4LanesPartRecBytes)
	DECQ(cnt)
	JMP(LabelRef("part"))
	Label("skip")
	TESTQ(skip, skip)
	JZ(LabelRef("store"))
	advance(partBytes, q4LanesPartRecBytes)
	DECQ(skip)
	JMP(LabelRef("skip"))

	Label("store")
	lt.endLane()

	var rs Mem
	if lpbq {
		rs = Mem{Base: Load(Param("rs"), GP64())}
	}
	lt.sums(rs, nil)
}

// q4LanesRepackKernel emits q4VnniLanesRepack: a row-lane tile of 16
// whole rows (kernel.q4LanesRepack), but for the codes of its partial
// entries. Per group of 4 blocks it loads the 64 bytes of each of the 16
// rows and transposes the 16x16 dwords (unpack dwords, then quadwords,
// then 128-bit lanes twice), which leaves dword i of block k of the 16
// rows in one vector; its low and high nibbles are the vectors of values
// 4i..4i+3 and 16+4i..16+4i+3. A full entry (lane 4k+g of a chunk) takes
// all 8 of block k of group g, and the codes of the 16 rows, gathered
// (dword r: the codes of blocks 4g..4g+3 of row r); a partial entry
// (lane 4k+i of group g of the last chunk, whose bytes past the row's
// last block are not read) takes the 2 of dword i.
func q4LanesRepackKernel(form q4Form) {
	name := "q4VnniLanesRepack" + q4LanesFormName(form)
	lpbq := form == formCodes
	fullBytes, partBytes := (8+q4LanesExtra(form))*64, (2+q4LanesExtra(form))*64
	TEXT(name, NOSPLIT, "func(nib *byte, rstr int, codes *byte, nb int, full int, parts int, dst *byte, lstr int)")
	Pragma("noescape")
	if lpbq {
		Doc(name + " lays out a row-lane tile of 16 rows from row nib's codes on (rstr bytes a row; codes their block codes, nb a row) but for the codes of its partial entries, lane l's entries at dst + l*lstr (see _gen/q4lanes.go).")
	} else {
		Doc(name + " lays out the values of a row-lane tile of 16 rows from row nib's codes on (rstr bytes a row, nb blocks; codes is not read), lane l's entries at dst + l*lstr (see _gen/q4lanes.go).")
	}
	t32 := GP32()
	MOVL(U32(0x0f0f0f0f), t32)
	m0f := ZMM()
	VPBROADCASTD(t32, m0f)
	MOVL(U32(0xff), t32)
	mff := ZMM()
	VPBROADCASTD(t32, mff)
	// the codes' dword offsets: r*nb
	idx := ZMM()
	VMOVDQU32(q4LanesIota, idx)
	nbv := ZMM()
	VPBROADCASTD(Load(Param("nb"), GP64()).(GPVirtual).As32(), nbv)
	VPMULLD(nbv, idx, idx)
	rows := newRowAddr(Load(Param("nib"), GP64()), Load(Param("rstr"), GP64()), 16)
	row, rb := rows.at, rows.base
	cp := Load(Param("codes"), GP64())
	lstr := Load(Param("lstr"), GP64())
	dst := Load(Param("dst"), GP64())
	laneAt := lanesAddr(dst, lstr)
	transposed := func(off int, km Register) [4][4]VecVirtual {
		return transpose16(func(r int) Mem { return row(r, off) }, km)
	}
	// nibbles stores the low and high nibbles of o at lo and hi.
	nibbles := func(o VecVirtual, lo, hi Mem) {
		h := ZMM()
		VPSRLD(U8(4), o, h)
		VPANDD(o, m0f, o)
		VPANDD(h, m0f, h)
		VMOVDQU32(o, lo)
		VMOVDQU32(h, hi)
	}

	cnt := Load(Param("full"), GP64())
	Label("chunk")
	TESTQ(cnt, cnt)
	JZ(LabelRef("parts"))
	for g := range 4 {
		for r := range 16 {
			PREFETCHT0(row(r, 64*g+512)) // two chunks on
		}
		out := transposed(64*g, nil)
		for k := range 4 {
			for i := range 4 {
				nibbles(out[k][i], laneAt(k, 64*i), laneAt(k, 64*(4+i)))
			}
		}
		if lpbq {
			// the codes of blocks 4g..4g+3 of the 16 rows
			cw := ZMM()
			kall := K()
			KXNORW(kall, kall, kall)
			VPGATHERDD(Mem{Base: cp, Index: idx, Scale: 1, Disp: 4 * g}, kall, cw)
			for k := range 4 {
				c := ZMM()
				if k > 0 {
					VPSRLD(U8(8*k), cw, c)
					VPANDD(c, mff, c)
				} else {
					VPANDD(cw, mff, c)
				}
				VMOVDQU32(c, laneAt(k, 512))
			}
		}
		if g < 3 {
			ADDQ(lstr, dst) // lane g+1
		}
	}
	// back to lane 0, next chunk
	SUBQ(lstr, dst)
	SUBQ(lstr, dst)
	SUBQ(lstr, dst)
	ADDQ(U32(fullBytes), dst)
	for _, b := range rb {
		ADDQ(U32(256), b)
	}
	ADDQ(U8(16), cp)
	DECQ(cnt)
	JMP(LabelRef("chunk"))

	// The last, partial chunk: group g (masked to the row's bytes left)
	// gives lane 4k+i its partial entry g.
	Label("parts")
	parts := Load(Param("parts"), GP64())
	TESTQ(parts, parts)
	JZ(LabelRef("done"))
	left := Load(Param("nb"), GP64())
	ANDQ(U8(15), left)
	SHLQ(U8(4), left) // the row's bytes in the last chunk
	ones, m := GP64(), GP64()
	MOVQ(I64(-1), ones)
	for g := range 4 {
		if g > 0 {
			CMPQ(parts, U8(g))
			JE(LabelRef("done"))
		}
		b := GP64()
		MOVQ(left, b)
		if g > 0 {
			SUBQ(U8(64*g), b) // > 0: g < parts
		}
		BZHIQ(b, ones, m) // all ones from 64 bytes on
		km := K()
		KMOVQ(m, km)
		out := transposed(64*g, km)
		// lane 4k+i, entry g: the 2 vectors of dword i
		for k := range 4 {
			for i := range 4 {
				nibbles(out[k][i], laneAt(k, 0), laneAt(k, 64))
				if i < 3 {
					ADDQ(lstr, dst)
				}
			}
			SUBQ(lstr, dst)
			SUBQ(lstr, dst)
			SUBQ(lstr, dst)
		}
		ADDQ(U32(partBytes), dst)
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// transpose16 loads 64 bytes of each of 16 rows (row r's at rowAt(r),
// masked by km when set) and returns out[k][i], their dword 4k+i (dword i
// of block k, for 4-bit codes) of the 16 rows, row r in lane r: the
// 16x16 dwords transposed by unpacking dwords, then quadwords, then
// 128-bit lanes twice.
func transpose16(rowAt func(r int) Mem, km Register) [4][4]VecVirtual {
	R := make([]VecVirtual, 16)
	for r := range R {
		R[r] = ZMM()
		if km != nil {
			VMOVDQU8_Z(rowAt(r), km, R[r])
		} else {
			VMOVDQU32(rowAt(r), R[r])
		}
	}
	// dwords: [a0 b0 a1 b1] and [a2 b2 a3 b3] in each 128-bit lane
	t := make([]VecVirtual, 16)
	for r := 0; r < 16; r += 2 {
		t[r], t[r+1] = ZMM(), ZMM()
		VPUNPCKLDQ(R[r+1], R[r], t[r])
		VPUNPCKHDQ(R[r+1], R[r], t[r+1])
	}
	// quadwords: V[q][i] holds in 128-bit lane k dword i of block
	// k of rows 4q..4q+3
	var V [4][4]VecVirtual
	for q := range 4 {
		a0, a1, b0, b1 := t[4*q], t[4*q+1], t[4*q+2], t[4*q+3]
		for i, in := range [][2]VecVirtual{{a0, b0}, {a0, b0}, {a1, b1}, {a1, b1}} {
			V[q][i] = ZMM()
			if i%2 == 0 {
				VPUNPCKLQDQ(in[1], in[0], V[q][i])
			} else {
				VPUNPCKHQDQ(in[1], in[0], V[q][i])
			}
		}
	}
	// 128-bit lanes: out[k][i] = lane k of V[0..3][i]
	var out [4][4]VecVirtual
	for i := range 4 {
		u := make([]VecVirtual, 4)
		for j := range u {
			u[j] = ZMM()
		}
		VSHUFI32X4(U8(0x44), V[1][i], V[0][i], u[0])
		VSHUFI32X4(U8(0xee), V[1][i], V[0][i], u[1])
		VSHUFI32X4(U8(0x44), V[3][i], V[2][i], u[2])
		VSHUFI32X4(U8(0xee), V[3][i], V[2][i], u[3])
		for k := range 4 {
			imm := U8(0x88)
			if k%2 == 1 {
				imm = U8(0xdd)
			}
			out[k][i] = ZMM()
			VSHUFI32X4(imm, u[2+k/2], u[k/2], out[k][i])
		}
	}
	return out
}

// lanesAddr addresses byte off of lane j+4k's entry from dst at lane j
// (lanes lstr bytes apart): k = 0..3.
func lanesAddr(dst, lstr Register) func(k, off int) Mem {
	lstr4 := GP64()
	MOVQ(lstr, lstr4)
	SHLQ(U8(2), lstr4)
	lstr12 := GP64()
	LEAQ(Mem{Base: lstr4, Index: lstr4, Scale: 2}, lstr12)
	return rowAddr{base: []Register{dst}, str: lstr4, str3: lstr12}.at
}
