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

	xs := Load(Param("xs"), GP64())
	xs3 := GP64()
	LEAQ(Mem{Base: xs, Index: xs, Scale: 2}, xs3)
	nBase := (TT + 3) / 4
	tok := func(base []Register, t, off int) Mem {
		m := Mem{Base: base[t/4], Disp: off}
		switch t % 4 {
		case 1:
			m.Index, m.Scale = xs, 1
		case 2:
			m.Index, m.Scale = xs, 2
		case 3:
			m.Index, m.Scale = xs3, 1
		}
		return m
	}
	wp := Load(Param("w"), GP64())
	ap := Load(Param("a"), GP64())
	lane := GP64()
	MOVQ(U32(16), lane)
	x0 := Load(Param("x"), GP64())
	base := make([]Register, nBase)
	for i := range base {
		base[i] = GP64()
	}
	s := make([]VecVirtual, TT)
	acc := make([]VecVirtual, TT)
	for t := range TT {
		s[t], acc[t] = ZMM(), ZMM()
	}
	cnt := GP64()

	Label("lane")
	for i, b := range base {
		if i == 0 {
			MOVQ(x0, b)
			continue
		}
		LEAQ(Mem{Base: base[i-1], Index: xs, Scale: 4}, b) // 4 tokens on
	}
	for t := range TT {
		VPXORD(acc[t], acc[t], acc[t])
	}
	advance := func(wBytes, recBytes int) {
		ADDQ(U32(wBytes), wp)
		for _, b := range base {
			ADDQ(U8(recBytes), b)
		}
	}
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
				vpdpbusdBcst(tok(base, t, 4*v), w, s[t])
			}
		}
		for t := range TT {
			VCVTDQ2PS(s[t], s[t])
			VFMADD231PS_BCST(tok(base, t, 4*vecs), s[t], acc[t])
		}
	}
	Load(Param("quads"), cnt)
	Label("quad")
	TESTQ(cnt, cnt)
	JZ(LabelRef("groups"))
	entry(4)
	advance(w8LanesQuadBytes, w8LanesQuadRecBytes)
	DECQ(cnt)
	JMP(LabelRef("quad"))

	Label("groups")
	Load(Param("groups"), cnt)
	Label("group")
	TESTQ(cnt, cnt)
	JZ(LabelRef("store"))
	entry(1)
	advance(w8LanesGroupBytes, w8LanesGrpRecBytes)
	DECQ(cnt)
	JMP(LabelRef("group"))

	// lane l of token t goes to a[t][l]
	Label("store")
	for t := range TT {
		VMOVUPS(acc[t], Mem{Base: ap, Disp: 1024 * t})
	}
	ADDQ(U8(64), ap)
	// the next lane's records start where this one's ended
	MOVQ(base[0], x0)
	DECQ(lane)
	JNZ(LabelRef("lane"))

	// hsum's order over the 16 lanes, then + C (after the lanes' records)
	// and the row scales.
	Load(Param("a"), ap)
	dst := Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	rows := Load(Param("rows"), GP64())
	m := GP64()
	MOVQ(I64(-1), m)
	BZHIQ(rows, m, m)
	km := K()
	KMOVW(m.As32(), km)
	rs := ZMM()
	VMOVUPS_Z(Mem{Base: Load(Param("rs"), GP64())}, km, rs)
	// x0 is now past the 16 lanes' records of token 0: C
	MOVQ(x0, base[0])
	for i := 1; i < nBase; i++ {
		LEAQ(Mem{Base: base[i-1], Index: xs, Scale: 4}, base[i])
	}
	for t := range TT {
		at := func(l int) Mem { return Mem{Base: ap, Disp: 1024*t + 64*l} }
		y := make([]VecVirtual, 8)
		for i := range y {
			y[i] = ZMM()
			VMOVUPS(at(i), y[i])
			VADDPS(at(i+8), y[i], y[i])
		}
		for i := range 4 {
			VADDPS(y[i+4], y[i], y[i])
		}
		VADDPS(y[2], y[0], y[0])
		VADDPS(y[3], y[1], y[1])
		VADDPS(y[1], y[0], y[0])
		VADDPS_BCST(tok(base, t, 0), y[0], y[0]) // + C
		VMULPS(rs, y[0], y[0])
		VMOVUPS(y[0], km, Mem{Base: dst})
		if t+1 < TT {
			ADDQ(ldd, dst)
		}
	}
	VZEROUPPER()
	RET()
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
	rstr := Load(Param("rstr"), GP64())
	rstr3 := GP64()
	LEAQ(Mem{Base: rstr, Index: rstr, Scale: 2}, rstr3)
	rb := make([]Register, 4)
	rb[0] = Load(Param("u"), GP64())
	for q := 1; q < 4; q++ {
		rb[q] = GP64()
		LEAQ(Mem{Base: rb[q-1], Index: rstr, Scale: 4}, rb[q])
	}
	row := func(r, off int) Mem {
		m := Mem{Base: rb[r/4], Disp: off}
		switch r % 4 {
		case 1:
			m.Index, m.Scale = rstr, 1
		case 2:
			m.Index, m.Scale = rstr, 2
		case 3:
			m.Index, m.Scale = rstr3, 1
		}
		return m
	}
	lstr := Load(Param("lstr"), GP64())
	lstr4 := GP64()
	MOVQ(lstr, lstr4)
	SHLQ(U8(2), lstr4)
	lstr12 := GP64()
	LEAQ(Mem{Base: lstr4, Index: lstr4, Scale: 2}, lstr12)
	laneAt := func(base Register, k, off int) Mem {
		m := Mem{Base: base, Disp: off}
		switch k {
		case 1:
			m.Index, m.Scale = lstr4, 1
		case 2:
			m.Index, m.Scale = lstr4, 2
		case 3:
			m.Index, m.Scale = lstr12, 1
		}
		return m
	}
	transposed := func(off int, km Register) [4][4]VecVirtual {
		return transpose16(func(r int) Mem { return row(r, off) }, km)
	}

	dst := Load(Param("dst"), GP64())
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
				VMOVDQU32(out[k][i], laneAt(dst, k, 64*i))
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
				VMOVDQU32(out[k][i], laneAt(dst, k, 0))
			}
			ADDQ(lstr, dst)
		}
		SUBQ(lstr4, dst)
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
