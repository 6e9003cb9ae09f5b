package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The LPBQ one-token kernels (AVX-512: the row loop q4VnniCodesRows and
// the one-row tile q4VnniCodes1x1, which sum every row in the same order)
// take the weights in chunks of 16 blocks (4 groups, 256 bytes) rather
// than group by group. Per group the two VPDPBUSD leave each block's sum
// spread over the 4 int32 lanes of its 128-bit lane; the 4 groups' sums
// are then added across those lanes by a 4x4 transposition (unpack and
// add, twice), which leaves one whole block per lane: lane 4k+g holds
// block 4g+k of the chunk. Scaling then happens once per chunk instead of
// once per group: add the chunk's -8*Sum (the zero point), multiply by the
// block codes (VPMULLD, exact: |sum| <= 32*8*127 times a code <= 255 stays
// below 2^24), convert, and multiply-add the chunk's D.
//
// The sums start from zero and take the chunk's -8*Sum after the
// transposition (one load a chunk; starting each group from its -2*Sum
// lanes took four). Per 64 weight bytes that is under 4 vector loads
// where the group-by-group form takes 7 (the -2*Sum and D lanes of every
// group, and the codes' broadcast): streamed from memory, every load
// that hits the cache slows the stream of the weights' misses (see
// _gen/q4resident.go). On AMD Zen 4 the group-by-group form streamed 70%
// of the machine's read bandwidth with one thread; taking the -8*Sum
// once a chunk moved the Qwen3-0.6B classifier shape (K = 1024) from
// 16-18 GB/s to 20 beside a 28 GB/s read.
//
// The blocks past the last whole chunk (K = 576 leaves 2) are taken
// group by group instead (lastSum): each block's sum on its 4 lanes,
// started from the group record's -2*Sum lanes, scaled by the codes and
// D lanes, which for up to 4 groups is fewer instructions than a
// transposition. The weights and codes past the last block are not read
// (masked loads).
//
// The records (q4Prep in q4_amd64.go) keep the groups (Q, and D and
// -2*Sum repeated over each block's 4 lanes) as the AVX2 tiles and the
// last chunk read them, padded to a whole number of chunks with zero
// blocks, then per chunk D (64 bytes) and -8*Sum (64 bytes) of its 16
// blocks in the transposed lane order.

// chunkRecBytes is the size of a chunk's records after its groups: D and
// -8*Sum (64 bytes each), then its activations transposed for the
// prefill tiles (8 vectors of 64 bytes, see transposedTiles).
const chunkRecBytes = 128 + 512

// transposedTiles: the AVX-512 tiles of several tokens (prefill) sum a
// whole chunk without transposing sums per (row, token). Per row and
// chunk they load the 4 groups of packed codes and transpose their
// dwords within each 128-bit lane (4x4: unpack and unpack again, 8
// instructions), which puts in dword lane 4k+g of vector j the packed
// bytes 4j..4j+3 of block 4g+k; unpacked, vector j holds that block's
// values 4j..4j+3 and vector 4+j its values 16+4j..16+4j+3. The
// chunk records hold the activations in the same order, so 8 VPDPBUSD
// per token leave each block's whole sum in its lane, already in the
// lane order of D, -8*Sum and the codes. Per (row, token) that is 1 + 8
// + the scaling instead of the 4 zeroings, 8 VPDPBUSD and 9 transposition
// instructions of chunkSum, for 8 more per row and chunk, shared by the
// tile's tokens. The integer block sums are exact either way, so a
// token's bits are those of the one-token kernels.

// codePerm puts 16 block codes (bytes) in the transposed lane order:
// byte l = code 4*(l%4) + l/4.
var codePerm Mem

// scalePerm puts 16 block scales (float32) in the transposed lane order:
// lane l = scale 4*(l%4) + l/4.
var scalePerm Mem

// groupCodes[g] picks, from the 16 codes of a chunk zero-extended to
// int32 lanes, the code of block 4g + l/4 for lane l: group g's codes
// spread over its blocks' lanes.
var groupCodes [4]Mem

// k4Eighth scales a K4 record's d0, dmin0, d1, dmin1 (repeated over the
// 128-bit lanes) by 1, 1/8, 1, 1/8: the minimums' terms multiply -8*Sum.
var k4Eighth Mem

func genQ4ChunkConsts() {
	k4Eighth = GLOBL("q4k4eighth", RODATA|NOPTR)
	for l := 0; l < 16; l++ {
		v := float32(1)
		if l%2 == 1 {
			v = 0.125
		}
		DATA(4*l, U32(math.Float32bits(v)))
	}
	scalePerm = GLOBL("q4scaleperm", RODATA|NOPTR)
	for l := 0; l < 16; l++ {
		DATA(4*l, U32(uint32(4*(l%4)+l/4)))
	}
	for g := range groupCodes {
		groupCodes[g] = GLOBL(fmt.Sprintf("q4groupcodes%d", g), RODATA|NOPTR)
		for l := 0; l < 16; l++ {
			DATA(4*l, U32(uint32(4*g+l/4)))
		}
	}
	codePerm = GLOBL("q4codeperm", RODATA|NOPTR)
	for i := 0; i < 16; i += 4 {
		var v uint32
		for j := 0; j < 4; j++ {
			l := i + j
			v |= uint32(4*(l%4)+l/4) << (8 * j)
		}
		DATA(i, U32(v))
	}
}

// q4ChunkKernel emits an LPBQ kernel in chunks: with rowLoop the
// one-token row loop over n rows (n a positive multiple of 4), else the
// tile of R rows by TT tokens. Every (row, token) is computed by the same
// instructions in every kernel (chunkSum), so a row's bits for a token do
// not depend on the tile or the call that took it: decoding a token alone
// or within a batch of sessions gives the same logits, and so do caches
// that round what they store (binary16, uint8).
//
// The K4 form (k4: Q4_K super-blocks as they are, see Q4.K4) runs the
// per-block-scale form with zero points, the scales d*sc and the terms
// dmin*m/8 built per row and chunk from its 48-byte record, and no
// zero point 8: its codes are u, not u - 8, so the sums start at 0.
func q4ChunkKernel(form q4Form, rowLoop bool, R, TT int) {
	q4ChunkKernelResident(form, rowLoop, R, TT, q4Resident{})
}

// q4Resident is the shape of K a resident row loop is generated for: C
// whole chunks, then G groups of a last, partial chunk (none: the
// general row loop).
type q4Resident struct{ C, G int }

// q4ResidentShapes are the resident row loops generated: K of 1 or 2
// whole chunks (512, 1024) and of one chunk and up to 4 groups (such as
// 576, 768, 896, 960), whose token activations take at most 16 vector
// registers (8 a whole chunk, 2 a group).
var q4ResidentShapes = []q4Resident{{1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {2, 0}}

// q4FormName is the name part of a 4-bit scale form.
func q4FormName(form q4Form) string {
	return [...]string{formCodes: "Codes", formScales: "Scales", formZeros: "Zeros", formK4: "K4"}[form]
}

// q4ChunkKernelResident is q4ChunkKernel, or with res not zero the row
// loop that holds one token's activations in registers (see
// residentRows).
func q4ChunkKernelResident(form q4Form, rowLoop bool, R, TT int, res q4Resident) {
	lpbq, k4 := form == formCodes, form == formK4
	zeros := form == formZeros || k4
	if res != (q4Resident{}) {
		name := fmt.Sprintf("q4Vnni%sRowsC%dG%d", q4FormName(form), res.C, res.G) + prefetchSuffix()
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s is the row loop of the 4-bit product for one token over n rows (n a positive multiple of 4) of %d whole chunks and %d groups of a partial one, the token's activations held in registers (see _gen/q4chunk.go).", name, res.C, res.G))
	} else if rowLoop {
		name := q4RowsName(lpbq)
		switch form {
		case formZeros:
			name = "q4VnniZerosRows"
		case formK4:
			name = "q4VnniK4Rows"
		}
		name += prefetchSuffix()
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, n int, dst *float32, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes n consecutive rows (n a positive multiple of 4) of a 4-bit product for one token, one row at a time, in chunks of 16 blocks (see _gen/q4chunk.go).", name))
	} else if fewRows {
		name := fmt.Sprintf("q4Vnni%sFew%d", q4FormName(form), TT)
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32, n int)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes n consecutive rows (n >= 1) of a 4-bit product for %d tokens, one row at a time against all the tokens, each row as the 1x%d tile computes it (see _gen/q4chunk.go).", name, TT, TT))
	} else {
		name := q4Name(true, lpbq, R, TT)
		switch form {
		case formZeros:
			name = fmt.Sprintf("q4VnniZeros%dx%d", R, TT)
		case formK4:
			name = fmt.Sprintf("q4VnniK4%dx%d", R, TT)
		}
		TEXT(name, NOSPLIT, "func(nib *byte, rstr int, sc *byte, scstr int, ng int, tail int, x *byte, xs int, dst *float32, ldd int, rs *float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes a %d-row by %d-token tile of a 4-bit product in chunks of 16 blocks (see _gen/q4chunk.go).", name, R, TT))
	}

	t32 := GP32()
	MOVL(U32(0x0f0f0f0f), t32)
	m0f := ZMM()
	VPBROADCASTD(t32, m0f)
	var perm VecVirtual
	if lpbq || k4 {
		perm = XMM()
		VMOVDQU32(codePerm, perm)
	} else {
		perm = ZMM()
		VMOVDQU32(scalePerm, perm)
	}

	// Blocks, whole chunks, and the offset of the chunks' D and -8*Sum
	// in a token's records.
	nb := GP64()
	Load(Param("ng"), nb)
	SHLQ(U8(2), nb)
	ADDQ(Load(Param("tail"), GP64()), nb)
	full := GP64()
	MOVQ(nb, full)
	SHRQ(U8(4), full)
	dOff := GP64()
	MOVQ(nb, dOff)
	ADDQ(U8(15), dOff)
	SHRQ(U8(4), dOff)
	SHLQ(U8(10), dOff) // 4 groups of 256 bytes per chunk

	// Masks of the last, partial chunk (rb < 16 blocks): its weight
	// bytes per group and its codes.
	rb := GP64()
	MOVQ(nb, rb)
	ANDQ(U8(15), rb)
	lastGroups := GP64() // groups of the last chunk (0 if none)
	MOVQ(rb, lastGroups)
	ADDQ(U8(3), lastGroups)
	SHRQ(U8(2), lastGroups)
	ones, zero := GP64(), GP64()
	MOVQ(I64(-1), ones)
	MOVQ(U64(0), zero)
	kc := K()
	m := GP64()
	BZHIQ(rb, ones, m)
	KMOVQ(m, kc)
	SHLQ(U8(4), rb) // weight bytes
	var kw [4]Register
	for g := range kw {
		b := GP64()
		MOVQ(rb, b)
		if g > 0 {
			SUBQ(U8(64*g), b)
			CMOVQLT(zero, b)
		}
		BZHIQ(b, ones, m)
		kw[g] = K()
		KMOVQ(m, kw[g])
	}

	// scale turns the int32 block sums s into float32 times the row's
	// block scales sc on the same lanes: the codes multiply first, in
	// int32 (LPBQ, exact), or the float scales after the conversion.
	scale := func(s, sc VecVirtual) {
		if lpbq {
			VPMULLD(sc, s, s)
			VCVTDQ2PS(s, s)
			return
		}
		VCVTDQ2PS(s, s)
		VMULPS(sc, s, s)
	}

	// scBytes is a chunk's block scales: 16 codes or 16 floats.
	scBytes := 16
	switch {
	case k4:
		scBytes = 48
	case !lpbq:
		scBytes = 64
	}

	// zeroTerm adds to the scaled block sums t the zero points' terms:
	// zs*(-8*Sum) = sc*(8-z)*Sum, zs = sc*(z-8)/8 the row's block terms
	// on the same lanes (Q4.PrepareZeros), s8 the -8*Sum lanes as int32.
	zeroTerm := func(t, s8, zs VecVirtual) {
		f := ZMM()
		VCVTDQ2PS(s8, f)
		VFMADD231PS(zs, f, t)
	}

	// finish scales the whole block sums s of one (row, token) chunk (in
	// the transposed lane order; they include the zero point's -8*Sum,
	// but for K4) and adds them into acc: D at d(0), the row's codes or
	// scales cz and zero-point terms zs (times -8*Sum at d(64)) in the
	// same lanes.
	var finish func(s VecVirtual, d func(off int) Mem, cz, zs, acc VecVirtual)

	// chunkSum adds into acc one (row, token) whole chunk: the row's
	// unpacked weights lo, hi, the token's records at q(off) and its
	// chunk's D and -8*Sum at d(off), and the row's codes cz in lane
	// order. The integer sums start from zero; the -8*Sum is added
	// after the transposition (exact either way).
	chunkSum := func(lo, hi []VecVirtual, q, d func(off int) Mem, cz, zs, acc VecVirtual) {
		var a [4]VecVirtual
		for g := range a {
			a[g] = ZMM()
			VPXORD(m0f, m0f, a[g]) // zero (reads only m0f)
			vpdpbusd(q(256*g), lo[g], a[g])
			vpdpbusd(q(256*g+64), hi[g], a[g])
		}
		// Within each 128-bit lane k: [a0 b0 a1 b1] + [a2 b2 a3 b3],
		// the same of c and d, then their low and high halves added:
		// [a b c d], whole sums of blocks k, 4+k, 8+k, 12+k.
		ab, ab2, cd, cd2 := ZMM(), ZMM(), ZMM(), ZMM()
		VPUNPCKLDQ(a[1], a[0], ab)
		VPUNPCKHDQ(a[1], a[0], ab2)
		VPADDD(ab2, ab, ab)
		VPUNPCKLDQ(a[3], a[2], cd)
		VPUNPCKHDQ(a[3], a[2], cd2)
		VPADDD(cd2, cd, cd)
		s, s2 := ZMM(), ZMM()
		VPUNPCKLQDQ(cd, ab, s)
		VPUNPCKHQDQ(cd, ab, s2)
		VPADDD(s2, s, s)
		if !k4 {
			VPADDD(d(64), s, s) // the zero point's -8*Sum
		}
		finish(s, d, cz, zs, acc)
	}
	// finishOp is finish with D and -8*Sum in registers or memory.
	finishOp := func(s VecVirtual, d func(off int) Op, cz, zs, acc VecVirtual) {
		scale(s, cz)
		if zs != nil {
			s8 := ZMM()
			VMOVDQU32(d(64), s8) // -8*Sum
			zeroTerm(s, s8, zs)
		}
		VFMADD231PS(d(0), s, acc)
	}
	finish = func(s VecVirtual, d func(off int) Mem, cz, zs, acc VecVirtual) {
		finishOp(s, func(off int) Op { return d(off) }, cz, zs, acc)
	}

	// transposedRow loads a row's 4 groups of packed codes of a whole
	// chunk at nibAt, transposes their dwords within each 128-bit lane
	// and unpacks them: w[j] and w[4+j] as transposedTiles describes.
	transposedRow := func(nibAt func(off int) Mem) []VecVirtual {
		p := make([]VecVirtual, 4)
		for g := range p {
			p[g] = ZMM()
			VMOVDQU32(nibAt(64*g), p[g])
		}
		out := transpose4x4(p)
		w := make([]VecVirtual, 8)
		for j := range out {
			h := ZMM()
			VPSRLW(U8(4), out[j], h)
			VPANDD(out[j], m0f, out[j])
			VPANDD(h, m0f, h)
			w[j], w[4+j] = out[j], h
		}
		return w
	}

	// transposedSum adds into acc one (row, token) whole chunk from the
	// row's transposed codes w and the token's chunk records at d(off).
	transposedSum := func(w []VecVirtual, d func(off int) Mem, cz, zs, acc VecVirtual) {
		s := ZMM()
		if k4 {
			VPXORD(m0f, m0f, s) // zero (reads only m0f)
		} else {
			VMOVDQU32(d(64), s) // the sums start from -8*Sum
		}
		for v := range w {
			vpdpbusd(d(128+64*v), w[v], s)
		}
		finish(s, d, cz, zs, acc)
	}

	// lastSum adds into acc group g of a last, partial chunk for one
	// (row, token), group by group: its blocks' sums stay on 4 lanes
	// each, starting from the group record's -2*Sum lanes, multiplied by
	// the codes spread to those lanes (cz), converted and multiplied by
	// the record's D lanes. For up to 4 groups this takes fewer
	// instructions than the transposition of a whole chunk; every kernel
	// takes the last chunk this way.
	lastSum := func(lo, hi VecVirtual, q func(off int) Mem, cz, zs, acc VecVirtual) {
		d := ZMM()
		if k4 {
			VPXORD(m0f, m0f, d) // codes u: no zero point 8
		} else {
			VMOVDQU32(q(192), d) // -2*Sum on each of a block's 4 lanes
		}
		vpdpbusd(q(0), lo, d)
		vpdpbusd(q(64), hi, d)
		scale(d, cz)
		if zs != nil {
			s2 := ZMM()
			VMOVDQU32(q(192), s2)
			zeroTerm(d, s2, zs) // 4 lanes of zs*(-2*Sum) = zs*(-8*Sum)
		}
		VFMADD231PS(q(128), d, acc)
	}

	// spreadGroups spreads the 16 per-block values of the last chunk in
	// all (int32 or float32 lanes, block b in lane b) to each of its
	// groups groups: block 4g + l/4 in lane l of the g-th result.
	spreadGroups := func(all VecVirtual, groups int) []VecVirtual {
		out := make([]VecVirtual, groups)
		for g := range out {
			idx := ZMM()
			VMOVDQU32(groupCodes[g], idx)
			out[g] = ZMM()
			VPERMD(all, idx, out[g])
		}
		return out
	}

	// k4Of builds a row's scales d*sc and minimum terms dmin*m/8 of a
	// chunk from its K4 record at at: in lane order (lanes: lane l holds
	// block 4*(l%4) + l/4, of super-block (l%4)/2) or in block order for
	// the last chunk, which has 8 blocks (its other 8 record bytes and
	// its second d and dmin are zeros), all of super-block 0.
	k4Of := func(at Mem, lanes bool) (sc, mt VecVirtual) {
		sup := ZMM()
		VBROADCASTF32X4(at.Offset(32), sup) // d0 dmin0 d1 dmin1 per 128-bit lane
		VMULPS(k4Eighth, sup, sup)
		var out [2]VecVirtual
		for i := range out {
			c := XMM()
			VMOVDQU32(at.Offset(16*i), c) // (EVEX: c may be X16-X31)
			if lanes {
				VPSHUFB(perm, c, c)
			}
			v := ZMM()
			VPMOVZXBD(c, v)
			VCVTDQ2PS(v, v)
			f := ZMM()
			imm := [2]uint8{0x00, 0x55} // element 0 (d0) or 1 (dmin0) everywhere
			if lanes {
				imm = [2]uint8{0xa0, 0xf5} // elements 0,0,2,2 (d) or 1,1,3,3 (dmin)
			}
			VPERMILPS(U8(imm[i]), sup, f)
			VMULPS(f, v, v)
			out[i] = v
		}
		return out[0], out[1]
	}

	// lastCodes loads a row's codes of the last chunk (masked) and
	// spreads them for each of its groups groups.
	lastCodes := func(at Mem, groups int) []VecVirtual {
		all := ZMM()
		if lpbq {
			c := XMM()
			VMOVDQU8_Z(at, kc, c)
			VPMOVZXBD(c, all)
		} else {
			VMOVUPS_Z(at, kc, all) // one float a block
		}
		return spreadGroups(all, groups)
	}

	// unpack loads a row's weights of the chunk at nibAt (its first
	// groups groups, masked in the last chunk) as low and high nibbles.
	unpack := func(nibAt func(off int) Mem, masked bool, groups int) (lo, hi []VecVirtual) {
		lo, hi = make([]VecVirtual, groups), make([]VecVirtual, groups)
		for g := range groups {
			w, h := ZMM(), ZMM()
			if masked {
				VMOVDQU8_Z(nibAt(64*g), kw[g], w)
			} else {
				VMOVDQU32(nibAt(64*g), w)
			}
			VPSRLW(U8(4), w, h)
			VPANDD(w, m0f, w)
			VPANDD(h, m0f, h)
			lo[g], hi[g] = w, h
		}
		return lo, hi
	}

	// codesOf loads a row's 16 codes of the chunk at at (masked in the
	// last chunk), zero-extended to int32 in lane order.
	codesOf := func(at Mem, masked bool) VecVirtual {
		if k4 {
			panic("k4: use k4Of")
		}
		if !lpbq {
			sc := ZMM()
			VPERMPS(at, perm, sc) // the 16 scales in lane order
			return sc
		}
		c := XMM()
		if masked {
			VMOVDQU8_Z(at, kc, c)
		} else {
			VMOVDQU32(at, c) // (EVEX: c may be X16-X31)
		}
		VPSHUFB(perm, c, c)
		cz := ZMM()
		VPMOVZXBD(c, cz)
		return cz
	}

	// zerosOf loads a row's 16 zero-point terms of a whole chunk at at
	// in lane order (nil without zero points).
	zerosOf := func(at func() Mem) VecVirtual {
		if !zeros {
			return nil
		}
		z := ZMM()
		VPERMPS(at(), perm, z)
		return z
	}

	// lastZeros loads a row's zero-point terms of the last chunk
	// (masked) spread for each of its groups groups, as lastCodes.
	lastZeros := func(at func() Mem, groups int) []VecVirtual {
		if !zeros {
			return make([]VecVirtual, groups)
		}
		all := ZMM()
		VMOVUPS_Z(at(), kc, all)
		return spreadGroups(all, groups)
	}

	// chunks emits the loop over the whole chunks and the last one;
	// step(masked, groups) emits one chunk, next moves the pointers on.
	chunks := func(sfx string, cnt Register, step func(masked bool, groups int), next func()) {
		Label("chunk" + sfx)
		TESTQ(cnt, cnt)
		JZ(LabelRef("last" + sfx))
		step(false, 4)
		next()
		DECQ(cnt)
		JMP(LabelRef("chunk" + sfx))
		// The last chunk: as many groups as hold its blocks.
		Label("last" + sfx)
		TESTQ(lastGroups, lastGroups)
		JZ(LabelRef("done" + sfx))
		CMPQ(lastGroups, U8(2))
		JB(LabelRef("last1" + sfx))
		JE(LabelRef("last2" + sfx))
		CMPQ(lastGroups, U8(3))
		JE(LabelRef("last3" + sfx))
		for n := 4; n >= 1; n-- {
			Label(fmt.Sprintf("last%d%s", n, sfx))
			step(true, n)
			if n > 1 {
				JMP(LabelRef("done" + sfx))
			}
		}
		Label("done" + sfx)
	}

	if res != (q4Resident{}) {
		residentRows(form, res, residentKit{
			m0f: m0f, kc: kc, kw: kw, dOff: dOff, scBytes: scBytes,
			transposedRow: transposedRow, finish: finish, finishOp: finishOp,
			codesOf: codesOf, zerosOf: zerosOf, k4Of: k4Of,
		})
		return
	}
	if rowLoop {
		nibRow, scRow := Load(Param("nib"), GP64()), Load(Param("sc"), GP64())
		rows := Load(Param("n"), GP64())
		SHRQ(U8(2), rows)
		// The zero-point terms (param rs) have the shape of the
		// scales: one register for both, their distance.
		var zDelta Register
		if zeros && !k4 {
			zDelta = Load(Param("rs"), GP64())
			SUBQ(scRow, zDelta)
		}
		va := newVecAlloc(true)
		rowQuads(va, func(j int, a V) {
			nib, sc, xp, dp, cnt := GP64(), GP64(), GP64(), GP64(), GP64()
			MOVQ(nibRow, nib)
			MOVQ(scRow, sc)
			Load(Param("x"), xp)
			MOVQ(xp, dp)
			ADDQ(dOff, dp)
			MOVQ(full, cnt)
			chunks(fmt.Sprint(j), cnt, func(masked bool, groups int) {
				prefetchChunk(nib, sc, 0, groups, scBytes)
				lo, hi := unpack(func(off int) Mem { return Mem{Base: nib, Disp: off} }, masked, groups)
				zAt := func() Mem { return Mem{Base: sc, Index: zDelta, Scale: 1} }
				if masked {
					var cz, zs []VecVirtual
					if k4 {
						c, z := k4Of(Mem{Base: sc}, false)
						cz, zs = spreadGroups(c, groups), spreadGroups(z, groups)
					} else {
						cz, zs = lastCodes(Mem{Base: sc}, groups), lastZeros(zAt, groups)
					}
					for g := range groups {
						lastSum(lo[g], hi[g], func(off int) Mem { return Mem{Base: xp, Disp: 256*g + off} }, cz[g], zs[g], a.(VecVirtual))
					}
					return
				}
				var cz, zs VecVirtual
				if k4 {
					cz, zs = k4Of(Mem{Base: sc}, true)
				} else {
					cz, zs = codesOf(Mem{Base: sc}, false), zerosOf(zAt)
				}
				chunkSum(lo, hi,
					func(off int) Mem { return Mem{Base: xp, Disp: off} },
					func(off int) Mem { return Mem{Base: dp, Disp: off} }, cz, zs, a.(VecVirtual))
			}, func() {
				ADDQ(U32(256), nib)
				ADDQ(U8(scBytes), sc)
				ADDQ(U32(4*recBytes), xp)
				ADDQ(U32(chunkRecBytes), dp)
			})
			ADDQ(Load(Param("rstr"), GP64()), nibRow)
			ADDQ(Load(Param("scstr"), GP64()), scRow)
		}, lpbq, rows, nil) // the scales form has no row scales
		return
	}

	if fewRows {
		q4FewRows(form, TT, full, dOff, m0f, func(nib, sc Register, tok, dtok func(t, off int) Mem, acc []VecVirtual) {
			chunks("", full, func(masked bool, groups int) {
				if !masked {
					w := transposedRow(func(off int) Mem { return Mem{Base: nib, Disp: off} })
					var cz, zs VecVirtual
					if k4 {
						cz, zs = k4Of(Mem{Base: sc}, true)
					} else {
						cz = codesOf(Mem{Base: sc}, false)
					}
					for t := range TT {
						transposedSum(w, func(off int) Mem { return dtok(t, off) }, cz, zs, acc[t])
					}
					return
				}
				lo, hi := unpack(func(off int) Mem { return Mem{Base: nib, Disp: off} }, true, groups)
				var cz, zs []VecVirtual
				if k4 {
					c, z := k4Of(Mem{Base: sc}, false)
					cz, zs = spreadGroups(c, groups), spreadGroups(z, groups)
				} else {
					cz, zs = lastCodes(Mem{Base: sc}, groups), make([]VecVirtual, groups)
				}
				for t := range TT {
					for g := range groups {
						lastSum(lo[g], hi[g], func(off int) Mem { return tok(t, 256*g+off) }, cz[g], zs[g], acc[t])
					}
				}
			}, func() {
				ADDQ(U32(256), nib)
				ADDQ(U8(scBytes), sc)
				ADDQ(U32(4*recBytes), tok(0, 0).Base)
				ADDQ(U32(chunkRecBytes), dtok(0, 0).Base)
			})
		})
		return
	}

	acc := make([][]VecVirtual, R)
	for r := range acc {
		acc[r] = make([]VecVirtual, TT)
		for t := range acc[r] {
			acc[r][t] = ZMM()
			VPXORD(m0f, m0f, acc[r][t])
		}
	}
	nib := newRowAddr(Load(Param("nib"), GP64()), Load(Param("rstr"), GP64()), R)
	sc := newRowAddr(Load(Param("sc"), GP64()), Load(Param("scstr"), GP64()), R)
	var zt rowAddr // the zero-point terms (param rs), shaped as the scales
	if zeros && !k4 {
		zt = rowAddr{base: []Register{Load(Param("rs"), GP64())}, str: sc.str, str3: sc.str3}
	}
	xp, tok := tokenRecords(TT)
	dp := GP64()
	MOVQ(xp, dp)
	ADDQ(dOff, dp)
	dtok := func(t, off int) Mem {
		m := tok(t, off)
		m.Base = dp
		return m
	}
	// rowScales loads row r's codes or scales and zero-point terms (or
	// K4 scales and terms) of a whole chunk, in lane order.
	rowScales := func(r int) (cz, zs VecVirtual) {
		if k4 {
			return k4Of(sc.at(r, 0), true)
		}
		return codesOf(sc.at(r, 0), false), zerosOf(func() Mem { return zt.at(r, 0) })
	}
	chunks("", full, func(masked bool, groups int) {
		for r := range R {
			zAt := func() Mem { return zt.at(r, 0) }
			if !masked && TT >= 2 {
				w := transposedRow(func(off int) Mem { return nib.at(r, off) })
				cz, zs := rowScales(r)
				for t := range TT {
					transposedSum(w, func(off int) Mem { return dtok(t, off) }, cz, zs, acc[r][t])
				}
				continue
			}
			lo, hi := unpack(func(off int) Mem { return nib.at(r, off) }, masked, groups)
			if masked {
				var cz, zs []VecVirtual
				if k4 {
					c, z := k4Of(sc.at(r, 0), false)
					cz, zs = spreadGroups(c, groups), spreadGroups(z, groups)
				} else {
					cz, zs = lastCodes(sc.at(r, 0), groups), lastZeros(zAt, groups)
				}
				for t := range TT {
					for g := range groups {
						lastSum(lo[g], hi[g], func(off int) Mem { return tok(t, 256*g+off) }, cz[g], zs[g], acc[r][t])
					}
				}
				continue
			}
			cz, zs := rowScales(r)
			for t := range TT {
				chunkSum(lo, hi,
					func(off int) Mem { return tok(t, off) },
					func(off int) Mem { return dtok(t, off) }, cz, zs, acc[r][t])
			}
		}
	}, func() {
		nib.add(256)
		sc.add(scBytes)
		if zeros && !k4 {
			zt.add(scBytes)
		}
		ADDQ(U32(4*recBytes), xp)
		ADDQ(U32(chunkRecBytes), dp)
	})

	va := newVecAlloc(true)
	var quad func(t int) V
	if R == 4 {
		quad = func(t int) V { return hsum4(va, []V{acc[0][t], acc[1][t], acc[2][t], acc[3][t]}) }
	}
	storeTile(R, TT, lpbq, func(r, t int) (Register, func()) {
		return hsum(true, va, acc[r][t]).AsX(), nil
	}, quad)
}

// fewRows, while set, makes q4ChunkKernel emit the row loop of a few
// tokens (q4FewRows) instead of the tile of one row.
var fewRows bool

// q4FewRows emits the row loop of TT tokens (LPBQ or K4 form): for each
// of n rows, the accumulators zeroed, body(nib, sc, tok, dtok, acc) over
// the row's whole K (a chunk loop counting full down, which it leaves
// changed: it is reloaded from the row's copy), then each token's sum
// reduced as hsum does, times the row scale (LPBQ), stored at dst +
// t*ldd. Every (row, token) takes the instructions of the one-row tile,
// so its bits are those of the one-token kernels; the call, the masks of
// the last chunk and the token strides are paid once for all the rows.
func q4FewRows(form q4Form, TT int, full, dOff Register, m0f VecVirtual, body func(nib, sc Register, tok, dtok func(t, off int) Mem, acc []VecVirtual)) {
	lpbq := form == formCodes
	row := GP64()
	XORQ(row, row)
	chunks := GP64()
	MOVQ(full, chunks)
	Label("row")
	acc := make([]VecVirtual, TT)
	for t := range acc {
		acc[t] = ZMM()
		VPXORD(m0f, m0f, acc[t])
	}
	nib, sc := GP64(), GP64()
	Load(Param("rstr"), nib)
	IMULQ(row, nib)
	ADDQ(Load(Param("nib"), GP64()), nib)
	Load(Param("scstr"), sc)
	IMULQ(row, sc)
	ADDQ(Load(Param("sc"), GP64()), sc)
	xp, tok := tokenRecords(TT)
	dp := GP64()
	MOVQ(xp, dp)
	ADDQ(dOff, dp)
	dtok := func(t, off int) Mem {
		m := tok(t, off)
		m.Base = dp
		return m
	}
	MOVQ(chunks, full)
	body(nib, sc, tok, dtok, acc)

	va := newVecAlloc(true)
	dst := GP64()
	Load(Param("dst"), dst)
	LEAQ(Mem{Base: dst, Index: row, Scale: 4}, dst)
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldd)
	var rs Register
	if lpbq {
		rs = Load(Param("rs"), GP64())
	}
	for t := range TT {
		x := hsum(true, va, acc[t]).AsX()
		if lpbq {
			VMULSS(Mem{Base: rs, Index: row, Scale: 4}, x, x)
		}
		VMOVSS(x, Mem{Base: dst})
		if t+1 < TT {
			ADDQ(ldd, dst)
		}
	}
	INCQ(row)
	CMPQ(row, Load(Param("n"), GP64()))
	JB(LabelRef("row"))
	VZEROUPPER()
	RET()
}
