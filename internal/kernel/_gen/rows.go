package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genRows writes the strided multi-row kernels of attention:
// axpyRows{,F16,U8}{Avx2,Vnni} and dotRows{,F16,U8}{Avx2,Vnni}. The AVX2 ones
// take n a multiple of 8 (the Go side does the rest); the AVX-512 ones
// take any n and finish with masked loads and stores.
func genRows() {
	u8Bias = GLOBL("u8bias", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(128))
	}
	for _, zmm := range []bool{false, true} {
		for _, e := range []elemKind{elemF32, elemF16, elemU8} {
			genAxpyRows(newRowsISA(zmm, e))
			genDotRows(newRowsISA(zmm, e))
		}
		// dotRowsF16W: a binary16 w (a weight row of a binary16 linear)
		// against float32 rows.
		c := newRowsISA(zmm, elemF32)
		c.wF16 = true
		genDotRows(c)
	}
}

// elemKind is the element type of the strided operand of a row kernel.
type elemKind int

const (
	elemF32 elemKind = iota // float32
	elemF16                 // IEEE binary16, widened by F16C
	elemU8                  // uint8 biased by 128 (value = int(u) - 128)
)

// u8Bias is 16 int32 lanes of 128, subtracted from widened uint8 codes.
var u8Bias Mem

// rowsISA holds what the row kernels of one ISA and element type share.
type rowsISA struct {
	zmm     bool
	elem    elemKind
	vec     func() VecVirtual
	lanes   int // float32 lanes per vector
	esz     int // bytes per element of the strided operand
	k       Op  // tail mask (AVX-512)
	sb, sb3 GPVirtual
	wF16    bool // dotRows: w is binary16 (the rows stay elem)
	// ahead, in a kernel that asks ahead (dotAhead), holds the byte
	// distance from each line it reads to the line it asks for.
	ahead GPVirtual
}

func newRowsISA(zmm bool, e elemKind) *rowsISA {
	c := &rowsISA{zmm: zmm, elem: e, vec: YMM, lanes: 8, esz: []int{4, 2, 1}[e]}
	if zmm {
		c.vec, c.lanes = ZMM, 16
	}
	return c
}

// name is the Go name of the kernel op for this ISA and element type.
func (c *rowsISA) name(op string) string {
	op += []string{"", "F16", "U8"}[c.elem]
	if c.wF16 {
		op += "F16W"
	}
	if c.zmm {
		return op + "Vnni"
	}
	return op + "Avx2"
}

// strideBytes loads the stride parameter and keeps it, and three times
// it, in bytes.
func (c *rowsISA) strideBytes() {
	c.sb = GP64()
	Load(Param("stride"), c.sb)
	switch c.esz {
	case 4:
		SHLQ(U8(2), c.sb)
	case 2:
		SHLQ(U8(1), c.sb)
	}
	c.sb3 = GP64()
	LEAQ(Mem{Base: c.sb, Index: c.sb, Scale: 2}, c.sb3)
}

// row addresses element disp (in elements) of row r (0..3) from p.
func (c *rowsISA) row(p GPVirtual, r, disp int) Mem {
	m := Mem{Base: p, Disp: disp * c.esz}
	switch r {
	case 1:
		m.Index, m.Scale = c.sb, 1
	case 2:
		m.Index, m.Scale = c.sb, 2
	case 3:
		m.Index, m.Scale = c.sb3, 1
	}
	return m
}

// setMask puts in c.k the low n bits, n < 16.
func (c *rowsISA) setMask(n GPVirtual) {
	k, m := K(), GP64()
	MOVQ(U64(1), m)
	SHLXQ(n, m, m)
	DECQ(m)
	KMOVW(m.As32(), k)
	c.k = k
}

// load puts one vector of the strided operand at m into a register
// (masked: zero past the tail) and returns it.
func (c *rowsISA) load(m Mem, masked bool) VecVirtual {
	v := c.vec()
	switch {
	case c.elem == elemU8 && masked:
		b := XMM()
		VMOVDQU8_Z(m, c.k, b)
		VPMOVZXBD(b, v)
		VPSUBD(u8Bias, v, v)
		VCVTDQ2PS(v, v)
	case c.elem == elemU8:
		VPMOVZXBD(m, v)
		VPSUBD(u8Bias, v, v)
		VCVTDQ2PS(v, v)
	case c.elem == elemF16 && masked:
		h := YMM()
		VMOVDQU16_Z(m, c.k, h)
		VCVTPH2PS(h, v)
	case c.elem == elemF16:
		VCVTPH2PS(m, v)
	case masked:
		VMOVUPS_Z(m, c.k, v)
	default:
		VMOVUPS(m, v)
	}
	return v
}

// fma adds a*(vector at m) to acc.
func (c *rowsISA) fma(m Mem, a, acc VecVirtual, masked bool) {
	if c.elem == elemF32 && !masked {
		VFMADD231PS(m, a, acc)
		return
	}
	VFMADD231PS(c.load(m, masked), a, acc)
}

func (c *rowsISA) zero(v VecVirtual) {
	if c.zmm {
		VPXORD(v, v, v)
	} else {
		VXORPS(v, v, v)
	}
}

func (c *rowsISA) sig(params string) string {
	return fmt.Sprintf(params, []string{"float32", "uint16", "uint8"}[c.elem])
}

// wBytes is the size of one element of dotRows' w.
func (c *rowsISA) wBytes() int {
	if c.wF16 {
		return 2
	}
	return 4
}

// loadW puts the vector of w at m into v, widened from binary16 when
// c.wF16 (masked: zero past the tail).
func (c *rowsISA) loadW(m Mem, v VecVirtual, masked bool) {
	switch {
	case c.wF16 && masked:
		h := YMM()
		VMOVDQU16_Z(m, c.k, h)
		VCVTPH2PS(h, v)
	case c.wF16:
		VCVTPH2PS(m, v)
	case masked:
		VMOVUPS_Z(m, c.k, v)
	default:
		VMOVUPS(m, v)
	}
}

func genAxpyRows(c *rowsISA) {
	name := c.name("axpyRows")
	TEXT(name, NOSPLIT, c.sig("func(dst *float32, alpha *float32, x *%s, n int, rows int, stride int)"))
	Pragma("noescape")
	tail := "n a multiple of 8"
	if c.zmm {
		tail = "any n"
	}
	Doc(name+" sets dst[j] += Σ_r alpha[r]*x[r*stride+j] for j < n, r < rows,", tail+"; stride is in elements.")
	dst, al, x, n, rows := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("dst"), dst)
	Load(Param("alpha"), al)
	Load(Param("x"), x)
	Load(Param("n"), n)
	Load(Param("rows"), rows)
	c.strideBytes()

	// Blocks of 4 vectors, then single vectors, two rows a pass into two
	// sets of accumulators: a column's sum is added in the same order
	// whichever block it falls in, so it does not depend on n
	// (axpyRowsM).
	c.columnBlocks(dst, x, n, 4, func(lbl string, nvec int, masked bool) {
		c.axpyBlock(lbl, dst, al, x, rows, nvec, 2, masked)
	})
	Label("done")
	VZEROUPPER()
	RET()
}

// columnBlocks emits the column loop of the axpy row kernels: blocks of
// big vectors while they last, then single vectors, then (AVX-512) the
// masked last columns, block(label, vectors, masked) emitting each; it
// moves dst and x on and counts n down, and ends at label "done".
func (c *rowsISA) columnBlocks(dst, x, n GPVirtual, big int, block func(lbl string, nvec int, masked bool)) {
	lb := fmt.Sprintf("b%d", big)
	Label(lb)
	CMPQ(n, U32(big*c.lanes))
	JB(LabelRef("b1"))
	block(lb, big, false)
	ADDQ(U32(big*c.lanes*4), dst)
	ADDQ(U32(big*c.lanes*c.esz), x)
	SUBQ(U32(big*c.lanes), n)
	JMP(LabelRef(lb))

	Label("b1")
	CMPQ(n, U32(c.lanes))
	JB(LabelRef("tail"))
	block("b1", 1, false)
	ADDQ(U32(c.lanes*4), dst)
	ADDQ(U32(c.lanes*c.esz), x)
	SUBQ(U32(c.lanes), n)
	JMP(LabelRef("b1"))

	Label("tail")
	if c.zmm {
		TESTQ(n, n)
		JZ(LabelRef("done"))
		c.setMask(n)
		block("bt", 1, true)
	}
}

// axpyBlock updates nvec vectors of dst at dst from all rows of x at x,
// sets rows a pass (2 or 4) into as many sets of accumulators.
func (c *rowsISA) axpyBlock(lbl string, dst, al, x, rows GPVirtual, nvec, sets int, masked bool) {
	acc := make([][]VecVirtual, sets)
	for s := range acc {
		acc[s] = make([]VecVirtual, nvec)
		for i := range acc[s] {
			acc[s][i] = c.vec()
			switch {
			case s > 0:
				c.zero(acc[s][i])
			case masked:
				VMOVUPS_Z(Mem{Base: dst, Disp: i * c.lanes * 4}, c.k, acc[s][i])
			default:
				VMOVUPS(Mem{Base: dst, Disp: i * c.lanes * 4}, acc[s][i])
			}
		}
	}
	xp, ap, r := GP64(), GP64(), GP64()
	MOVQ(x, xp)
	MOVQ(al, ap)
	MOVQ(rows, r)
	Label(lbl + "rows")
	CMPQ(r, U8(sets))
	JB(LabelRef(lbl + "row1"))
	for s := range sets {
		a := c.vec()
		VBROADCASTSS(Mem{Base: ap, Disp: 4 * s}, a)
		for i := range nvec {
			c.fma(c.row(xp, s, i*c.lanes), a, acc[s][i], masked)
		}
	}
	LEAQ(Mem{Base: xp, Index: c.sb, Scale: uint8(sets)}, xp)
	ADDQ(U8(4*sets), ap)
	SUBQ(U8(sets), r)
	JMP(LabelRef(lbl + "rows"))

	Label(lbl + "row1")
	TESTQ(r, r)
	JZ(LabelRef(lbl + "store"))
	a := c.vec()
	VBROADCASTSS(Mem{Base: ap}, a)
	for i := range nvec {
		c.fma(c.row(xp, 0, i*c.lanes), a, acc[0][i], masked)
	}
	ADDQ(c.sb, xp)
	ADDQ(U8(4), ap)
	DECQ(r)
	JMP(LabelRef(lbl + "row1"))

	Label(lbl + "store")
	for step := 1; step < sets; step *= 2 {
		for s := 0; s+step < sets; s += 2 * step {
			for i := range nvec {
				VADDPS(acc[s+step][i], acc[s][i], acc[s][i])
			}
		}
	}
	for i := range nvec {
		m := Mem{Base: dst, Disp: i * c.lanes * 4}
		if masked {
			VMOVUPS(acc[0][i], c.k, m)
		} else {
			VMOVUPS(acc[0][i], m)
		}
	}
}

func genDotRows(c *rowsISA) {
	name := c.name("dotRows")
	wt := "float32"
	if c.wF16 {
		wt = "uint16"
	}
	TEXT(name, NOSPLIT, c.sig("func(dst *float32, w *"+wt+", y *%s, n int, rows int, stride int)"))
	Pragma("noescape")
	tail := "n a multiple of 8"
	if c.zmm {
		tail = "any n"
	}
	term := "w[j]"
	if c.wF16 {
		term = "f16(w[j])"
	}
	Doc(name+" sets dst[r] = Σ_j "+term+"*y[r*stride+j] for r < rows, j < n,", tail+"; stride is in elements.")
	dst, w, y, n, rows := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("dst"), dst)
	Load(Param("w"), w)
	Load(Param("y"), y)
	Load(Param("n"), n)
	Load(Param("rows"), rows)
	c.strideBytes()
	if c.zmm {
		// The tail mask is the same for every row.
		t := GP64()
		MOVQ(n, t)
		ANDQ(U8(c.lanes-1), t)
		c.setMask(t)
	}

	Label("r4")
	CMPQ(rows, U8(4))
	JB(LabelRef("r1"))
	c.dotBlock("r4", dst, w, y, n, 4, 2)
	ADDQ(U8(16), dst)
	LEAQ(Mem{Base: y, Index: c.sb, Scale: 4}, y)
	SUBQ(U8(4), rows)
	JMP(LabelRef("r4"))

	Label("r1")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	c.dotBlock("r1", dst, w, y, n, 1, 2)
	ADDQ(U8(4), dst)
	ADDQ(c.sb, y)
	DECQ(rows)
	JMP(LabelRef("r1"))

	Label("done")
	VZEROUPPER()
	RET()
}

// dotBlock stores the nr (4 or 1) dot products of w with the rows at y,
// each w vector loaded once for all rows, ju vectors a pass.
func (c *rowsISA) dotBlock(lbl string, dst, w, y, n GPVirtual, nr, ju int) {
	acc := make([][]VecVirtual, ju)
	for u := range acc {
		acc[u] = make([]VecVirtual, nr)
		for r := range acc[u] {
			acc[u][r] = c.vec()
			c.zero(acc[u][r])
		}
	}
	wp, yp, j := GP64(), GP64(), GP64()
	MOVQ(w, wp)
	MOVQ(y, yp)
	MOVQ(n, j)
	Label(lbl + "j")
	CMPQ(j, U32(ju*c.lanes))
	JB(LabelRef(lbl + "j1"))
	for u := range ju {
		wv := c.vec()
		c.loadW(Mem{Base: wp, Disp: u * c.lanes * c.wBytes()}, wv, false)
		for r := range nr {
			c.fma(c.row(yp, r, u*c.lanes), wv, acc[u][r], false)
		}
	}
	ADDQ(U32(ju*c.lanes*c.wBytes()), wp)
	ADDQ(U32(ju*c.lanes*c.esz), yp)
	SUBQ(U32(ju*c.lanes), j)
	JMP(LabelRef(lbl + "j"))

	// At most one whole vector is left, an even one (acc[0]); the masked
	// tail after it is odd (acc[1]), else even: each vector goes to the
	// accumulator of its parity, so zeros in w past a shorter n leave a
	// sum as it was (dotRowsM).
	vector := func(u int, masked bool) {
		wv := c.vec()
		c.loadW(Mem{Base: wp}, wv, masked)
		for r := range nr {
			c.fma(c.row(yp, r, 0), wv, acc[u][r], masked)
		}
	}
	tail := func(u int) { // AVX-512: the masked vector, if any
		TESTQ(j, j)
		JZ(LabelRef(lbl + "red"))
		vector(u, true)
	}
	Label(lbl + "j1")
	CMPQ(j, U32(c.lanes))
	JB(LabelRef(lbl + "jt"))
	vector(0, false)
	ADDQ(U32(c.lanes*c.wBytes()), wp)
	ADDQ(U32(c.lanes*c.esz), yp)
	SUBQ(U32(c.lanes), j)
	if c.zmm {
		tail(1)
		JMP(LabelRef(lbl + "red"))
	}

	Label(lbl + "jt")
	if c.zmm {
		tail(0)
	}

	Label(lbl + "red")
	for step := 1; step < ju; step *= 2 {
		for u := 0; u+step < ju; u += 2 * step {
			for r := range nr {
				VADDPS(acc[u+step][r], acc[u][r], acc[u][r])
			}
		}
	}
	// Each row's vector down to four lanes.
	xs := make([]VecVirtual, nr)
	for r := range nr {
		xs[r] = c.toXMM(acc[0][r])
	}
	if nr == 1 {
		x, t := xs[0], XMM()
		VPERMILPS(U8(0x4e), x, t)
		VADDPS(t, x, x)
		VPERMILPS(U8(0xb1), x, t)
		VADDSS(t, x, x)
		VMOVSS(x, Mem{Base: dst})
		return
	}
	// Four rows a, b, c, d: interleave and add to [a b c d].
	lo, hi := XMM(), XMM()
	VUNPCKLPS(xs[1], xs[0], lo) // a0 b0 a1 b1
	VUNPCKHPS(xs[1], xs[0], hi) // a2 b2 a3 b3
	VADDPS(hi, lo, xs[0])
	VUNPCKLPS(xs[3], xs[2], lo)
	VUNPCKHPS(xs[3], xs[2], hi)
	VADDPS(hi, lo, xs[2])
	VSHUFPS(U8(0x44), xs[2], xs[0], lo)
	VSHUFPS(U8(0xee), xs[2], xs[0], hi)
	VADDPS(hi, lo, lo)
	VMOVUPS(lo, Mem{Base: dst})
}

// toXMM adds the 128-bit quarters (or halves) of v into an xmm register.
func (c *rowsISA) toXMM(v VecVirtual) VecVirtual {
	y := v.(Vec).AsY()
	if c.zmm {
		t := YMM()
		VEXTRACTF64X4(U8(1), v, t)
		VADDPS(t, v.(Vec).AsY(), t)
		y = t
	}
	x := XMM()
	if c.zmm {
		VEXTRACTF32X4(U8(1), y, x)
	} else {
		VEXTRACTF128(U8(1), y, x)
	}
	VADDPS(x, y.(Vec).AsX(), x)
	return x
}
