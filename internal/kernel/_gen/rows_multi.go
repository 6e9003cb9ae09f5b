package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genRowsMulti writes the AVX-512 forms for M = 2, 3, 4 queries of the
// binary16 and uint8 row kernels of attention, axpyRows{M}{F16,U8}Vnni
// and dotRows{M}{F16,U8}Vnni: M queries of one key/value head against
// the same cache rows, each row vector widened once for the M. Every
// query's result is bit-identical to the one-query kernel's (the same
// sums in the same order), so a prefill that attends several rows at
// once agrees with the decode of each. The twins
// dotRows{M}{F16,U8}VnniPf, M = 1..4, ask for another run of rows as
// they read (dotAhead).
func genRowsMulti() {
	for _, e := range []elemKind{elemF16, elemU8} {
		c := newRowsISA(true, e)
		for m := 2; m <= 4; m++ {
			genAxpyRowsM(c, m)
			genDotRowsM(c, m)
		}
		dotAhead = true
		for m := 1; m <= 4; m++ {
			genDotRowsM(c, m)
		}
		dotAhead = false
		axpyAhead = true
		for m := 2; m <= 4; m++ {
			genAxpyRowsM(c, m)
		}
		axpyAhead = false
	}
}

// axpyAhead makes genAxpyRowsM write the twin that asks for another run
// of rows as it reads its own (axpyRows{M}{F16,U8}VnniPf): for the first
// vector of each row of a column block it issues a PREFETCHT0 of the
// line ahead bytes away. A decode step's value pass passes the distance
// to the next key/value head's keys, so that they come from memory while
// the values (already in the caches) are summed. The sums are the plain
// kernel's.
var axpyAhead bool

// quad addresses vector q (0..3) of four vectors ld bytes apart (ld3 =
// 3*ld) from p.
func quad(p, ld, ld3 GPVirtual) rowAddr {
	return rowAddr{base: []Register{p}, str: ld, str3: ld3}
}

// quadStride loads the float32 stride parameter name in bytes, and
// three times it.
func quadStride(name string) (ld, ld3 GPVirtual) {
	ld, ld3 = GP64(), GP64()
	Load(Param(name), ld)
	SHLQ(U8(2), ld)
	LEAQ(Mem{Base: ld, Index: ld, Scale: 2}, ld3)
	return ld, ld3
}

func genAxpyRowsM(c *rowsISA, M int) {
	name := c.name(fmt.Sprintf("axpyRows%d", M))
	params := "func(dst *float32, ldd int, alpha *float32, lda int, x *%s, n int, rows int, stride int)"
	if axpyAhead {
		name += "Pf"
		params = "func(dst *float32, ldd int, alpha *float32, lda int, x *%s, n int, rows int, stride int, ahead int)"
	}
	TEXT(name, NOSPLIT, c.sig(params))
	Pragma("noescape")
	Doc(name+fmt.Sprintf(" sets dst[q*ldd+j] += Σ_r alpha[q*lda+r]*x[r*stride+j] for q < %d, j < n, r < rows", M),
		"(any n; strides in elements), each q exactly as "+c.name("axpyRows")+".")
	dst, al, x, n := GP64(), GP64(), GP64(), GP64()
	Load(Param("dst"), dst)
	Load(Param("alpha"), al)
	Load(Param("x"), x)
	Load(Param("n"), n)
	c.strideOnly()
	la, la3 := quadStride("lda")

	c.columnBlocks(dst, x, n, 2, func(lbl string, nvec int, masked bool) {
		c.axpyMBlock(lbl, M, dst, al, la, la3, x, nvec, masked)
	})
	Label("done")
	VZEROUPPER()
	RET()
}

// axpyMBlock updates nvec vectors of the M queries' dst at dst from
// all rows at x, as axpyBlock with two sets: even rows into the set that
// starts from dst, odd ones into the other, added at the end.
func (c *rowsISA) axpyMBlock(lbl string, M int, dst, al, la, la3, x GPVirtual, nvec int, masked bool) {
	var acc [2][4][]VecVirtual
	ld, ld3 := quadStride("ldd")
	for s := range acc {
		for q := range M {
			acc[s][q] = make([]VecVirtual, nvec)
			for i := range nvec {
				v := c.vec()
				acc[s][q][i] = v
				m := quad(dst, ld, ld3).at(q, i*c.lanes*4)
				switch {
				case s > 0:
					c.zero(v)
				case masked:
					VMOVUPS_Z(m, c.k, v)
				default:
					VMOVUPS(m, v)
				}
			}
		}
	}
	xp, ap, r := GP64(), GP64(), GP64()
	MOVQ(x, xp)
	MOVQ(al, ap)
	Load(Param("rows"), r)
	var pp GPVirtual // xp + ahead, in a twin that asks ahead
	if axpyAhead {
		pp = GP64()
		Load(Param("ahead"), pp)
		ADDQ(xp, pp)
	}
	step := func(sets int) {
		for s := range sets {
			for i := range nvec {
				if pp != nil && i == 0 && !masked {
					PREFETCHT0(c.row(pp, s, 0))
				}
				v := c.load(c.row(xp, s, i*c.lanes), masked)
				for q := range M {
					VFMADD231PS_BCST(quad(ap, la, la3).at(q, 4*s), v, acc[s][q][i])
				}
			}
		}
	}
	Label(lbl + "rows")
	CMPQ(r, U8(2))
	JB(LabelRef(lbl + "row1"))
	step(2)
	LEAQ(Mem{Base: xp, Index: c.sb, Scale: 2}, xp)
	if pp != nil {
		LEAQ(Mem{Base: pp, Index: c.sb, Scale: 2}, pp)
	}
	ADDQ(U8(8), ap)
	SUBQ(U8(2), r)
	JMP(LabelRef(lbl + "rows"))

	Label(lbl + "row1")
	TESTQ(r, r)
	JZ(LabelRef(lbl + "store"))
	step(1)

	Label(lbl + "store")
	ld, ld3 = quadStride("ldd")
	for q := range M {
		for i := range nvec {
			VADDPS(acc[1][q][i], acc[0][q][i], acc[0][q][i])
			m := quad(dst, ld, ld3).at(q, i*c.lanes*4)
			if masked {
				VMOVUPS(acc[0][q][i], c.k, m)
			} else {
				VMOVUPS(acc[0][q][i], m)
			}
		}
	}
}

// dotAhead makes genDotRowsM write the twin that asks for another run
// of rows as it reads its own (dotRows{M}{F16,U8}VnniPf): for each line
// of its rows that the main loop loads it issues a PREFETCHT0 of the
// line ahead bytes away. Attention's key pass passes the distance to
// the value rows, so that they come from memory while the keys are
// summed rather than in a burst before (one key/value head of 483
// binary16 positions from memory: 22-24 us against 26-30, measured on an
// Intel Xeon; docs/lab/kernels-notes.md). The sums are the plain kernel's.
var dotAhead bool

func genDotRowsM(c *rowsISA, M int) {
	name := c.name(fmt.Sprintf("dotRows%d", M))
	params := "func(dst *float32, ldd int, w *float32, ldw int, y *%s, n int, rows int, stride int)"
	if dotAhead {
		name += "Pf"
		params = "func(dst *float32, ldd int, w *float32, ldw int, y *%s, n int, rows int, stride int, ahead int)"
	}
	TEXT(name, NOSPLIT, c.sig(params))
	Pragma("noescape")
	Doc(name+fmt.Sprintf(" sets dst[q*ldd+r] = Σ_j w[q*ldw+j]*y[r*stride+j] for q < %d, r < rows, j < n", M),
		"(any n; strides in elements), each q exactly as "+c.name("dotRows")+".")
	dst, w, y, n, rows := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("dst"), dst)
	Load(Param("w"), w)
	Load(Param("y"), y)
	Load(Param("n"), n)
	Load(Param("rows"), rows)
	c.ahead = nil
	if dotAhead {
		c.ahead = GP64()
		Load(Param("ahead"), c.ahead)
	}
	c.strideOnly()
	t := GP64()
	MOVQ(n, t)
	ANDQ(U8(c.lanes-1), t)
	c.setMask(t)
	lw, lw3 := quadStride("ldw")

	Label("r2")
	CMPQ(rows, U8(2))
	JB(LabelRef("r1"))
	c.dotMBlock("r2", M, dst, w, lw, lw3, y, n, 2)
	ADDQ(U8(8), dst)
	LEAQ(Mem{Base: y, Index: c.sb, Scale: 2}, y)
	SUBQ(U8(2), rows)
	JMP(LabelRef("r2"))

	Label("r1")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	c.dotMBlock("r1", M, dst, w, lw, lw3, y, n, 1)
	Label("done")
	VZEROUPPER()
	RET()
}

// dotMBlock stores the dot products of the M queries' w with the nr
// (1 or 2) rows at y, as dotBlock: vector k of a row into the
// accumulator of k's parity, then the two added and reduced as hsum.
func (c *rowsISA) dotMBlock(lbl string, M int, dst, w, lw, lw3, y, n GPVirtual, nr int) {
	var acc [2][2][4]VecVirtual // [parity][row][query]
	for u := range 2 {
		for r := range nr {
			for q := range M {
				acc[u][r][q] = c.vec()
				c.zero(acc[u][r][q])
			}
		}
	}
	wp, yp, j := GP64(), GP64(), GP64()
	MOVQ(w, wp)
	MOVQ(y, yp)
	MOVQ(n, j)
	var pp GPVirtual // yp + ahead, in a twin that asks ahead
	if c.ahead != nil {
		pp = GP64()
		LEAQ(Mem{Base: y, Index: c.ahead, Scale: 1}, pp)
	}
	vector := func(u, disp int, masked bool) {
		for r := range nr {
			if pp != nil && u == 0 && !masked {
				PREFETCHT0(c.row(pp, r, disp/4))
			}
			v := c.load(c.row(yp, r, disp/4), masked)
			for q := range M {
				m := quad(wp, lw, lw3).at(q, disp)
				if masked {
					wt := c.vec()
					VMOVUPS_Z(m, c.k, wt)
					VFMADD231PS(wt, v, acc[u][r][q])
				} else {
					VFMADD231PS(m, v, acc[u][r][q])
				}
			}
		}
	}
	Label(lbl + "j")
	CMPQ(j, U32(2*c.lanes))
	JB(LabelRef(lbl + "j1"))
	for u := range 2 {
		vector(u, u*c.lanes*4, false)
	}
	ADDQ(U32(2*c.lanes*4), wp)
	ADDQ(U32(2*c.lanes*c.esz), yp)
	if pp != nil {
		ADDQ(U32(2*c.lanes*c.esz), pp)
	}
	SUBQ(U32(2*c.lanes), j)
	JMP(LabelRef(lbl + "j"))

	Label(lbl + "j1")
	CMPQ(j, U32(c.lanes))
	JB(LabelRef(lbl + "jt"))
	vector(0, 0, false)
	ADDQ(U32(c.lanes*4), wp)
	ADDQ(U32(c.lanes*c.esz), yp)
	SUBQ(U32(c.lanes), j)
	TESTQ(j, j)
	JZ(LabelRef(lbl + "red"))
	vector(1, 0, true)
	JMP(LabelRef(lbl + "red"))

	Label(lbl + "jt")
	TESTQ(j, j)
	JZ(LabelRef(lbl + "red"))
	vector(0, 0, true)

	Label(lbl + "red")
	ld, ld3 := quadStride("ldd")
	for r := range nr {
		for q := range M {
			VADDPS(acc[1][r][q], acc[0][r][q], acc[0][r][q])
			x, tt := c.toXMM(acc[0][r][q]), XMM()
			VPERMILPS(U8(0x4e), x, tt)
			VADDPS(tt, x, x)
			VPERMILPS(U8(0xb1), x, tt)
			VADDSS(tt, x, x)
			VMOVSS(x, quad(dst, ld, ld3).at(q, 4*r))
		}
	}
}

// strideOnly loads the stride parameter in bytes into c.sb (the
// multi-vector kernels address two rows at a time: no c.sb3).
func (c *rowsISA) strideOnly() {
	c.sb = GP64()
	Load(Param("stride"), c.sb)
	switch c.esz {
	case 4:
		SHLQ(U8(2), c.sb)
	case 2:
		SHLQ(U8(1), c.sb)
	}
}
