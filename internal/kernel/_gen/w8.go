package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The W8 kernels compute one tile of R weight rows by TT tokens over the
// whole of K, against activations prepared by the Go side (w8Prep in
// w8_amd64.go). Per token and per group of 2 blocks (64 values of K) the
// prepared record is 128 bytes:
//
//	[0,64)    Q of the 2 blocks
//	[64,128)  D of each block, 8 times (one per int32 lane of the block)
//
// and after the groups, C = Σ_b -128*D[b]*Sum[b] (float32, padded to 64
// bytes).
//
// AVX-512 VNNI multiplies the stored U = q+128 (unsigned) by Q (signed)
// with VPDPBUSD: the 8 lanes of a block add up to Σ U*Q = Σ q*Q +
// 128*Sum, exact in int32; each block's lanes are scaled by D in float
// and summed, and C, which does not depend on the row, takes the
// 128*Sum terms back out once per row (one 64-byte load per group fewer
// than starting each block's lanes at -16*Sum). AVX2 has no 4-way byte
// dot product without saturation, so it takes the sign trick: q =
// U^0x80, VPMADDUBSW(|q|, Q*sign(q)) sums pairs of at most 128*127 each,
// which needs Q > -128 (the Go side checks), and does not read C. The row
// scale multiplies the final sum.
//
// The AVX-512 kernels take K in quads of 4 groups first (w8QuadBytes):
// each row's 256 bytes transposed in registers, so that four VPDPBUSD
// leave in every int32 lane 16 values of one block, converted and scaled
// once (where a group converts after each VPDPBUSD); the groups left over
// follow in the 128-byte form. Every AVX-512 kernel computes a (row,
// token) with the same instructions in the same order (one accumulator,
// quads then groups in order, then hsum, + C, * scale), so its bits do
// not depend on the tile or the call that took it: a token decoded alone
// or in a batch gives the same logits.
const w8RecBytes = 128

// w8QuadBytes is the size of the AVX-512 kernels' record of a quad of 4
// groups (8 blocks, 256 values of K), which come first, as many whole
// quads as K has; the groups left follow in the 128-byte form:
//
//	[0,256)    Q in 4 vectors, dword (L, r) of vector d (L the 128-bit
//	           lane, r the dword in it) holding Q[64r+16L+4d..+4]
//	[256,320)  D of the block of each dword: lane 4L+r has D[2r+L/2]
//
// the order in which the kernel transposes each row's 256 bytes, so that
// each lane adds 16 values of one block in int32 before its one scale.
const w8QuadBytes = 320

// w8ZmmShapes and w8YmmShapes are the tiles generated per ISA; the Go
// side decomposes any row and token count into them.
var (
	w8ZmmShapes = []q4Shape{{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}, {4, 2}, {1, 3}, {2, 3}, {4, 3}, {1, 4}, {2, 4}, {1, 5}, {1, 6}, {1, 7}, {1, 8}}
	w8YmmShapes = []q4Shape{{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}, {1, 3}, {2, 3}, {1, 4}, {2, 4}}
)

// w8Bytes80 is 32 bytes of 0x80 (AVX2; its VPMADDWD ones are onesW).
var w8Bytes80 Mem

func genW8() {
	w8Bytes80 = GLOBL("w8x80", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0x80808080))
	}
	for _, s := range w8ZmmShapes {
		w8Kernel(true, s.R, s.TT, false)
	}
	for _, s := range w8YmmShapes {
		w8Kernel(false, s.R, s.TT, false)
	}
	for _, pf := range []bool{false, true} {
		prefetching = pf
		w8Kernel(true, 1, 1, true)
		for q := 1; q <= w8ResidentQuads; q++ {
			w8KernelResident(q)
		}
		w8Kernel(false, 1, 1, true)
	}
	prefetching = false
}

// w8ResidentQuads is the most quads whose activations the AVX-512 row
// loops hold in registers (w8KernelResident): 4 vectors each.
const w8ResidentQuads = 4

// w8Name is the Go name of a generated kernel.
func w8Name(zmm bool, R, TT int) string {
	isa := "Avx2"
	if zmm {
		isa = "Vnni"
	}
	return fmt.Sprintf("w8%s%dx%d", isa, R, TT)
}

// w8RowsName is the Go name of a row-loop decode kernel.
func w8RowsName(zmm bool) string {
	if zmm {
		return "w8VnniRows"
	}
	return "w8Avx2Rows"
}

// w8Kernel emits the kernel of an R-row by TT-token tile, or with rowLoop
// the decode kernel over n consecutive rows (as q4Kernel's).
func w8Kernel(zmm bool, R, TT int, rowLoop bool) { w8KernelRes(zmm, R, TT, rowLoop, 0) }

// w8KernelResident emits the AVX-512 decode row loop that holds the
// token's activations of its first res quads in registers (K of res
// quads or more; see _gen/q4resident.go for why): per quad of every
// row it then loads the row's 4 lines of weights and the quad's D,
// where the general loop also loads 4 vectors of activations. The quads
// after them, the groups left and the tail go as in the general loop,
// and every row takes the same instructions in the same order on the
// same integers, so its bits are the general loop's.
func w8KernelResident(res int) { w8KernelRes(true, 1, 1, true, res) }

func w8KernelRes(zmm bool, R, TT int, rowLoop bool, res int) {
	name := w8Name(zmm, R, TT)
	if res > 0 {
		name = fmt.Sprintf("w8VnniRowsQ%d", res) + prefetchSuffix()
		TEXT(name, NOSPLIT, "func(u *byte, rstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s is w8VnniRows for K of %d quads or more, the token's activations of the first %d held in registers (see _gen/w8.go).", name, res, res))
	} else if rowLoop {
		name = w8RowsName(zmm) + prefetchSuffix()
		TEXT(name, NOSPLIT, "func(u *byte, rstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes n consecutive rows of an 8-bit product (n a positive multiple of 4) for one token, one row at a time (see the layout in _gen/w8.go).", name))
	} else {
		TEXT(name, NOSPLIT, "func(u *byte, rstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes a %d-row by %d-token tile of an 8-bit product (see the layout in _gen/w8.go).", name, R, TT))
	}

	va := newVecAlloc(zmm)
	vec, put := va.get, va.put

	var rows rowAddr
	var cnt, xp, uRow, tail, dst, rs, left Register
	var tok func(t, off int) Mem
	if rowLoop {
		uRow = Load(Param("u"), GP64())
		rows = rowAddr{base: []Register{GP64()}}
		xp = GP64()
		tok = func(_, off int) Mem { return Mem{Base: xp, Disp: off} }
		tail = Load(Param("tail"), GP64())
		left = Load(Param("n"), GP64())
		SHRQ(U8(2), left)
	} else {
		rows = newRowAddr(Load(Param("u"), GP64()), Load(Param("rstr"), GP64()), R)
		cnt = Load(Param("ng"), GP64())
		xp, tok = tokenRecords(TT)
	}

	// zr stays zero: the block sums start from it (VPXORD(d, d, d) would
	// count as a read of d for avo, keeping d live from the start).
	var zr V
	if zmm {
		zr = vec()
		VPXORD(zr, zr, zr)
	}
	acc := make([][]V, R)
	for r := range acc {
		if rowLoop {
			break // four accumulators of their own, below
		}
		acc[r] = make([]V, TT)
		for t := range acc[r] {
			acc[r][t] = vec()
			if zmm {
				VPXORD(acc[r][t], acc[r][t], acc[r][t])
			} else {
				VXORPS(acc[r][t], acc[r][t], acc[r][t])
			}
		}
	}

	// stepZmm emits the 64 weight bytes (half: the first 32) of every row
	// at the group's start against the group's record.
	stepZmm := func(half bool) {
		if rowLoop {
			prefetchLines(rows.at(0, 0), 1)
		}
		w := make([]V, R)
		for r := range w {
			w[r] = vec()
			if half {
				// A 32-byte load clears the upper half; the
				// padded record makes its products zero.
				VMOVDQU32(rows.at(r, 0), w[r].AsY())
			} else {
				VMOVDQU32(rows.at(r, 0), w[r])
			}
		}
		for t := 0; t < TT; t++ {
			if R == 1 {
				// One row: the record's fields as memory operands.
				d := vec()
				VPXORD(zr, zr, d)
				vpdpbusd(tok(t, 0), w[0], d)
				VCVTDQ2PS(d, d)
				VFMADD231PS(tok(t, 64), d, acc[0][t])
				put(d)
				continue
			}
			xq, dv := vec(), vec()
			VMOVDQU32(tok(t, 0), xq)
			VMOVUPS(tok(t, 64), dv)
			for r := 0; r < R; r++ {
				d := vec()
				VPXORD(zr, zr, d)
				vpdpbusd(xq, w[r], d)
				VCVTDQ2PS(d, d)
				VFMADD231PS(dv, d, acc[r][t])
				put(d)
			}
			put(xq, dv)
		}
		put(w...)
	}
	// resident[q] holds the first token's activations of quad q (its
	// 4 vectors of Q) for the first res quads.
	var resident [][]V
	if res > 0 {
		xr := Load(Param("x"), GP64())
		for q := range res {
			resident = append(resident, []V{vec(), vec(), vec(), vec()})
			for k := range 4 {
				VMOVDQU32(Mem{Base: xr, Disp: q*w8QuadBytes + 64*k}, resident[q][k])
			}
		}
	}
	// stepQuad (AVX-512) emits the 256 weight bytes (8 blocks) of every
	// row at the quad's start against the quad's record: the row's four
	// vectors transposed as 4x4 dwords in each 128-bit lane, so that
	// dword (L, r) of vector d holds bytes 64r+16L+4d.., and four
	// VPDPBUSD leave in each lane the sum of 16 bytes of one block.
	// With act, the activations are those registers (one row, one token).
	stepQuadAct := func(act []V, rowOff, recOff int) {
		prefetchLines(rows.at(0, rowOff), 4)
		w := make([]V, 4)
		for k := range w {
			w[k] = vec()
			VMOVDQU32(rows.at(0, rowOff+64*k), w[k])
		}
		o := transposeDwords(vec, w)
		d := vec()
		VPXORD(zr, zr, d)
		for k := range 4 {
			vpdpbusd(act[k], o[k], d)
		}
		VCVTDQ2PS(d, d)
		VFMADD231PS(tok(0, recOff+256), d, acc[0][0])
		put(d)
		put(o...)
	}
	stepQuad := func() {
		if rowLoop {
			prefetchLines(rows.at(0, 0), 4)
		}
		// Rows in pairs: both transposed, then each token's record
		// loaded once for the two (the loads bound this loop).
		for r0 := 0; r0 < R; r0 += 2 {
			pair := min(2, R-r0)
			o := make([][]V, pair)
			for i := range o {
				w := make([]V, 4)
				for k := range w {
					w[k] = vec()
					VMOVDQU32(rows.at(r0+i, 64*k), w[k])
				}
				o[i] = transposeDwords(vec, w)
			}
			for t := 0; t < TT; t++ {
				if pair == 1 {
					d := vec()
					VPXORD(zr, zr, d)
					for k := range 4 {
						vpdpbusd(tok(t, 64*k), o[0][k], d)
					}
					VCVTDQ2PS(d, d)
					VFMADD231PS(tok(t, 256), d, acc[r0][t])
					put(d)
					continue
				}
				xq := []V{vec(), vec(), vec(), vec()}
				for k := range xq {
					VMOVDQU32(tok(t, 64*k), xq[k])
				}
				for i := range pair {
					d := vec()
					VPXORD(zr, zr, d)
					for k := range 4 {
						vpdpbusd(xq[k], o[i][k], d)
					}
					VCVTDQ2PS(d, d)
					VFMADD231PS(tok(t, 256), d, acc[r0+i][t])
					put(d)
				}
				put(xq...)
			}
			for i := range o {
				put(o[i]...)
			}
		}
	}
	// stepYmm emits the 32 weight bytes (one block) at offset wo of the
	// group for every row.
	stepYmm := func(wo int) {
		for r := 0; r < R; r++ {
			q, a := vec(), vec()
			VMOVDQU(rows.at(r, wo), q)
			VPXOR(w8Bytes80, q, q)
			VPABSB(q, a)
			for t := 0; t < TT; t++ {
				s := vec()
				VMOVDQU(tok(t, wo), s)
				VPSIGNB(q, s, s)
				VPMADDUBSW(s, a, s)
				VPMADDWD(onesW, s, s)
				VCVTDQ2PS(s, s)
				VFMADD231PS(tok(t, 64+wo), s, acc[r][t])
				put(s)
			}
			put(q, a)
		}
	}

	// rowBody emits the whole of K for the tile's rows, its labels
	// suffixed by sfx, ending at label "reduce"+sfx.
	rowBody := func(sfx string) {
		if zmm {
			// Quads of 4 groups first, then the groups left (cnt).
			quads := GP64()
			MOVQ(cnt, quads)
			SHRQ(U8(2), quads)
			ANDQ(U8(3), cnt)
			Label("quad" + sfx)
			TESTQ(quads, quads)
			JZ(LabelRef("loop" + sfx))
			stepQuad()
			rows.add(256)
			ADDQ(U32(w8QuadBytes), xp)
			DECQ(quads)
			JMP(LabelRef("quad" + sfx))
		}
		Label("loop" + sfx)
		TESTQ(cnt, cnt)
		JZ(LabelRef("tail" + sfx))
		if zmm {
			stepZmm(false)
		} else {
			if rowLoop {
				prefetchLines(rows.at(0, 0), 1)
			}
			stepYmm(0)
			stepYmm(32)
		}
		rows.add(64)
		ADDQ(U32(w8RecBytes), xp)
		DECQ(cnt)
		JMP(LabelRef("loop" + sfx))

		Label("tail" + sfx)
		if !rowLoop {
			tail = Load(Param("tail"), GP64())
		}
		TESTQ(tail, tail)
		JZ(LabelRef("reduce" + sfx))
		if zmm {
			stepZmm(true)
		} else {
			stepYmm(0)
		}
		Label("reduce" + sfx)
	}
	var bias func(x V) // AVX-512 adds C to the row sums
	if zmm {
		bias = func(x V) {
			c := vec()
			VBROADCASTSS(w8C(), c.AsX())
			VADDPS(c.AsX(), x.AsX(), x.AsX())
		}
	}
	if rowLoop {
		rowQuads(va, func(j int, a V) {
			acc = [][]V{{a}}
			MOVQ(uRow, rows.base[0])
			Load(Param("x"), xp)
			cnt = Load(Param("ng"), GP64())
			if res > 0 {
				for q := range res {
					stepQuadAct(resident[q], 256*q, q*w8QuadBytes)
				}
				rows.add(256 * res)
				ADDQ(U32(res*w8QuadBytes), xp)
				SUBQ(U8(4*res), cnt)
			}
			rowBody(fmt.Sprint(j))
			ADDQ(Load(Param("rstr"), GP64()), uRow)
		}, true, left, bias)
		return
	}
	rowBody("")
	var cAt func(t int) Mem
	if zmm {
		// C of token t: after its groups.
		c := w8C()
		cAt = func(t int) Mem {
			m := tok(t, 0)
			m.Base, m.Disp = c.Base, c.Disp
			return m
		}
	}
	dst = Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	rs = Load(Param("rs"), GP64())
	for t := 0; t < TT; t++ {
		for r := 0; r < R; r++ {
			xr := hsum(zmm, va, acc[r][t])
			x := xr.AsX()
			if zmm {
				VADDSS(cAt(t), x, x)
			}
			VMULSS(Mem{Base: rs, Disp: 4 * r}, x, x)
			VMOVSS(x, Mem{Base: dst, Disp: 4 * r})
			va.put(xr)
		}
		if t+1 < TT {
			ADDQ(ldd, dst)
		}
	}
	VZEROUPPER()
	RET()
}

// w8C addresses C in the first token's AVX-512 records: param x plus
// its quads of w8QuadBytes (ng/4) and its groups left (ng%4, and the
// tail) of w8RecBytes.
func w8C() Mem {
	ng := Load(Param("ng"), GP64())
	c := GP64()
	MOVQ(ng, c)
	ANDQ(U8(3), c)
	ADDQ(Load(Param("tail"), GP64()), c)
	SHLQ(U8(7), c) // w8RecBytes
	SHRQ(U8(2), ng)
	IMUL3Q(U32(w8QuadBytes), ng, ng)
	ADDQ(ng, c)
	ADDQ(Load(Param("x"), GP64()), c)
	return Mem{Base: c}
}

// hsum adds the lanes of a (given back to va) into the low lane of the
// returned register's xmm view.
func hsum(zmm bool, va *vecAlloc, a V) V { return hreduce(zmm, va, a, false) }

// hreduce is hsum, or with max the largest of the lanes (VMAXPS).
func hreduce(zmm bool, va *vecAlloc, a V, max bool) V {
	op, opss := VADDPS, VADDSS
	if max {
		op, opss = VMAXPS, VMAXSS
	}
	var y Register = a
	if zmm {
		yy := YMM()
		VEXTRACTF64X4(U8(1), a, yy)
		op(yy, a.AsY(), yy)
		y = yy
	}
	xr, xr2 := va.get(), va.get()
	x, x2 := xr.AsX(), xr2.AsX()
	if zmm {
		VEXTRACTF32X4(U8(1), y, x)
	} else {
		VEXTRACTF128(U8(1), y, x)
	}
	op(x, y.(Vec).AsX(), x)
	VPERMILPS(U8(0x4e), x, x2)
	op(x2, x, x)
	VPERMILPS(U8(0xb1), x, x2)
	opss(x2, x, x)
	va.put(xr2, a)
	return xr
}

// hsum4 adds the lanes of each of the four registers a (AVX-512, given
// back to va) into lane j of the returned register's xmm view. Each sum
// is added in hsum's order, so a row's result does not depend on whether
// a four-row or a one-row kernel computed it.
func hsum4(va *vecAlloc, a []V) V {
	x := make([]V, 4)
	for j, r := range a {
		if !va.zmm {
			// AVX2: the two 128-bit halves, as hsum
			x[j] = va.get()
			VEXTRACTF128(U8(1), r, x[j].AsX())
			VADDPS(x[j].AsX(), r.AsX(), x[j].AsX())
			va.put(r)
			continue
		}
		y := YMM()
		VEXTRACTF64X4(U8(1), r, y)
		VADDPS(y, r.AsY(), y)
		x[j] = va.get()
		VEXTRACTF32X4(U8(1), y, x[j].AsX())
		VADDPS(x[j].AsX(), y.AsX(), x[j].AsX())
		va.put(r)
	}
	// pair j: lanes (0+2, 1+3) of rows 2j and 2j+1, interleaved
	pair := func(p, q V) V {
		lo, hi := va.get(), va.get()
		VUNPCKLPS(q.AsX(), p.AsX(), lo.AsX())
		VUNPCKHPS(q.AsX(), p.AsX(), hi.AsX())
		VADDPS(hi.AsX(), lo.AsX(), lo.AsX())
		va.put(hi, p, q)
		return lo
	}
	u01, u23 := pair(x[0], x[1]), pair(x[2], x[3])
	v0, v1 := va.get(), va.get()
	VMOVLHPS(u23.AsX(), u01.AsX(), v0.AsX())
	VMOVHLPS(u01.AsX(), u23.AsX(), v1.AsX())
	VADDPS(v1.AsX(), v0.AsX(), v0.AsX())
	va.put(v1, u01, u23)
	return v0
}

// rowQuads emits the loop of the row-range decode kernels: four
// rows one after another, row j computed by row(j, acc) into acc (zeroed
// here), then their four sums reduced together (hsum4), offset by bias
// (unless nil), multiplied by the row scales at param rs (when scaled)
// and stored at param dst, while quads remain.
func rowQuads(va *vecAlloc, row func(j int, acc V), scaled bool, quads Register, bias func(x V)) {
	Label("quad")
	quad := make([]V, 4)
	for j := range quad {
		quad[j] = va.get()
		if va.zmm {
			VPXORD(quad[j], quad[j], quad[j])
		} else {
			VXORPS(quad[j], quad[j], quad[j])
		}
		row(j, quad[j])
	}
	x := hsum4(va, quad)
	if bias != nil {
		bias(x)
	}
	// dst and rs live in their argument slots, moved on there: the row
	// loops need every general register they have.
	if scaled {
		rs := Load(Param("rs"), GP64())
		VMULPS(Mem{Base: rs}, x.AsX(), x.AsX())
		ADDQ(U8(16), rs)
		Store(rs, Param("rs"))
	}
	dst := Load(Param("dst"), GP64())
	VMOVUPS(x.AsX(), Mem{Base: dst})
	ADDQ(U8(16), dst)
	Store(dst, Param("dst"))
	DECQ(quads)
	JNZ(LabelRef("quad"))
	VZEROUPPER()
	RET()
}

// transposeDwords transposes the dwords of the four vectors w within
// each 128-bit lane into four new ones (AVX-512: avo allocates them):
// dword g of lane L of result j is dword j of lane L of w[g].
func transposeDwords(vec func() V, w []V) []V {
	t0, t1, t2, t3 := vec(), vec(), vec(), vec()
	VPUNPCKLDQ(w[1], w[0], t0)
	VPUNPCKHDQ(w[1], w[0], t1)
	VPUNPCKLDQ(w[3], w[2], t2)
	VPUNPCKHDQ(w[3], w[2], t3)
	o := []V{vec(), vec(), vec(), vec()}
	VPUNPCKLQDQ(t2, t0, o[0])
	VPUNPCKHQDQ(t2, t0, o[1])
	VPUNPCKLQDQ(t3, t1, o[2])
	VPUNPCKHQDQ(t3, t1, o[3])
	return o
}
