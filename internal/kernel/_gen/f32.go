package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genFloat writes the float32 dot products and updates of attention, on
// n elements, n a multiple of 4 vectors' lanes (the Go side does the
// rest): dotAvx2 dotF16Avx2 axpyAvx2 axpyF16Avx2 and the Vnni ones on zmm.
func genFloat() {
	for _, zmm := range []bool{false, true} {
		for _, f16 := range []bool{false, true} {
			genDot(zmm, f16)
			genAxpy(zmm, f16)
		}
	}
}

func floatName(op string, zmm, f16 bool) string {
	if f16 {
		op += "F16"
	}
	if zmm {
		return op + "Vnni"
	}
	return op + "Avx2"
}

// loadB loads lanes elements of b (float32, or binary16 widened by F16C).
func loadB(zmm, f16 bool, m Mem, dst VecVirtual) {
	switch {
	case f16 && zmm:
		VCVTPH2PS(m, dst)
	case f16:
		VCVTPH2PS(m, dst)
	default:
		VMOVUPS(m, dst)
	}
}

const unroll = 4

func genDot(zmm, f16 bool) {
	name := floatName("dot", zmm, f16)
	sig := "func(a *float32, b *float32, n int) float32"
	if f16 {
		sig = "func(a *float32, b *uint16, n int) float32"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " returns the dot product of n elements, n a multiple of " + lanesStr(zmm) + ".")
	vec, lanes := YMM, 8
	if zmm {
		vec, lanes = ZMM, 16
	}
	esz := 4
	if f16 {
		esz = 2
	}
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	acc := make([]VecVirtual, unroll)
	for i := range acc {
		acc[i] = vec()
		if zmm {
			VPXORD(acc[i], acc[i], acc[i])
		} else {
			VXORPS(acc[i], acc[i], acc[i])
		}
	}
	Label("loop4")
	CMPQ(n, U32(unroll*lanes))
	JB(LabelRef("loop1"))
	for i := range acc {
		v := vec()
		loadB(zmm, f16, Mem{Base: b, Disp: i * lanes * esz}, v)
		VFMADD231PS(Mem{Base: a, Disp: i * lanes * 4}, v, acc[i])
	}
	ADDQ(U32(unroll*lanes*4), a)
	ADDQ(U32(unroll*lanes*esz), b)
	SUBQ(U32(unroll*lanes), n)
	JMP(LabelRef("loop4"))
	Label("loop1")
	TESTQ(n, n)
	JZ(LabelRef("sum"))
	v := vec()
	loadB(zmm, f16, Mem{Base: b}, v)
	VFMADD231PS(Mem{Base: a}, v, acc[0])
	ADDQ(U32(lanes*4), a)
	ADDQ(U32(lanes*esz), b)
	SUBQ(U32(lanes), n)
	JMP(LabelRef("loop1"))
	Label("sum")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	var y Register = acc[0]
	if zmm {
		yy := YMM()
		VEXTRACTF64X4(U8(1), acc[0], yy)
		VADDPS(yy, acc[0].AsY(), yy)
		y = yy
	}
	x, t := XMM(), XMM()
	if zmm {
		VEXTRACTF32X4(U8(1), y, x)
	} else {
		VEXTRACTF128(U8(1), y, x)
	}
	VADDPS(x, y.(Vec).AsX(), x)
	VPERMILPS(U8(0x4e), x, t)
	VADDPS(t, x, x)
	VPERMILPS(U8(0xb1), x, t)
	VADDSS(t, x, x)
	VZEROUPPER()
	Store(x, ReturnIndex(0))
	RET()
}

func genAxpy(zmm, f16 bool) {
	name := floatName("axpy", zmm, f16)
	sig := "func(y *float32, alpha float32, x *float32, n int)"
	if f16 {
		sig = "func(y *float32, alpha float32, x *uint16, n int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " sets y[i] += alpha*x[i] for n elements, n a multiple of " + lanesStr(zmm) + ".")
	vec, lanes := YMM, 8
	if zmm {
		vec, lanes = ZMM, 16
	}
	esz := 4
	if f16 {
		esz = 2
	}
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	al := vec()
	VBROADCASTSS(Load(Param("alpha"), XMM()), al)
	Label("loop")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	v, w := vec(), vec()
	loadB(zmm, f16, Mem{Base: x}, v)
	VMOVUPS(Mem{Base: y}, w)
	VFMADD231PS(v, al, w)
	VMOVUPS(w, Mem{Base: y})
	ADDQ(U32(lanes*4), y)
	ADDQ(U32(lanes*esz), x)
	SUBQ(U32(lanes), n)
	JMP(LabelRef("loop"))
	Label("done")
	VZEROUPPER()
	RET()
}

func lanesStr(zmm bool) string {
	if zmm {
		return "16"
	}
	return "8"
}
