package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genDecayRows writes decayRowsAvx2 and decayRowsVnni, the fused second
// half of a gated delta rule step (DecayRows): per block of columns, m and
// o stay in registers while every row is scaled, updated, stored and
// added into o, so the state is read and written once. As it goes it asks
// for the same lines of the rows at ahead (the next head's state, which
// the next call reads from memory first), a line for each one it reads.
// n is a multiple of the vector's lanes (the Go side does the rest).
// The NT forms store the new state with non-temporal stores, past the
// caches: a session's step writes the state into another snapshot set
// than it reads (snapshot.go), lines that a store would first read from
// memory and that the next read, a token later, finds evicted anyway.
func genDecayRows() {
	for _, zmm := range []bool{false, true} {
		for _, nt := range []bool{false, true} {
			genDecayRowsISA(zmm, nt)
		}
	}
}

func genDecayRowsISA(zmm, nt bool) {
	vec, lanes, big := YMM, 8, 4
	name := "decayRows"
	if nt {
		name += "NT"
	}
	if zmm {
		vec, lanes, big, name = ZMM, 16, 8, name+"Vnni"
	} else {
		name += "Avx2"
	}
	TEXT(name, NOSPLIT, "func(dst *float32, x *float32, o *float32, m *float32, k *float32, q *float32, decay float32, n int, rows int, stride int, ahead *float32)")
	Pragma("noescape")
	Doc(name+" sets, for r < rows and j < n, s = decay*x[r*stride+j] + k[r]*m[j],",
		"dst[r*stride+j] = s and o[j] += q[r]*s; n a multiple of "+fmt.Sprint(lanes)+", stride in elements;",
		"it asks for the cache lines of ahead at the offsets it reads of x.")
	if nt {
		Doc("It stores with non-temporal stores, then fences them: dst 64-byte aligned, stride a multiple of 16.")
	}
	dst, x, o, m, ah := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("ahead"), ah)
	Load(Param("dst"), dst)
	Load(Param("x"), x)
	Load(Param("o"), o)
	Load(Param("m"), m)
	n, rows, sb := GP64(), GP64(), GP64()
	Load(Param("n"), n)
	Load(Param("rows"), rows)
	Load(Param("stride"), sb)
	SHLQ(U8(2), sb)
	dec := vec()
	VBROADCASTSS(Load(Param("decay"), XMM()), dec)

	block := func(lbl string, nvec int) {
		mv, ov := make([]VecVirtual, nvec), make([]VecVirtual, nvec)
		for i := range nvec {
			mv[i], ov[i] = vec(), vec()
			VMOVUPS(Mem{Base: m, Disp: 4 * i * lanes}, mv[i])
			VMOVUPS(Mem{Base: o, Disp: 4 * i * lanes}, ov[i])
		}
		xp, dp, kp, qp, r, hp := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
		MOVQ(ah, hp)
		MOVQ(x, xp)
		MOVQ(dst, dp)
		Load(Param("k"), kp)
		Load(Param("q"), qp)
		MOVQ(rows, r)
		Label(lbl + "row")
		kb, qb := vec(), vec()
		VBROADCASTSS(Mem{Base: kp}, kb)
		VBROADCASTSS(Mem{Base: qp}, qb)
		for i := range nvec {
			if off := 4 * i * lanes; off%64 == 0 {
				PREFETCHT0(Mem{Base: hp, Disp: off})
			}
			s := vec()
			VMULPS(Mem{Base: xp, Disp: 4 * i * lanes}, dec, s)
			VFMADD231PS(mv[i], kb, s)
			if nt {
				VMOVNTPS(s, Mem{Base: dp, Disp: 4 * i * lanes})
			} else {
				VMOVUPS(s, Mem{Base: dp, Disp: 4 * i * lanes})
			}
			VFMADD231PS(s, qb, ov[i])
		}
		ADDQ(sb, xp)
		ADDQ(sb, dp)
		ADDQ(sb, hp)
		ADDQ(U8(4), kp)
		ADDQ(U8(4), qp)
		DECQ(r)
		JNZ(LabelRef(lbl + "row"))
		for i := range nvec {
			VMOVUPS(ov[i], Mem{Base: o, Disp: 4 * i * lanes})
		}
		step := U32(4 * nvec * lanes)
		ADDQ(step, dst)
		ADDQ(step, x)
		ADDQ(step, o)
		ADDQ(step, m)
		ADDQ(step, ah)
		SUBQ(U32(nvec*lanes), n)
	}

	lb := fmt.Sprintf("b%d", big)
	Label(lb)
	CMPQ(n, U32(big*lanes))
	JB(LabelRef("b1"))
	block(lb, big)
	JMP(LabelRef(lb))
	Label("b1")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	block("b1", 1)
	JMP(LabelRef("b1"))
	Label("done")
	if nt {
		SFENCE()
	}
	VZEROUPPER()
	RET()
}
