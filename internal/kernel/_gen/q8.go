package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genQuantize writes quantizeQ8Avx2 and quantizeQ8Vnni: the rule of
// quantizeQ8Generic on nb whole blocks, bit for bit (the same float32
// amax, amax/127 and 127/amax, x*id rounded to nearest even by
// VCVTPS2DQ under Go's default MXCSR).
func genQuantize() {
	for _, zmm := range []bool{false, true} {
		name := "quantizeQ8Avx2"
		if zmm {
			name = "quantizeQ8Vnni"
		}
		TEXT(name, NOSPLIT, "func(q *int8, d *float32, sum *int32, x *float32, nb int)")
		Pragma("noescape")
		Doc(name + " quantizes nb blocks of QK floats of x into q, d and sum.")
		q := Load(Param("q"), GP64())
		d := Load(Param("d"), GP64())
		sum := Load(Param("sum"), GP64())
		x := Load(Param("x"), GP64())
		nb := Load(Param("nb"), GP64())
		t32 := GP32()

		nv := 4 // vectors per block
		vec := func() VecVirtual { return YMM() }
		if zmm {
			nv = 2
			vec = func() VecVirtual { return ZMM() }
		}
		absMask := vec()
		MOVL(U32(0x7fffffff), t32)
		broadcastD(zmm, t32, absMask)
		c127 := XMM()
		MOVL(U32(0x42fe0000), t32) // 127.0
		VMOVD(t32, c127)
		var perm VecVirtual
		if !zmm {
			perm = YMM()
			VMOVDQU(packPerm, perm)
		}

		Label("block")
		TESTQ(nb, nb)
		JZ(LabelRef("done"))
		v := make([]VecVirtual, nv)
		m := vec()
		for i := range v {
			v[i] = vec()
			VMOVUPS(Mem{Base: x, Disp: 4 * QKLanes(zmm) * i}, v[i])
			a := vec()
			if zmm {
				VPANDD(v[i], absMask, a)
			} else {
				VANDPS(v[i], absMask, a)
			}
			if i == 0 {
				VMOVUPS(a, m)
			} else {
				VMAXPS(a, m, m)
			}
		}
		// Horizontal max into the low lane.
		var y Register = m
		if zmm {
			yy := YMM()
			VEXTRACTF64X4(U8(1), m, yy)
			VMAXPS(yy, m.AsY(), yy)
			y = yy
		}
		amax, t := XMM(), XMM()
		if zmm {
			VEXTRACTF32X4(U8(1), y, amax)
		} else {
			VEXTRACTF128(U8(1), y, amax)
		}
		VMAXPS(amax, y.(Vec).AsX(), amax)
		VPERMILPS(U8(0x4e), amax, t)
		VMAXPS(t, amax, amax)
		VPERMILPS(U8(0xb1), amax, t)
		VMAXSS(t, amax, amax)
		// d = amax / 127
		VDIVSS(c127, amax, t)
		VMOVSS(t, Mem{Base: d})
		VXORPS(t, t, t)
		VUCOMISS(t, amax)
		JE(LabelRef("zero"))
		// id = 127 / amax, broadcast.
		id := vec()
		VDIVSS(amax, c127, t)
		VBROADCASTSS(t, id)
		iv := make([]VecVirtual, nv)
		for i := range v {
			iv[i] = vec()
			VMULPS(id, v[i], iv[i])
			VCVTPS2DQ(iv[i], iv[i])
		}
		s := vec()
		if zmm {
			VPADDD(iv[0], iv[1], s)
			VPMOVSDB(iv[0], Mem{Base: q})
			VPMOVSDB(iv[1], Mem{Base: q, Disp: 16})
			ys := YMM()
			VEXTRACTI64X4(U8(1), s, ys)
			VPADDD(ys, s.AsY(), ys)
			s = ys
		} else {
			VPADDD(iv[0], iv[1], s)
			VPADDD(iv[2], s, s)
			VPADDD(iv[3], s, s)
			p0, p1 := YMM(), YMM()
			VPACKSSDW(iv[1], iv[0], p0)
			VPACKSSDW(iv[3], iv[2], p1)
			VPACKSSWB(p1, p0, p0)
			VPERMD(p0, perm, p0)
			VMOVDQU(p0, Mem{Base: q})
		}
		xs := XMM()
		if zmm {
			VEXTRACTI32X4(U8(1), s, xs)
		} else {
			VEXTRACTI128(U8(1), s, xs)
		}
		VPADDD(xs, s.AsX(), xs)
		xt := XMM()
		VPSHUFD(U8(0x4e), xs, xt)
		VPADDD(xt, xs, xs)
		VPSHUFD(U8(0xb1), xs, xt)
		VPADDD(xt, xs, xs)
		VMOVD(xs, Mem{Base: sum})
		JMP(LabelRef("next"))

		Label("zero")
		VXORPS(t.AsY(), t.AsY(), t.AsY())
		VMOVDQU(t.AsY(), Mem{Base: q})
		MOVL(U32(0), Mem{Base: sum})

		Label("next")
		ADDQ(U32(32), q)
		ADDQ(U32(4), d)
		ADDQ(U32(4), sum)
		ADDQ(U32(128), x)
		DECQ(nb)
		JMP(LabelRef("block"))

		Label("done")
		VZEROUPPER()
		RET()
	}
}

// QKLanes is the float32 lanes of a vector.
func QKLanes(zmm bool) int {
	if zmm {
		return 16
	}
	return 8
}
