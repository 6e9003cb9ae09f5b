package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Resident row loops. Streaming a weight from memory, the one-token row
// loop (q4VnniCodesRows) is bound less by its arithmetic than by its
// loads: per 64-byte line of weights it loaded about four more vectors
// from the token's records (the activations, sums and scales), which
// all hit the first-level cache, and on AMD Zen 4 every such load slows
// the stream of misses the weights need (a standalone loop of one weight
// load and two VPDPBUSD per line streamed 26 GB/s with register
// operands and 16-20 with four cache-hitting loads per line). Where K is
// short enough, the token's activations fit in registers: 8 vectors per
// whole chunk (its transposed activations, the order transposedTiles
// describes) and 2 per group of a last, partial chunk (Q of the group's
// blocks' halves). Those loops load them once per call and then, per
// chunk of every row, only its 4 lines of weights, its 16 codes or
// scales, and the chunk's D and -8*Sum.
//
// Each row's sums are those of the general row loop: a whole chunk's
// integer block sums are exact in either order (transposed weights here,
// transposed sums there), and the chunks, the groups of the last one,
// their scaling and the additions into the row's float lanes come in the
// same order with the same instructions, so the bits are the same.

// residentKit is what a resident row loop takes from q4ChunkKernel: the
// registers its prologue set (the nibble mask, the masks of the last
// chunk, the offset of the chunk records) and its steps.
type residentKit struct {
	m0f     VecVirtual
	kc      Register
	kw      [4]Register
	dOff    Register
	scBytes int

	transposedRow func(nibAt func(off int) Mem) []VecVirtual
	finish        func(s VecVirtual, d func(off int) Mem, cz, zs, acc VecVirtual)
	finishOp      func(s VecVirtual, d func(off int) Op, cz, zs, acc VecVirtual)
	codesOf       func(at Mem, masked bool) VecVirtual
	zerosOf       func(at func() Mem) VecVirtual
	k4Of          func(at Mem, lanes bool) (sc, mt VecVirtual)
}

// residentRows emits the body of a resident row loop of shape res (see
// above) for form, after q4ChunkKernel's prologue.
func residentRows(form q4Form, res q4Resident, kit residentKit) {
	lpbq, k4 := form == formCodes, form == formK4
	zeros := form == formZeros || k4
	nibRow, scRow := Load(Param("nib"), GP64()), Load(Param("sc"), GP64())
	rows := Load(Param("n"), GP64())
	SHRQ(U8(2), rows)
	var zDelta Register // the zero-point terms' distance from the scales
	if zeros && !k4 {
		zDelta = Load(Param("rs"), GP64())
		SUBQ(scRow, zDelta)
	}
	xp := Load(Param("x"), GP64())
	dp := GP64()
	MOVQ(xp, dp)
	ADDQ(kit.dOff, dp)
	chunkRec := func(c int) func(off int) Mem {
		return func(off int) Mem { return Mem{Base: dp, Disp: c*chunkRecBytes + off} }
	}
	groupRec := func(g int) func(off int) Mem {
		return func(off int) Mem { return Mem{Base: xp, Disp: res.C*4*recBytes + 256*g + off} }
	}

	// The token's activations: a whole chunk's 8 transposed vectors,
	// a partial chunk's group halves.
	// A whole chunk's are its groups' halves, their dwords transposed
	// within each 128-bit lane as transposedRow transposes the weights'
	// (the records of one token do not hold them transposed).
	act := make([][]VecVirtual, res.C)
	for c := range act {
		act[c] = make([]VecVirtual, 8)
		for h := range 2 {
			p := make([]VecVirtual, 4)
			for g := range p {
				p[g] = ZMM()
				VMOVDQU32(Mem{Base: xp, Disp: c*4*recBytes + 256*g + 64*h}, p[g])
			}
			copy(act[c][4*h:], transpose4x4(p))
		}
	}
	lastLo, lastHi := make([]VecVirtual, res.G), make([]VecVirtual, res.G)
	for g := range res.G {
		lastLo[g], lastHi[g] = ZMM(), ZMM()
		VMOVDQU32(groupRec(g)(0), lastLo[g])
		VMOVDQU32(groupRec(g)(64), lastHi[g])
	}
	// With one group there are registers for the rest of
	// their records too (D and -2*Sum lanes) and their lanes' indices
	// into the last chunk's codes: K = 576 (one chunk and a group of
	// 2 blocks) spends as much on its partial group as on its chunk.
	lastRec := make([][2]Op, res.G) // D and -2*Sum lanes of group g
	lastIdx := make([]Op, res.G)
	for g := range res.G {
		lastRec[g] = [2]Op{groupRec(g)(128), groupRec(g)(192)}
		lastIdx[g] = groupCodes[g]
		if res.G > 1 {
			continue
		}
		for i := range lastRec[g] {
			v := ZMM()
			VMOVDQU32(lastRec[g][i], v)
			lastRec[g][i] = v
		}
		idx := ZMM()
		VMOVDQU32(groupCodes[g], idx)
		lastIdx[g] = idx
	}
	rstr, scstr := Load(Param("rstr"), GP64()), Load(Param("scstr"), GP64())

	// start gives a sum register started from the zero point's -8*Sum
	// at at (or -2*Sum on each of a block's 4 lanes), or zero for K4.
	start := func(at Mem) VecVirtual {
		s := ZMM()
		if k4 {
			VPXORD(kit.m0f, kit.m0f, s)
		} else {
			VMOVDQU32(at, s)
		}
		return s
	}

	va := newVecAlloc(true)
	rowQuads(va, func(j int, a V) {
		acc := a.(VecVirtual)
		nib, sc := GP64(), GP64()
		MOVQ(nibRow, nib)
		MOVQ(scRow, sc)
		scAt := func(c int) Mem { return Mem{Base: sc, Disp: c * kit.scBytes} }
		zAt := func(c int) func() Mem {
			return func() Mem { return Mem{Base: sc, Index: zDelta, Scale: 1, Disp: c * kit.scBytes} }
		}
		for c := range res.C {
			prefetchChunk(nib, sc, c, 4, kit.scBytes)
			w := kit.transposedRow(func(off int) Mem { return Mem{Base: nib, Disp: 256*c + off} })
			s := start(chunkRec(c)(64))
			// With one chunk resident there are registers for two
			// chains of 4 VPDPBUSD instead of one of 8: from the
			// caches the loop waited on that chain. The sums are
			// exact integers, so the split changes no bit.
			s2 := s
			if res.C == 1 && res.G <= splitMaxG {
				s2 = ZMM()
				VPXORD(s2, s2, s2)
			}
			for v := range w {
				if v%2 == 0 {
					vpdpbusd(act[c][v], w[v], s)
				} else {
					vpdpbusd(act[c][v], w[v], s2)
				}
			}
			if s2 != s {
				VPADDD(s2, s, s)
			}
			var cz, zs VecVirtual
			if k4 {
				cz, zs = kit.k4Of(scAt(c), true)
			} else {
				cz, zs = kit.codesOf(scAt(c), false), kit.zerosOf(zAt(c))
			}
			kit.finish(s, chunkRec(c), cz, zs, acc)
		}
		if res.G > 0 {
			// The last chunk group by group, as lastSum takes it:
			// its codes or scales (and zero-point terms) of all its
			// blocks once, spread to each group's lanes in turn.
			var all, allZ VecVirtual
			switch {
			case k4:
				all, allZ = kit.k4Of(scAt(res.C), false)
			case lpbq:
				c := XMM()
				VMOVDQU8_Z(scAt(res.C), kit.kc, c)
				all = ZMM()
				VPMOVZXBD(c, all)
			default:
				all = ZMM()
				VMOVUPS_Z(scAt(res.C), kit.kc, all)
			}
			if zeros && !k4 {
				allZ = ZMM()
				VMOVUPS_Z(zAt(res.C)(), kit.kc, allZ)
			}
			spread := func(v VecVirtual, g int) VecVirtual {
				if v == nil {
					return nil
				}
				idx, ok := lastIdx[g].(VecVirtual)
				if !ok {
					idx = ZMM()
					VMOVDQU32(lastIdx[g], idx)
				}
				out := ZMM()
				VPERMD(v, idx, out)
				return out
			}
			prefetchChunk(nib, sc, res.C, res.G, kit.scBytes)
			for g := range res.G {
				lo, hi := ZMM(), ZMM()
				VMOVDQU8_Z(Mem{Base: nib, Disp: 256*res.C + 64*g}, kit.kw[g], lo)
				VPSRLW(U8(4), lo, hi)
				VPANDD(lo, kit.m0f, lo)
				VPANDD(hi, kit.m0f, hi)
				d := ZMM()
				if k4 {
					VPXORD(kit.m0f, kit.m0f, d)
				} else {
					VMOVDQU32(lastRec[g][1], d) // -2*Sum lanes
				}
				vpdpbusd(lastLo[g], lo, d)
				vpdpbusd(lastHi[g], hi, d)
				kit.finishOp(d, func(off int) Op { return lastRec[g][off/64] }, spread(all, g), spread(allZ, g), acc)
			}
		}
		ADDQ(rstr, nibRow)
		ADDQ(scstr, scRow)
	}, lpbq, rows, nil)
}

// splitMaxG is the most groups of a last, partial chunk for which a
// one-chunk resident loop has the registers to split its chunk's sum.
var splitMaxG = 2

// transpose4x4 transposes the dwords of p[0..3] within each 128-bit
// lane, in place: dword g of lane k of result j is dword j of lane k of
// p[g] (a0.0 a1.0 a2.0 a3.0, ...).
func transpose4x4(p []VecVirtual) []VecVirtual {
	t0, t1, t2, t3 := ZMM(), ZMM(), ZMM(), ZMM()
	VPUNPCKLDQ(p[1], p[0], t0) // a0.0 a1.0 a0.1 a1.1
	VPUNPCKHDQ(p[1], p[0], t1) // a0.2 a1.2 a0.3 a1.3
	VPUNPCKLDQ(p[3], p[2], t2)
	VPUNPCKHDQ(p[3], p[2], t3)
	out := []VecVirtual{p[0], p[1], p[2], p[3]}
	VPUNPCKLQDQ(t2, t0, out[0])
	VPUNPCKHQDQ(t2, t0, out[1])
	VPUNPCKLQDQ(t3, t1, out[2])
	VPUNPCKHQDQ(t3, t1, out[3])
	return out
}
