package main

import (
	"fmt"

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
// exact integer of the block; each lane is then scaled by sc*D in float
// (the AVX2 kernels past the last whole chunk of 16 blocks; whole chunks,
// in both ISAs, add the block's lanes first, see q4chunk.go and
// q4Avx2Kernel).
const recBytes = 256

// q4Shape is one tile shape of a generated kernel.
type q4Shape struct{ R, TT int }

// q4ZmmShapes and q4YmmShapes are the tiles generated per ISA; the Go
// side decomposes any row and token count into them.
var (
	q4ZmmShapes = []q4Shape{{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}, {4, 2}, {1, 3}, {2, 3}, {4, 3}}
	q4YmmShapes = []q4Shape{{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}, {4, 2}}
	// q4YmmShapes3 are the AVX2 tiles of 3 tokens (transposedHalf).
	q4YmmShapes3 = []q4Shape{{1, 3}, {2, 3}}
)

func genQ4() {
	genQ4ChunkConsts()
	// AVX-512 (q4chunk.go): LPBQ, per-block scales, and per-block
	// scales with zero points.
	for _, form := range []q4Form{formCodes, formScales, formZeros, formK4} {
		for _, s := range q4ZmmShapes {
			q4ChunkKernel(form, false, s.R, s.TT)
		}
		if form == formCodes || form == formK4 {
			// the row loops of 2 to 8 tokens (verify passes and a
			// few sessions' decode, q4FewMaxT) for the forms of the
			// default recipes
			fewRows = true
			for tt := 2; tt <= 8; tt++ {
				q4ChunkKernel(form, false, 1, tt)
			}
			fewRows = false
		}
		for _, pf := range []bool{false, true} {
			prefetching = pf
			q4ChunkKernel(form, true, 1, 1)
			for _, res := range q4ResidentShapes {
				if form == formK4 && res.G%2 == 1 {
					continue // K4 rows hold whole 8-block super-blocks
				}
				q4ChunkKernelResident(form, true, 1, 1, res)
			}
		}
		prefetching = false
	}
	for _, form := range []q4Form{formCodes, formScales, formK4} {
		for _, s := range append(q4YmmShapes, q4YmmShapes3...) {
			q4Avx2Kernel(form, s.R, s.TT, false)
		}
		for _, pf := range []bool{false, true} {
			prefetching = pf
			q4Avx2Kernel(form, 1, 1, true)
		}
		prefetching = false
	}
}

// q4Form is the scale form of a 4-bit kernel (kernel.Q4).
type q4Form int

const (
	formCodes  q4Form = iota // LPBQ: block codes times a row scale
	formScales               // a float32 scale per block
	formZeros                // the same plus zero-point terms per block
	formK4                   // Q4_K super-blocks (Q4.K4)
)

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
// tokens (at most 8): token t at x + t*xs, by the stride or its
// multiples 3, 5 and 7 in registers, scaled by 1, 2 or 4.
func tokenRecords(TT int) (Register, func(t, off int) Mem) {
	if TT > 8 {
		panic("tokenRecords: more than 8 tokens")
	}
	xp := Load(Param("x"), GP64())
	var xs, xs3, xs5, xs7 Register
	if TT > 1 {
		xs = Load(Param("xs"), GP64())
	}
	if TT > 3 {
		xs3 = GP64()
		LEAQ(Mem{Base: xs, Index: xs, Scale: 2}, xs3)
	}
	if TT > 5 {
		xs5 = GP64()
		LEAQ(Mem{Base: xs, Index: xs, Scale: 4}, xs5)
	}
	if TT > 7 {
		xs7 = GP64()
		LEAQ(Mem{Base: xs5, Index: xs, Scale: 2}, xs7)
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
		case 4:
			m.Index, m.Scale = xs, 4
		case 5:
			m.Index, m.Scale = xs5, 1
		case 6:
			m.Index, m.Scale = xs3, 2
		case 7:
			m.Index, m.Scale = xs7, 1
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
	for r := 4; r < R; r += 4 {
		a.base = append(a.base, GP64())
	}
	a.rebase()
	return a
}

// rebase sets the bases of rows 4, 8, ... from the base of row 0.
func (a rowAddr) rebase() {
	for i := 1; i < len(a.base); i++ {
		LEAQ(Mem{Base: a.base[i-1], Index: a.str, Scale: 4}, a.base[i])
	}
}

func (a rowAddr) add(n int) {
	for _, b := range a.base {
		ADDQ(U32(n), b)
	}
}

// q4Avx2Kernel emits the AVX2 kernel of an R-row by TT-token tile, or
// with rowLoop the one-token decode kernel over n consecutive rows (n a
// positive multiple of 4), one row after another: each worker then reads
// one sequential stream of weights, where the 5-row tiles read 5 side by
// side (the AVX-512 kernels are q4ChunkKernel's). AVX2 has no 4-way byte
// dot product, so each step multiplies pairs with VPMADDUBSW (at most
// 15*127 twice, no saturation) and adds them with VPMADDWD. Whole chunks
// of 16 blocks are summed as the AVX-512 kernels sum them (chunk: whole
// block sums by a transposition, scaled once per 8 blocks, from the
// chunk records); the groups and blocks after the last whole chunk go
// step by step, their block sums starting from the record's -2*Sum lanes
// and scaled per step. Every (row, token) takes the same instructions in
// the same order in every kernel, so its bits do not depend on the tile
// or the call.
//
// The K4 form (Q4_K super-blocks, formK4) takes whole chunks only: its
// rows hold a whole number of 8-block super-blocks, so what is left after
// the whole chunks is a half chunk or nothing, which the chunk code takes
// with its last two groups' weights zero (the records are padded with
// zero blocks). Per row and chunk, its 16 scales d*sc and terms dmin*m/8
// are built once, in the lane order of the transposed sums, into 128
// bytes of the stack, which every token's sums then read.
func q4Avx2Kernel(form q4Form, R, TT int, rowLoop bool) {
	lpbq, k4 := form == formCodes, form == formK4
	name := q4Name(false, lpbq, R, TT)
	if k4 {
		name = fmt.Sprintf("q4Avx2K4%dx%d", R, TT)
	}
	if rowLoop {
		name = q4Avx2RowsName(lpbq)
		if k4 {
			name = "q4Avx2K4Rows"
		}
		name += prefetchSuffix()
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes n consecutive rows (n a positive multiple of 4) of a 4-bit product for one token, one row at a time (see the layout in _gen/q4.go).", name))
	} else {
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes a %d-row by %d-token tile of a 4-bit product (see the layout in _gen/q4.go).", name, R, TT))
	}

	va := newVecAlloc(false)
	vec, put := va.get, va.put
	const width = 32 // bytes of weights per step: 2 blocks
	// K4: the row's scales (2 halves of 32 bytes), then its terms, of
	// the current chunk: in 4 registers for one token (4 accumulators
	// and the chunk's work leave them room), else on the stack.
	var k4Frame Mem
	var k4Regs []V
	if k4 && TT > 1 {
		k4Frame = AllocLocal(128)
	}
	// The per-block-scale form in tiles of 3 tokens: the row's 16
	// scales of the chunk in the lane order of the two halves, on the
	// stack (transposedHalf leaves no register for them).
	var scFrame Mem
	if form == formScales && TT >= 3 {
		scFrame = AllocLocal(64)
	}
	k4At := func(i, h int) Op {
		if k4Regs != nil {
			return k4Regs[2*i+h]
		}
		return k4Frame.Offset(64*i + 32*h)
	}

	var nib, sc rowAddr
	var cnt, xp, nibRow, scRow, quads Register
	var tok func(t, off int) Mem
	if rowLoop {
		nibRow, scRow = Load(Param("nib"), GP64()), Load(Param("sc"), GP64())
		quads = Load(Param("n"), GP64())
		SHRQ(U8(2), quads)
		nib, sc = rowAddr{base: []Register{GP64()}}, rowAddr{base: []Register{GP64()}}
		xp = GP64()
		tok = func(_, off int) Mem { return Mem{Base: xp, Disp: off} }
	} else {
		nib = newRowAddr(Load(Param("nib"), GP64()), Load(Param("rstr"), GP64()), R)
		sc = newRowAddr(Load(Param("sc"), GP64()), Load(Param("scstr"), GP64()), R)
		xp, tok = tokenRecords(TT)
	}
	// dtok addresses byte off of token t's chunk records (D and -8*Sum
	// of the current chunk's 16 blocks in the transposed lane order) at
	// dp, which the chunk loop keeps.
	dp := GP64()
	dtok := func(t, off int) Mem {
		m := tok(t, off)
		m.Base = dp
		return m
	}
	t32 := GP32()

	// The constants of the group steps (leftover groups and tail): the
	// nibble mask, the lane index of each block's scale, and the int16
	// ones of VPMADDWD; allocated after the chunks, which read theirs
	// from memory.
	var m0f, idx, ones V
	consts := func() {
		m0f, idx, ones = vec(), vec(), vec()
		VMOVDQU(nibMask, m0f)
		VMOVDQU(permIdx, idx)
		VMOVDQU(onesW, ones)
	}

	var acc [][]V
	if !rowLoop {
		acc = make([][]V, R)
		for r := range acc {
			acc[r] = make([]V, TT)
			for t := range acc[r] {
				acc[r][t] = vec()
				VXORPS(acc[r][t], acc[r][t], acc[r][t])
			}
		}
	}
	// loadRow expands row r's weights at byte offset wo of the current
	// group (nblk blocks of it) into low and high nibbles, and its block
	// scales into one float per lane.
	loadRow := func(r, wo, nblk int) (lo, hi, cs V) {
		w := vec()
		lo, hi = vec(), vec()
		scOff := wo / 16 // block index within the group
		if nblk == 1 {
			VMOVDQU(nib.at(r, wo), w.AsX())
		} else {
			VMOVDQU(nib.at(r, wo), w)
		}
		VPSRLW(U8(4), w, hi)
		VPAND(w, m0f, lo)
		VPAND(hi, m0f, hi)
		put(w)
		cs = vec()
		// Block scales of this row, one per lane: float codes or scales.
		if lpbq {
			switch nblk {
			case 1:
				MOVBLZX(sc.at(r, scOff), t32)
				VMOVD(t32, cs.AsX())
			case 2:
				MOVWLZX(sc.at(r, scOff), t32)
				VMOVD(t32, cs.AsX())
				VPMOVZXBD(cs.AsX(), cs.AsX())
			}
			VPERMD(cs, idx, cs)
			VCVTDQ2PS(cs, cs)
		} else {
			if nblk == 1 {
				VMOVSS(sc.at(r, 4*scOff), cs.AsX())
			} else {
				VMOVSD(sc.at(r, 4*scOff), cs.AsX())
			}
			VPERMPS(cs, idx, cs)
		}
		return lo, hi, cs
	}

	// step emits one step over nblk blocks (of 2) of every row at byte
	// offset wo of the current group (the same offset in the records).
	step := func(wo, nblk int) {
		ro := wo
		for r := 0; r < R; r++ {
			lo, hi, cs := loadRow(r, wo, nblk)
			for t := 0; t < TT; t++ {
				d, p := vec(), vec()
				VPMADDUBSW(tok(t, ro+0), lo, d)
				VPMADDUBSW(tok(t, ro+64), hi, p)
				VPADDW(p, d, d)
				VPMADDWD(ones, d, d)
				VPADDD(tok(t, ro+192), d, d)
				put(p)
				s := vec()
				VCVTDQ2PS(d, d)
				VMULPS(tok(t, ro+128), cs, s)
				VFMADD231PS(d, s, acc[r][t])
				put(d, s)
			}
			put(lo, hi, cs)
		}
	}

	// chunkScale loads row r's block codes (LPBQ, as int32) or scales
	// (float32) of half h of the chunk, in the lane order of the
	// transposed sums: half 0 blocks 0 4 8 12 1 5 9 13, half 1 blocks 2
	// 6 10 14 3 7 11 15 (the order of the chunk records).
	chunkScale := func(r, h int) V {
		if lpbq {
			c := vec()
			VMOVDQU(sc.at(r, 0), c.AsX())
			VPSHUFB(codePerm, c.AsX(), c.AsX())
			if h == 1 {
				VPSRLDQ(U8(8), c.AsX(), c.AsX())
			}
			VPMOVZXBD(c.AsX(), c)
			return c
		}
		ix, a, b := vec(), vec(), vec()
		VMOVDQU(halfPerm[h], ix)
		VPERMPS(sc.at(r, 0), ix, a)
		VPERMPS(sc.at(r, 32), ix, b)
		VBLENDPS(U8(0xcc), b, a, a) // lanes 2, 3, 6, 7 from b
		put(ix, b)
		return a
	}

	// k4Prep writes row r's K4 scales d*sc and terms dmin*m/8 of the
	// chunk into k4Frame, each half in the lane order of its transposed
	// sums: per 128-bit lane, blocks 4j+2h+k for j = 0..3, of
	// super-blocks 0, 0, 1, 1.
	k4Prep := func(r int) {
		sup := vec()
		VBROADCASTF128(sc.at(r, 32), sup) // d0 dmin0 d1 dmin1, both lanes
		VMULPS(k4Eighth, sup, sup)
		for i, imm := range []uint8{0xa0, 0xf5} { // d0 d0 d1 d1, dmin0 dmin0 dmin1 dmin1
			c, f := vec(), vec()
			VMOVDQU(sc.at(r, 16*i), c.AsX())
			VPSHUFB(codePerm, c.AsX(), c.AsX())
			VPERMILPS(U8(imm), sup, f)
			for h := 0; h < 2; h++ {
				v := vec()
				if h == 1 {
					VPSRLDQ(U8(8), c.AsX(), c.AsX())
				}
				VPMOVZXBD(c.AsX(), v)
				VCVTDQ2PS(v, v)
				VMULPS(f, v, v)
				if TT == 1 {
					k4Regs = append(k4Regs, v)
					continue
				}
				VMOVUPS(v, k4Frame.Offset(64*i+32*h))
				put(v)
			}
			put(c, f)
		}
		put(sup)
	}

	// transposedHalf adds half h of the chunk of row r into every token's
	// accumulator the way the AVX-512 prefill tiles do (transposedTiles
	// in q4chunk.go): the 4 groups' packed codes of the half, their dwords
	// transposed within each 128-bit lane and unpacked, give vector j the
	// values 4j..4j+3 and vector 4+j the values 16+4j..16+4j+3 of block
	// 4g+2h+k in dword lane 4k+g, the lane order of the half's D, -8*Sum
	// and codes; the chunk records' transposed activations (bytes 32h to
	// 32h+32 of each 64-byte vector) match them. Per token, 8 VPMADDUBSW
	// summed in int16 (16 products of at most 15*127 a lane: no
	// overflow) and one VPMADDWD give the whole block sums, where the
	// group steps take 8 VPMADDUBSW, 4 VPMADDWD and 13 adds and shuffles.
	// Only for tiles of 3 tokens (the weights' 24 instructions per half
	// are then shared by 3), of at most 2 rows: 8 weight registers and
	// 6 accumulators leave 2 of the 16 (the per-block scales are put on
	// the stack per row and chunk).
	transposedHalf := func(r, h int, half bool) {
		p := make([]V, 4)
		for g := range p {
			p[g] = vec()
			if half && g >= 2 {
				VPXOR(p[g], p[g], p[g])
			} else {
				VMOVDQU(nib.at(r, 64*g+32*h), p[g])
			}
		}
		t0, t1, t2, t3 := vec(), vec(), vec(), vec()
		VPUNPCKLDQ(p[1], p[0], t0)
		VPUNPCKHDQ(p[1], p[0], t1)
		VPUNPCKLDQ(p[3], p[2], t2)
		VPUNPCKHDQ(p[3], p[2], t3)
		VPUNPCKLQDQ(t2, t0, p[0])
		VPUNPCKHQDQ(t2, t0, p[1])
		VPUNPCKLQDQ(t3, t1, p[2])
		VPUNPCKHQDQ(t3, t1, p[3])
		put(t0, t1, t2, t3)
		w := make([]V, 8)
		for j := range p {
			hi := vec()
			VPSRLW(U8(4), p[j], hi)
			VPAND(nibMask, p[j], p[j])
			VPAND(nibMask, hi, hi)
			w[j], w[4+j] = p[j], hi
		}
		for t := 0; t < TT; t++ {
			s, q := vec(), vec()
			for v := range w {
				at := dtok(t, 128+64*v+32*h)
				if v == 0 {
					VPMADDUBSW(at, w[v], s)
					continue
				}
				VPMADDUBSW(at, w[v], q)
				VPADDW(q, s, s)
			}
			VPMADDWD(onesW, s, s)
			switch {
			case k4:
				VCVTDQ2PS(s, s)
				VMULPS(k4At(0, h), s, s)
				VCVTDQ2PS(dtok(t, 64+32*h), q) // -8*Sum
				VFMADD231PS(k4At(1, h), q, s)
			case !lpbq:
				VPADDD(dtok(t, 64+32*h), s, s) // -8*Sum
				VCVTDQ2PS(s, s)
				VMULPS(scFrame.Offset(32*h), s, s)
			default:
				VPADDD(dtok(t, 64+32*h), s, s) // -8*Sum
				// the codes: what chunkScale does for LPBQ, in q
				VMOVDQU(sc.at(r, 0), q.AsX())
				VPSHUFB(codePerm, q.AsX(), q.AsX())
				if h == 1 {
					VPSRLDQ(U8(8), q.AsX(), q.AsX())
				}
				VPMOVZXBD(q.AsX(), q)
				VPMULLD(q, s, s)
				VCVTDQ2PS(s, s)
			}
			put(q)
			VFMADD231PS(dtok(t, 32*h), s, acc[r][t])
			put(s)
		}
		put(w...)
	}

	// pair adds the int32 lanes of a and b (given back) pairwise within
	// each 128-bit lane, interleaved: [a0+a2, b0+b2, a1+a3, b1+b3].
	pair := func(a, b V) V {
		x := vec()
		VPUNPCKLDQ(b, a, x)
		VPUNPCKHDQ(b, a, a)
		VPADDD(a, x, x)
		put(a, b)
		return x
	}

	// chunk emits one whole chunk for every row and token. Per row and
	// half h, each group's step h (blocks 4g+2h and 4g+2h+1 of the chunk,
	// 4 int32 lanes each, unpacked once for all the tokens) is summed
	// for every token; the 4 groups' sums become whole block sums by a
	// 4x4 transposition within each 128-bit lane (pair, then the quad
	// words), in the lane order of the chunk records, which give -8*Sum
	// and D; the row's codes multiply in int32 (exact: |sum| <= 32*8*127
	// times a code <= 255), or its scales after the conversion.
	//
	// K4 (see above) takes no -8*Sum into the sums (its codes are u, not
	// u - 8) but adds the terms times -8*Sum after the scales; with half,
	// the chunk's last two groups are past the row and taken as zeros.
	chunk := func(half bool) {
		for r := 0; r < R; r++ {
			if k4 {
				k4Prep(r)
			}
			if form == formScales && TT >= 3 {
				for h := 0; h < 2; h++ {
					a := chunkScale(r, h)
					VMOVUPS(a, scFrame.Offset(32*h))
					put(a)
				}
			}
			for h := 0; h < 2; h++ {
				if TT >= 3 {
					transposedHalf(r, h, half)
					continue
				}
				pend, ab := make([]V, TT), make([]V, TT)
				for g := 0; g < 4; g++ {
					lo, hi := vec(), vec()
					if half && g >= 2 {
						VPXOR(lo, lo, lo)
						VPXOR(hi, hi, hi)
					} else {
						VMOVDQU(nib.at(r, 64*g+32*h), lo)
						VPSRLW(U8(4), lo, hi)
						VPAND(nibMask, lo, lo)
						VPAND(nibMask, hi, hi)
					}
					for t := 0; t < TT; t++ {
						d, p := vec(), vec()
						VPMADDUBSW(tok(t, 256*g+32*h), lo, d)
						VPMADDUBSW(tok(t, 256*g+32*h+64), hi, p)
						VPADDW(p, d, d)
						put(p)
						VPMADDWD(onesW, d, d)
						switch g {
						case 0, 2:
							pend[t] = d
						case 1:
							ab[t] = pair(pend[t], d)
						case 3:
							cd := pair(pend[t], d)
							s := vec()
							VPUNPCKLQDQ(cd, ab[t], s)
							VPUNPCKHQDQ(cd, ab[t], ab[t])
							VPADDD(ab[t], s, s)
							put(ab[t], cd)
							if k4 {
								f := vec()
								VCVTDQ2PS(s, s)
								VMULPS(k4At(0, h), s, s)
								VCVTDQ2PS(dtok(t, 64+32*h), f) // -8*Sum
								VFMADD231PS(k4At(1, h), f, s)
								put(f)
								VFMADD231PS(dtok(t, 32*h), s, acc[r][t])
								put(s)
								continue
							}
							VPADDD(dtok(t, 64+32*h), s, s) // -8*Sum
							scl := chunkScale(r, h)
							if lpbq {
								VPMULLD(scl, s, s)
								VCVTDQ2PS(s, s)
							} else {
								VCVTDQ2PS(s, s)
								VMULPS(scl, s, s)
							}
							put(scl)
							VFMADD231PS(dtok(t, 32*h), s, acc[r][t])
							put(s)
						}
					}
					put(lo, hi)
				}
			}
			if k4Regs != nil {
				put(k4Regs...)
				k4Regs = nil
			}
		}
	}

	// body emits the whole of K for the tile's rows, its labels
	// suffixed by sfx, ending at label "reduce"+sfx.
	body := func(sfx string) {
		// Whole chunks of 16 blocks, then the groups left (cnt), then
		// the tail blocks.
		chunks := GP64()
		Load(Param("ng"), chunks)
		SHLQ(U8(2), chunks)
		ADDQ(Load(Param("tail"), GP64()), chunks) // blocks
		MOVQ(chunks, dp)
		ADDQ(U8(15), dp)
		SHRQ(U8(4), dp)
		SHLQ(U8(10), dp) // the chunk records: after the padded groups
		ADDQ(xp, dp)
		cnt = GP64()
		MOVQ(chunks, cnt)
		ANDQ(U8(15), cnt)
		SHRQ(U8(2), cnt) // groups after the whole chunks
		SHRQ(U8(4), chunks)
		scBytes := 64 // a chunk's codes or scales
		switch {
		case k4:
			scBytes = 48
		case lpbq:
			scBytes = 16
		}
		Label("chunk" + sfx)
		TESTQ(chunks, chunks)
		JZ(LabelRef("groups" + sfx))
		if rowLoop {
			prefetchChunk(nib.base[0], sc.base[0], 0, 4, scBytes)
		}
		chunk(false)
		nib.add(256)
		sc.add(scBytes)
		ADDQ(U32(4*recBytes), xp)
		ADDQ(U32(chunkRecBytes), dp)
		DECQ(chunks)
		JMP(LabelRef("chunk" + sfx))

		Label("groups" + sfx)
		if k4 {
			// A half chunk (2 groups) or nothing.
			TESTQ(cnt, cnt)
			JZ(LabelRef("reduce" + sfx))
			chunk(true)
			Label("reduce" + sfx)
			return
		}
		consts()
		Label("loop" + sfx)
		TESTQ(cnt, cnt)
		JZ(LabelRef("tail" + sfx))
		if rowLoop {
			prefetchLines(nib.at(0, 0), 1)
		}
		step(0, 2)
		step(width, 2)
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
		tail := Load(Param("tail"), GP64())
		CMPQ(tail, U8(2))
		JB(LabelRef("tail1" + sfx))
		step(0, 2)
		Label("tail1" + sfx)
		TESTQ(U32(1), tail)
		JZ(LabelRef("reduce" + sfx))
		CMPQ(tail, U8(1))
		JE(LabelRef("tail1at0" + sfx))
		step(width, 1)
		JMP(LabelRef("reduce" + sfx))
		Label("tail1at0" + sfx)
		step(0, 1)
		Label("reduce" + sfx)
	}

	if rowLoop {
		rowQuads(va, func(j int, a V) {
			acc = [][]V{{a}}
			MOVQ(nibRow, nib.base[0])
			MOVQ(scRow, sc.base[0])
			Load(Param("x"), xp)
			body(fmt.Sprint(j))
			if !k4 {
				put(m0f, idx, ones)
			}
			ADDQ(Load(Param("rstr"), GP64()), nibRow)
			ADDQ(Load(Param("scstr"), GP64()), scRow)
		}, lpbq, quads, nil)
		return
	}
	body("")
	if !k4 {
		put(m0f, idx, ones)
	}
	storeTile(R, TT, lpbq, func(r, t int) (Register, func()) {
		a := acc[r][t]
		xr, xr2 := vec(), vec()
		x, x2 := xr.AsX(), xr2.AsX()
		VEXTRACTF128(U8(1), a, x)
		VADDPS(x, a.AsX(), x)
		VPERMILPS(U8(0x4e), x, x2)
		VADDPS(x2, x, x)
		VPERMILPS(U8(0xb1), x, x2)
		VADDSS(x2, x, x)
		return x, func() { put(xr, xr2, a) }
	}, nil)
}

// q4Avx2RowsName is the Go name of an AVX2 row-loop decode kernel.
func q4Avx2RowsName(lpbq bool) string {
	if lpbq {
		return "q4Avx2CodesRows"
	}
	return "q4Avx2ScalesRows"
}

// storeTile ends a tile kernel: the sum of each of its R rows by TT
// tokens, made a scalar by sum (whose done, if any, runs after the
// store), times the row's scale rs[r] for LPBQ, goes to dst (ldd floats
// per token). With quad (four rows) the four rows' sums of token t come
// reduced together in one register instead (hsum4, which adds in hsum's
// order) and are stored with one move.
func storeTile(R, TT int, lpbq bool, sum func(r, t int) (x Register, done func()), quad func(t int) V) {
	dst := Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	var rs Register
	if lpbq {
		rs = Load(Param("rs"), GP64())
	}
	for t := range TT {
		if quad != nil {
			x := quad(t).AsX()
			if lpbq {
				VMULPS(Mem{Base: rs}, x, x)
			}
			VMOVUPS(x, Mem{Base: dst})
		} else {
			for r := range R {
				x, done := sum(r, t)
				if lpbq {
					VMULSS(Mem{Base: rs, Disp: 4 * r}, x, x)
				}
				VMOVSS(x, Mem{Base: dst, Disp: 4 * r})
				if done != nil {
					done()
				}
			}
		}
		if t+1 < TT {
			ADDQ(ldd, dst)
		}
	}
	VZEROUPPER()
	RET()
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
