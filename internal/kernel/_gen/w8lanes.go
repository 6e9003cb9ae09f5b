package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX-512 8-bit prefill tiles in row lanes (w8VnniLanes<TT>, TT =
// 1..12): 16 rows by TT tokens, each row in its own lane, as the 4-bit
// ones (q4lanes.go): a weight vector holds 4 bytes of 16 rows, each
// token's 4 activation bytes are one broadcast operand of VPDPBUSD.
//
// Every (row, token) gets the bits of the one-token kernels (w8.go),
// which keep per row 16 float32 lanes: in a quad of 8 blocks, lane 4L+r
// adds the 16 values at 64r+16L (4 VPDPBUSD from zero), converted and
// multiplied by their block's D; in a group of 2 blocks (and the last
// block, whose upper lanes are zero), lane i adds the 4 values at 4i the
// same way; then the 16 lanes in hsum's order, plus C, times the row
// scale. Here lane l is an accumulator per token, walked through lane
// l's entries in that order, stored, and the 16 added across registers
// in hsum's order.
//
// The tile's buffer (kernel.w8LanesRepack), for each lane l = 4L+r: one
// quad entry per quad (4 vectors: dword d of the 16 values at 64r+16L of
// each of the 16 rows), then one group entry per group and for the last
// block (1 vector: dword l of the group's 64 bytes; zeros past the
// row). A token's lane records follow the same order: per quad entry its
// 16 values and D (20 bytes), per group entry its 4 values and D (8
// bytes), then C.
const (
	w8LanesQuadBytes    = 4 * 64
	w8LanesGroupBytes   = 64
	w8LanesQuadRecBytes = 20
	w8LanesGrpRecBytes  = 8
)

func genW8Lanes() {
	w8LanesRepackKernel()
	for TT := 1; TT <= q4LanesMaxTT; TT++ {
		w8LanesKernel(TT)
	}
}

func w8LanesKernel(TT int) {
	name := fmt.Sprintf("w8VnniLanes%d", TT)
	TEXT(name, NOSPLIT, "func(w *byte, x *byte, xs int, quads int, groups int, a *float32, dst *float32, ldd int, rs *float32, rows int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes a tile of 16 rows (the first rows of them stored) by %d tokens of an 8-bit product in row lanes, from a repacked tile and lane records (see _gen/w8lanes.go); a holds %d*16*16 floats of scratch.", name, TT, TT))

	lt := newLaneTile(TT)
	s, acc, wp, tok := lt.s, lt.acc, lt.wp, lt.x.at
	cnt := GP64()

	Label("lane")
	lt.startLane()
	// entry emits one entry of vecs weight vectors: each token's sums
	// from zero, converted, times D (at 4*vecs in its record).
	entry := func(vecs int) {
		for t := range TT {
			VPXORD(s[t], s[t], s[t])
		}
		for v := range vecs {
			w := ZMM()
			VMOVDQU32(Mem{Base: wp, Disp: 64 * v}, w)
			for t := range TT {
				vpdpbusdBcst(tok(t, 4*v), w, s[t])
			}
		}
		for t := range TT {
			VCVTDQ2PS(s[t], s[t])
			VFMADD231PS_BCST(tok(t, 4*vecs), s[t], acc[t])
		}
	}
	Load(Param("quads"), cnt)
	Label("quad")
	TESTQ(cnt, cnt)
	JZ(LabelRef("groups"))
	entry(4)
	lt.advance(w8LanesQuadBytes, w8LanesQuadRecBytes)
	DECQ(cnt)
	JMP(LabelRef("quad"))

	Label("groups")
	Load(Param("groups"), cnt)
	Label("group")
	TESTQ(cnt, cnt)
	JZ(LabelRef("store"))
	entry(1)
	lt.advance(w8LanesGroupBytes, w8LanesGrpRecBytes)
	DECQ(cnt)
	JMP(LabelRef("group"))

	Label("store")
	lt.endLane()

	// C follows the 16 lanes' records of each token
	MOVQ(lt.x0, lt.x.base[0])
	lt.x.rebase()
	lt.sums(Mem{Base: Load(Param("rs"), GP64())}, func(t int) Mem { return tok(t, 0) })
}

// w8LanesRepackKernel emits w8VnniLanesRepack: a row-lane tile of 16
// whole rows (kernel.w8LanesRepack). Per 64 bytes of the 16 rows (a
// quarter of a quad, a group, or the last block, masked) it transposes
// the 16x16 dwords as q4LanesRepackKernel does: dword p = 4k+i of the 64
// bytes of the 16 rows in one vector, which goes to lane 4k+r's quad
// entry as its vector i (quarter r of a quad) or to lane p's group entry.
func w8LanesRepackKernel() {
	TEXT("w8VnniLanesRepack", NOSPLIT, "func(u *byte, rstr int, quads int, groups int, tail int, dst *byte, lstr int)")
	Pragma("noescape")
	Doc("w8VnniLanesRepack lays out a row-lane tile of 16 rows of an 8-bit weight from row u on (rstr bytes a row): quads quads, groups groups, and tail bytes (0 or 32) of a last block, lane l's entries at dst + l*lstr (see _gen/w8lanes.go).")
	rows := newRowAddr(Load(Param("u"), GP64()), Load(Param("rstr"), GP64()), 16)
	row, rb := rows.at, rows.base
	lstr := Load(Param("lstr"), GP64())
	dst := Load(Param("dst"), GP64())
	laneAt := lanesAddr(dst, lstr)
	transposed := func(off int, km Register) [4][4]VecVirtual {
		return transpose16(func(r int) Mem { return row(r, off) }, km)
	}

	cnt := Load(Param("quads"), GP64())
	Label("quad")
	TESTQ(cnt, cnt)
	JZ(LabelRef("groups"))
	for r := range 4 {
		for rr := range 16 {
			PREFETCHT0(row(rr, 64*r+512)) // two quads on
		}
		out := transposed(64*r, nil)
		// dword 4k+i goes to lane 4k+r's entry, vector i
		for k := range 4 {
			for i := range 4 {
				VMOVDQU32(out[k][i], laneAt(k, 64*i))
			}
		}
		if r < 3 {
			ADDQ(lstr, dst) // lane r+1
		}
	}
	SUBQ(lstr, dst)
	SUBQ(lstr, dst)
	SUBQ(lstr, dst)
	ADDQ(U32(w8LanesQuadBytes), dst)
	for _, b := range rb {
		ADDQ(U32(256), b)
	}
	DECQ(cnt)
	JMP(LabelRef("quad"))

	// groups, then the last block: dword p to lane p's entry
	groupTo := func(out [4][4]VecVirtual) {
		for i := range 4 {
			for k := range 4 {
				VMOVDQU32(out[k][i], laneAt(k, 0))
			}
			ADDQ(lstr, dst)
		}
		SUBQ(lstr, dst)
		SUBQ(lstr, dst)
		SUBQ(lstr, dst)
		SUBQ(lstr, dst)
		ADDQ(U8(w8LanesGroupBytes), dst)
	}
	Label("groups")
	Load(Param("groups"), cnt)
	Label("group")
	TESTQ(cnt, cnt)
	JZ(LabelRef("tail"))
	groupTo(transposed(0, nil))
	for _, b := range rb {
		ADDQ(U8(64), b)
	}
	DECQ(cnt)
	JMP(LabelRef("group"))

	Label("tail")
	tail := Load(Param("tail"), GP64())
	TESTQ(tail, tail)
	JZ(LabelRef("done"))
	ones, m := GP64(), GP64()
	MOVQ(I64(-1), ones)
	BZHIQ(tail, ones, m)
	km := K()
	KMOVQ(m, km)
	groupTo(transposed(0, km))
	Label("done")
	VZEROUPPER()
	RET()
}
