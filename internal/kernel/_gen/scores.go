package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The 8-bit score kernels of attention, scoresU8Vnni{M} for M = 1..4
// queries: the keys of a block are signed bytes stored biased (+128) and
// packed in key lanes, 4 bytes of 16 keys a vector (row r of the packed
// block holds elements 4r..4r+3 of key j at bytes 4j..4j+3), and each
// query's 4 bytes of the same elements are one broadcast operand of
// VPDPBUSD. A lane's sum is Σ (k+128)*q; the kernel takes each query's
// correction 128*Σq off, converts, and multiplies by the query's and the
// key's scales. Columns come in blocks of 4 vectors (64 keys), then
// single vectors: n is a multiple of 16.
func genScores() {
	for m := 1; m <= 4; m++ {
		genScoresM(m)
	}
}

func genScoresM(M int) {
	name := fmt.Sprintf("scoresU8Vnni%d", M)
	TEXT(name, NOSPLIT, "func(dst *float32, ldd int, q *byte, ldq int, k *byte, n int, groups int, stride int, corr *int32, qs *float32, ks *float32)")
	Pragma("noescape")
	Doc(name+fmt.Sprintf(" sets dst[i*ldd+j] = float32(Σ_r Σ_b k[r*stride+4j+b]*int8(q[i*ldq+4r+b]) - corr[i]) * qs[i] * ks[j] for i < %d, j < n, r < groups, b < 4", M),
		"(n a multiple of 16; ldd in elements, ldq and stride in bytes).")
	dst, k, n, ks := GP64(), GP64(), GP64(), GP64()
	Load(Param("dst"), dst)
	Load(Param("k"), k)
	Load(Param("n"), n)
	Load(Param("ks"), ks)
	for _, nv := range []int{4, 1} {
		lbl := fmt.Sprintf("c%d", nv)
		Label(lbl)
		CMPQ(n, U32(16*nv))
		if nv == 4 {
			JB(LabelRef("c1"))
		} else {
			JB(LabelRef("done"))
		}
		scoresBlock(lbl, M, nv, dst, k, ks)
		ADDQ(U32(64*nv), dst)
		ADDQ(U32(64*nv), k)
		ADDQ(U32(64*nv), ks)
		SUBQ(U32(16*nv), n)
		JMP(LabelRef(lbl))
	}
	Label("done")
	VZEROUPPER()
	RET()
}

// scoresBlock computes nv vectors (16*nv keys) of the M queries' scores
// at dst from the packed keys at k, every group of the block's rows.
func scoresBlock(lbl string, M, nv int, dst, k, ks GPVirtual) {
	var acc [4][4]VecVirtual
	for i := range M {
		for v := range nv {
			acc[i][v] = ZMM()
			VPXORD(acc[i][v], acc[i][v], acc[i][v])
		}
	}
	q, ldq, kp, r, st := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("q"), q)
	Load(Param("ldq"), ldq)
	Load(Param("groups"), r)
	Load(Param("stride"), st)
	MOVQ(k, kp)
	qa := func(i int) Mem { // query i's 4 bytes of the current group, i < 3
		if i == 0 {
			return Mem{Base: q}
		}
		return Mem{Base: q, Index: ldq, Scale: uint8(i)}
	}
	var q3 GPVirtual
	if M == 4 {
		q3 = GP64()
	}
	Label(lbl + "r")
	TESTQ(r, r)
	JZ(LabelRef(lbl + "st"))
	var kv [4]VecVirtual
	for v := range nv {
		kv[v] = ZMM()
		VMOVDQU32(Mem{Base: kp, Disp: 64 * v}, kv[v])
	}
	if M == 4 {
		LEAQ(Mem{Base: q, Index: ldq, Scale: 2}, q3)
		ADDQ(ldq, q3)
	}
	for i := range M {
		for v := range nv {
			m := qa(i)
			if i == 3 {
				m = Mem{Base: q3}
			}
			vpdpbusdBcst(m, kv[v], acc[i][v])
		}
	}
	ADDQ(st, kp)
	ADDQ(U8(4), q)
	DECQ(r)
	JMP(LabelRef(lbl + "r"))

	Label(lbl + "st")
	corr, qs, ldd := GP64(), GP64(), GP64()
	Load(Param("corr"), corr)
	Load(Param("qs"), qs)
	Load(Param("ldd"), ldd)
	SHLQ(U8(2), ldd)
	d := GP64()
	MOVQ(dst, d)
	for i := range M {
		for v := range nv {
			VPSUBD_BCST(Mem{Base: corr, Disp: 4 * i}, acc[i][v], acc[i][v])
			VCVTDQ2PS(acc[i][v], acc[i][v])
			VMULPS_BCST(Mem{Base: qs, Disp: 4 * i}, acc[i][v], acc[i][v])
			VMULPS(Mem{Base: ks, Disp: 64 * v}, acc[i][v], acc[i][v])
			VMOVUPS(acc[i][v], Mem{Base: d, Disp: 64 * v})
		}
		if i+1 < M {
			ADDQ(ldd, d)
		}
	}
}
