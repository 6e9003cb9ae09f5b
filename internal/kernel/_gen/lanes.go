package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// laneTile is the frame the row-lane tiles share (q4lanes.go, w8lanes.go):
// per token an int32 sum s and a float32 accumulator acc (16 rows, one a
// lane), the tile's weights at wp (param w), the tokens' records x (param
// x, token stride param xs; x0 holds token 0's at the current lane's
// start), and the lanes of the one-token kernels walked one after another
// (lane counts 16 down to 1), each token's sums of a lane stored to the
// scratch a (param a: [TT][16 lanes][16 rows] float32).
type laneTile struct {
	TT       int
	s, acc   []VecVirtual
	wp, ap   Register
	lane, x0 Register
	x        rowAddr
}

func newLaneTile(TT int) *laneTile {
	lt := &laneTile{TT: TT}
	xs := Load(Param("xs"), GP64())
	lt.wp = Load(Param("w"), GP64())
	lt.ap = Load(Param("a"), GP64())
	lt.lane = GP64()
	MOVQ(U32(16), lt.lane)
	lt.x0 = Load(Param("x"), GP64())
	b := GP64()
	MOVQ(lt.x0, b)
	lt.x = newRowAddr(b, xs, TT)
	lt.s, lt.acc = make([]VecVirtual, TT), make([]VecVirtual, TT)
	for t := range TT {
		lt.s[t], lt.acc[t] = ZMM(), ZMM()
	}
	return lt
}

// startLane points the tokens' records at the lane's first entry and
// zeroes the accumulators.
func (lt *laneTile) startLane() {
	MOVQ(lt.x0, lt.x.base[0])
	lt.x.rebase()
	for t := range lt.TT {
		VPXORD(lt.acc[t], lt.acc[t], lt.acc[t])
	}
}

// advance moves past an entry: wBytes of weights, recBytes of records.
func (lt *laneTile) advance(wBytes, recBytes int) {
	ADDQ(U32(wBytes), lt.wp)
	lt.x.add(recBytes)
}

// endLane stores each token's accumulator as its sums of the lane and
// loops to label "lane" for the next one, whose records start where this
// one's ended.
func (lt *laneTile) endLane() {
	for t := range lt.TT {
		VMOVUPS(lt.acc[t], Mem{Base: lt.ap, Disp: 1024 * t})
	}
	ADDQ(U8(64), lt.ap)
	MOVQ(lt.x.base[0], lt.x0)
	DECQ(lt.lane)
	JNZ(LabelRef("lane"))
}

// sums ends the tile: each token's 16 lane sums added in hsum's order
// (y_i = a_i + a_(i+8), x_i = y_i + y_(i+4), z_j = x_j + x_(j+2), z_0 +
// z_1), plus the float32 at c(t) when c is set, times the row scales at
// rs when it has a base, stored for the tile's first rows (param rows) to
// param dst, ldd floats a token.
func (lt *laneTile) sums(rs Mem, c func(t int) Mem) {
	Load(Param("a"), lt.ap)
	dst := Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	rows := Load(Param("rows"), GP64())
	m := GP64()
	MOVQ(I64(-1), m)
	BZHIQ(rows, m, m)
	km := K()
	KMOVW(m.As32(), km)
	var scale VecVirtual
	if rs.Base != nil {
		scale = ZMM()
		VMOVUPS_Z(rs, km, scale)
	}
	for t := range lt.TT {
		at := func(l int) Mem { return Mem{Base: lt.ap, Disp: 1024*t + 64*l} }
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
		if c != nil {
			VADDPS_BCST(c(t), y[0], y[0])
		}
		if scale != nil {
			VMULPS(scale, y[0], y[0])
		}
		VMOVUPS(y[0], km, Mem{Base: dst})
		if t+1 < lt.TT {
			ADDQ(ldd, dst)
		}
	}
	VZEROUPPER()
	RET()
}
