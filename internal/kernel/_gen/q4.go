package main

import (
	"fmt"
	"os"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The Q4 kernels compute one tile of R weight rows by TT tokens over the
// whole of K, against activations prepared by the Go side (q4prep in
// q4_amd64.go). Per token and per group of 4 blocks the prepared record
// is 256 bytes:
//
//	[0,64)    Q of the 4 blocks' first halves  (x[32b+i], i < 16)
//	[64,128)  Q of the 4 blocks' second halves (x[32b+16+i])
//	[128,192) D of each block, 4 times (one per int32 lane of the block)
//	[192,256) -2*Sum of each block, 4 times
//
// so that 16 weight bytes (one block) expand by a mask and a shift into
// the low and high nibbles that line up with the two halves. The four
// int32 lanes of a block sum u*x over the block minus 8*Sum in all, the
// exact integer of the block; each lane is then scaled by sc*D in float.
const recBytes = 256

// q4Shape is one tile shape of a generated kernel.
type q4Shape struct{ R, TT int }

// q4ZmmShapes and q4YmmShapes are the tiles generated per ISA; the Go
// side decomposes any row and token count into them.
var (
	q4ZmmShapes = []q4Shape{{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}, {4, 2}, {1, 3}, {2, 3}, {4, 3}}
	q4YmmShapes = []q4Shape{{1, 1}, {2, 1}, {4, 1}, {5, 1}, {1, 2}, {2, 2}, {4, 2}}
)

func genQ4() {
	if os.Getenv("Q4ONLY") != "" {
		var z, l bool
		var r, t int
		fmt.Sscanf(os.Getenv("Q4ONLY"), "%t %t %d %d", &z, &l, &r, &t)
		q4Kernel(z, l, r, t, false)
		return
	}
	genQ4ChunkConsts()
	for _, lpbq := range []bool{true, false} {
		for _, s := range q4ZmmShapes {
			if lpbq {
				q4ChunkKernel(false, s.R, s.TT) // in chunks (q4chunk.go)
			} else {
				q4Kernel(true, false, s.R, s.TT, false)
			}
		}
		for _, s := range q4YmmShapes {
			q4Kernel(false, lpbq, s.R, s.TT, false)
		}
		if lpbq {
			q4ChunkKernel(true, 1, 1)
		} else {
			q4Kernel(true, false, 1, 1, true)
		}
	}
}

// q4Name is the Go name of a generated kernel.
func q4Name(zmm, lpbq bool, R, TT int) string {
	isa, form := "Avx2", "Scales"
	if zmm {
		isa = "Vnni"
	}
	if lpbq {
		form = "Codes"
	}
	return fmt.Sprintf("q4%s%s%dx%d", isa, form, R, TT)
}

// q4RowsName is the Go name of an AVX-512 row-loop decode kernel.
func q4RowsName(lpbq bool) string {
	if lpbq {
		return "q4VnniCodesRows"
	}
	return "q4VnniScalesRows"
}

// tokenRecords loads the kernels' prepared activations: the register
// holding the first token's records (parameter x) and the addressing of
// byte off of token t's records (token stride parameter xs), for TT
// tokens.
func tokenRecords(TT int) (Register, func(t, off int) Mem) {
	xp := Load(Param("x"), GP64())
	var xs, xs3 Register
	if TT > 1 {
		xs = Load(Param("xs"), GP64())
	}
	if TT > 3 {
		xs3 = GP64()
		LEAQ(Mem{Base: xs, Index: xs, Scale: 2}, xs3)
	}
	return xp, func(t, off int) Mem {
		m := Mem{Base: xp, Disp: off}
		switch t {
		case 1:
			m.Index, m.Scale = xs, 1
		case 2:
			m.Index, m.Scale = xs, 2
		case 3:
			m.Index, m.Scale = xs3, 1
		}
		return m
	}
}

// rowAddr addresses row r of a [rows][stride] array from bases holding
// rows 0 and 4 (and stride, 3*stride registers).
type rowAddr struct {
	base      []Register
	str, str3 Register
}

func (a rowAddr) at(r, off int) Mem {
	m := Mem{Base: a.base[r/4], Disp: off}
	switch r % 4 {
	case 1:
		m.Index, m.Scale = a.str, 1
	case 2:
		m.Index, m.Scale = a.str, 2
	case 3:
		m.Index, m.Scale = a.str3, 1
	}
	return m
}

func newRowAddr(p, str Register, R int) rowAddr {
	a := rowAddr{base: []Register{p}, str: str}
	if R > 2 {
		a.str3 = GP64()
		LEAQ(Mem{Base: str, Index: str, Scale: 2}, a.str3)
	}
	if R > 4 {
		p4 := GP64()
		LEAQ(Mem{Base: p, Index: str, Scale: 4}, p4)
		a.base = append(a.base, p4)
	}
	return a
}

func (a rowAddr) add(n int) {
	for _, b := range a.base {
		ADDQ(U32(n), b)
	}
}

// q4Kernel emits the kernel of an R-row by TT-token tile. With rowLoop
// (AVX-512, one row by one token) it emits instead the decode kernel
// that walks n consecutive rows in one call, one row after the other:
// each worker still reads one sequential stream, and the call, the
// argument moves and the tail masks are paid once per call rather than
// once per row, which on narrow rows (K = 576) cost as much as the row's
// arithmetic.
func q4Kernel(zmm, lpbq bool, R, TT int, rowLoop bool) {
	if zmm && lpbq {
		panic("the AVX-512 LPBQ kernels are q4ChunkKernel's")
	}
	name := q4Name(zmm, lpbq, R, TT)
	if rowLoop {
		name = q4RowsName(lpbq)
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes n consecutive rows (n a positive multiple of 4) of a 4-bit product for one token, one row at a time (see the layout in _gen/q4.go).", name))
	} else {
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes a %d-row by %d-token tile of a 4-bit product (see the layout in _gen/q4.go).", name, R, TT))
	}

	va := newVecAlloc(zmm)
	vec, put := va.get, va.put
	width := 32 // bytes of weights per step (2 blocks on ymm, 4 on zmm)
	if zmm {
		width = 64
	}
	blocks := width / 16

	var nib, sc rowAddr
	var nibRow, scRow Register // row loop: the current row's start
	var cnt, xp Register
	var tok func(t, off int) Mem
	if rowLoop {
		nibRow, scRow = Load(Param("nib"), GP64()), Load(Param("sc"), GP64())
		nib, sc = rowAddr{base: []Register{GP64()}}, rowAddr{base: []Register{GP64()}}
		xp = GP64()
		tok = func(_, off int) Mem { return Mem{Base: xp, Disp: off} }
	} else {
		nib = newRowAddr(Load(Param("nib"), GP64()), Load(Param("rstr"), GP64()), R)
		sc = newRowAddr(Load(Param("sc"), GP64()), Load(Param("scstr"), GP64()), R)
		cnt = Load(Param("ng"), GP64())
		xp, tok = tokenRecords(TT)
	}

	// Constants: the nibble mask, the lane index of each block's scale,
	// and for AVX2 the int16 ones of VPMADDWD.
	t32 := GP32()
	MOVL(U32(0x0f0f0f0f), t32)
	m0f := vec()
	VPBROADCASTD(t32, m0f)
	idx := vec()
	if zmm {
		VMOVDQU32(permIdx, idx)
	} else {
		VMOVDQU(permIdx, idx)
	}
	var ones V
	if !zmm {
		ones = vec()
		MOVL(U32(0x00010001), t32)
		VPBROADCASTD(t32, ones)
	}

	var kn, kb Register
	var tail, dst, rs, rows Register
	if rowLoop {
		// The tail masks once for all rows, then the row loop.
		kn, kb = K(), K()
		tail = Load(Param("tail"), GP64())
		TESTQ(tail, tail)
		JZ(LabelRef("rows"))
		tailMasks(tail, kn, kb)
		Label("rows")
		rows = Load(Param("n"), GP64())
		SHRQ(U8(2), rows)
	}

	acc := make([][]V, R)
	if !rowLoop {
		for r := range acc {
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
	}
	// loadRow expands row r's weights at byte offset wo of the current
	// group into low and high nibbles, and its block scales into one
	// float per lane.
	loadRow := func(r, wo, nblk int) (lo, hi, cs V) {
		w := vec()
		lo, hi = vec(), vec()
		scOff := wo / 16 // block index within the group
		switch {
		case zmm && nblk < blocks:
			VMOVDQU8_Z(nib.at(r, wo), kn, w)
		case zmm:
			VMOVDQU32(nib.at(r, wo), w)
		case nblk == 1:
			VMOVDQU(nib.at(r, wo), w.AsX())
		default:
			VMOVDQU(nib.at(r, wo), w)
		}
		VPSRLW(U8(4), w, hi)
		if zmm {
			VPANDD(w, m0f, lo)
			VPANDD(hi, m0f, hi)
		} else {
			VPAND(w, m0f, lo)
			VPAND(hi, m0f, hi)
		}
		put(w)
		cs = vec()
		// Block scales of this row, one per lane: float codes or scales.
		if lpbq {
			switch {
			case nblk == 1:
				MOVBLZX(sc.at(r, scOff), t32)
				VMOVD(t32, cs.AsX())
			case nblk == 2:
				MOVWLZX(sc.at(r, scOff), t32)
				VMOVD(t32, cs.AsX())
				VPMOVZXBD(cs.AsX(), cs.AsX())
			default:
				VPMOVZXBD(sc.at(r, scOff), cs.AsX())
			}
			VPERMD(cs, idx, cs)
			VCVTDQ2PS(cs, cs)
		} else {
			switch {
			case zmm && nblk < blocks:
				VMOVUPS_Z(sc.at(r, 4*scOff), kb, cs)
			case zmm:
				VBROADCASTF32X4(sc.at(r, 4*scOff), cs)
			case nblk == 1:
				VMOVSS(sc.at(r, 4*scOff), cs.AsX())
			case nblk == 2:
				VMOVSD(sc.at(r, 4*scOff), cs.AsX())
			default:
				VMOVUPS(sc.at(r, 4*scOff), cs.AsX())
			}
			VPERMPS(cs, idx, cs)
		}
		return lo, hi, cs
	}

	// step emits one step over `width` weight bytes of every row at
	// byte offset wo of the current group (record offset ro); nblk < blocks
	// marks a tail: masked (zmm) or narrower (ymm) weight loads.
	step := func(wo, nblk int) {
		ro := wo
		if zmm && TT > 1 {
			// Several tokens: every row's weights stay in registers
			// while each token's two halves and block scales are
			// loaded once for all rows (loads, not arithmetic, bound
			// the row-by-row order on AVX-512).
			lo, hi, cs := make([]V, R), make([]V, R), make([]V, R)
			for r := 0; r < R; r++ {
				lo[r], hi[r], cs[r] = loadRow(r, wo, nblk)
			}
			for t := 0; t < TT; t++ {
				qlo, qhi, dv := vec(), vec(), vec()
				VMOVDQU32(tok(t, ro+0), qlo)
				VMOVDQU32(tok(t, ro+64), qhi)
				VMOVUPS(tok(t, ro+128), dv)
				for r := 0; r < R; r++ {
					d, s := vec(), vec()
					VMOVDQU32(tok(t, ro+192), d)
					vpdpbusd(qlo, lo[r], d)
					vpdpbusd(qhi, hi[r], d)
					VCVTDQ2PS(d, d)
					VMULPS(dv, cs[r], s)
					VFMADD231PS(d, s, acc[r][t])
					put(d, s)
				}
				put(qlo, qhi, dv)
			}
			put(lo...)
			put(hi...)
			put(cs...)
			return
		}
		for r := 0; r < R; r++ {
			lo, hi, cs := loadRow(r, wo, nblk)
			for t := 0; t < TT; t++ {
				d := vec()
				if zmm {
					VMOVDQU32(tok(t, ro+192), d)
					vpdpbusd(tok(t, ro+0), lo, d)
					vpdpbusd(tok(t, ro+64), hi, d)
				} else {
					p := vec()
					VPMADDUBSW(tok(t, ro+0), lo, d)
					VPMADDUBSW(tok(t, ro+64), hi, p)
					VPADDW(p, d, d)
					VPMADDWD(ones, d, d)
					VPADDD(tok(t, ro+192), d, d)
					put(p)
				}
				s := vec()
				VCVTDQ2PS(d, d)
				VMULPS(tok(t, ro+128), cs, s)
				VFMADD231PS(d, s, acc[r][t])
				put(d, s)
			}
			put(lo, hi, cs)
		}
	}

	// rowBody emits the whole of K for the tile's rows, its labels
	// suffixed by sfx, ending at label "reduce"+sfx.
	rowBody := func(sfx string) {
		Label("loop" + sfx)
		TESTQ(cnt, cnt)
		JZ(LabelRef("tail" + sfx))
		for h := 0; h < 64/width; h++ {
			step(h*width, blocks)
		}
		nib.add(64)
		if lpbq {
			sc.add(4)
		} else {
			sc.add(16)
		}
		ADDQ(U32(recBytes), xp)
		DECQ(cnt)
		JMP(LabelRef("loop" + sfx))

		Label("tail" + sfx)
		if !rowLoop {
			tail = Load(Param("tail"), GP64())
		}
		if zmm {
			TESTQ(tail, tail)
			JZ(LabelRef("reduce" + sfx))
			if !rowLoop {
				kn, kb = K(), K()
				tailMasks(tail, kn, kb)
			}
			step(0, 3)
		} else {
			CMPQ(tail, U8(2))
			JB(LabelRef("tail1" + sfx))
			step(0, 2)
			Label("tail1" + sfx)
			TESTQ(U32(1), tail)
			JZ(LabelRef("reduce" + sfx))
			CMPQ(tail, U8(1))
			JE(LabelRef("tail1at0" + sfx))
			step(32, 1)
			JMP(LabelRef("reduce" + sfx))
			Label("tail1at0" + sfx)
			step(0, 1)
		}
		Label("reduce" + sfx)
	}
	if rowLoop {
		rowQuads(va, func(j int, a V) {
			acc = [][]V{{a}}
			MOVQ(nibRow, nib.base[0])
			MOVQ(scRow, sc.base[0])
			Load(Param("x"), xp)
			cnt = Load(Param("ng"), GP64())
			rowBody(fmt.Sprint(j))
			ADDQ(Load(Param("rstr"), GP64()), nibRow)
			ADDQ(Load(Param("scstr"), GP64()), scRow)
		}, lpbq, rows, nil)
		return
	}
	rowBody("")
	put(m0f)
	if idx != nil {
		put(idx)
	}
	if ones != nil {
		put(ones)
	}
	dst = Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	if lpbq {
		rs = Load(Param("rs"), GP64())
	}
	for t := 0; t < TT; t++ {
		for r := 0; r < R; r++ {
			a := acc[r][t]
			var y V = a
			if zmm {
				y = YMM()
				VEXTRACTF64X4(U8(1), a, y)
				VADDPS(y, a.AsY(), y)
			}
			xr, xr2 := vec(), vec()
			x, x2 := xr.AsX(), xr2.AsX()
			if zmm {
				VEXTRACTF32X4(U8(1), y, x)
			} else {
				VEXTRACTF128(U8(1), y, x)
			}
			VADDPS(x, y.AsX(), x)
			VPERMILPS(U8(0x4e), x, x2)
			VADDPS(x2, x, x)
			VPERMILPS(U8(0xb1), x, x2)
			VADDSS(x2, x, x)
			if lpbq {
				VMULSS(Mem{Base: rs, Disp: 4 * r}, x, x)
			}
			VMOVSS(x, Mem{Base: dst, Disp: 4 * r})
			put(xr, xr2, a)
		}
		if t+1 < TT {
			ADDQ(ldd, dst)
		}
	}
	VZEROUPPER()
	RET()
}

// tailMasks sets, for the tail (< 4) blocks left after the whole groups,
// kn to their weight bytes (16 per block) and kb to their lanes of block
// scales (one per block). It leaves tail as it found it.
func tailMasks(tail Register, kn, kb Register) {
	m := GP64()
	MOVQ(U64(1), m)
	SHLQ(U8(4), tail)
	SHLXQ(tail, m, m)
	DECQ(m)
	KMOVQ(m, kn)
	SHRQ(U8(4), tail)
	MOVQ(U64(1), m)
	SHLXQ(tail, m, m)
	DECQ(m)
	KMOVQ(m, kb)
}

// V is a vector register, virtual (zmm kernels) or physical (ymm ones).
type V interface {
	Register
	Vec
}

// vecAlloc hands out vector registers. The AVX2 kernels must stay in
// Y0-Y15 (Y16 and up need EVEX), which avo's allocator does not know,
// so they use physical registers from a free list, returned after their
// last use; the AVX-512 kernels use avo's virtual registers.
type vecAlloc struct {
	zmm  bool
	free []VecPhysical
}

func newVecAlloc(zmm bool) *vecAlloc {
	return &vecAlloc{zmm: zmm, free: []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}}
}

func (a *vecAlloc) get() V {
	if a.zmm {
		return ZMM()
	}
	if len(a.free) == 0 {
		panic("out of ymm registers")
	}
	r := a.free[0]
	a.free = a.free[1:]
	return r
}

func (a *vecAlloc) put(rs ...V) {
	if a.zmm {
		return
	}
	for _, r := range rs {
		a.free = append(a.free, r.(VecPhysical))
	}
}
