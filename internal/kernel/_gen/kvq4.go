package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genKVQ4 writes the 4-bit KV cache row kernels (kernel.DotKVQ4 and
// kernel.AxpyKVQ4 on rows of groups of 32 values): dotKVQ4Avx2,
// axpyKVQ4Avx2 and the Vnni ones on zmm.
func genKVQ4() {
	for _, zmm := range []bool{false, true} {
		genDotKVQ4(zmm)
		genAxpyKVQ4(zmm)
	}
}

// kvq4Codes loads group codes at m (16 bytes: element i in the low
// nibble of byte i, element i+16 in the high one) as float32 vectors in
// element order: 4 ymm of 8 elements, or 2 zmm of 16.
func kvq4Codes(zmm bool, m Mem, mask VecVirtual) []VecVirtual {
	if zmm {
		lo, hi := ZMM(), ZMM()
		VPMOVZXBD(m, lo)
		VPSRLD(Imm(4), lo, hi)
		VPANDD(mask, lo, lo)
		VCVTDQ2PS(lo, lo)
		VCVTDQ2PS(hi, hi)
		return []VecVirtual{lo, hi}
	}
	c := []VecVirtual{YMM(), YMM(), YMM(), YMM()}
	VPMOVZXBD(m, c[0])
	VPMOVZXBD(m.Offset(8), c[1])
	VPSRLD(Imm(4), c[0], c[2])
	VPSRLD(Imm(4), c[1], c[3])
	VPAND(mask, c[0], c[0])
	VPAND(mask, c[1], c[1])
	for _, v := range c {
		VCVTDQ2PS(v, v)
	}
	return c
}

// kvq4Meta broadcasts the binary16 step and offset at m into d and m2.
func kvq4Meta(m Mem, d, m2 VecVirtual) {
	x, t := XMM(), XMM()
	VMOVD(m, x)
	VCVTPH2PS(x, x)
	VBROADCASTSS(x, d)
	VMOVSHDUP(x, t)
	VBROADCASTSS(t, m2)
}

// kvq4Mask returns a vector of the dword 15.
func kvq4Mask(zmm bool) VecVirtual {
	r := GP32()
	MOVL(U32(15), r)
	x := XMM()
	VMOVD(r, x)
	var mask VecVirtual = YMM()
	if zmm {
		mask = ZMM()
	}
	VPBROADCASTD(x, mask)
	return mask
}

func genDotKVQ4(zmm bool) {
	name := floatName("dotKVQ4", zmm, false)
	TEXT(name, NOSPLIT, "func(q *float32, src *uint8, groups int) float32")
	Pragma("noescape")
	Doc(name + " returns the dot product of the 32*groups values q with the 4-bit row src of groups groups of 32 (kernel.DotKVQ4), groups > 0.")
	q := Load(Param("q"), GP64())
	codes := Load(Param("src"), GP64())
	n := Load(Param("groups"), GP64())
	meta := GP64()
	MOVQ(n, meta)
	SHLQ(Imm(4), meta)
	ADDQ(codes, meta)
	vec, lanes := YMM, 8
	if zmm {
		vec, lanes = ZMM, 16
	}
	mask := kvq4Mask(zmm)
	acc := vec()
	VXORPS(acc, acc, acc)
	Label(name + "_loop")
	c := kvq4Codes(zmm, Mem{Base: codes}, mask)
	gc, gq := vec(), vec()
	VMOVUPS(Mem{Base: q}, gq)
	VMULPS(gq, c[0], gc)
	for i := 1; i < len(c); i++ {
		qv := vec()
		VMOVUPS(Mem{Base: q, Disp: 4 * lanes * i}, qv)
		VFMADD231PS(qv, c[i], gc)
		VADDPS(qv, gq, gq)
	}
	d, m := vec(), vec()
	kvq4Meta(Mem{Base: meta}, d, m)
	VFMADD231PS(d, gc, acc)
	VFMADD231PS(m, gq, acc)
	ADDQ(Imm(128), q)
	ADDQ(Imm(16), codes)
	ADDQ(Imm(4), meta)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	var y Register = acc
	if zmm {
		yy := YMM()
		VEXTRACTF64X4(U8(1), acc, yy)
		VADDPS(yy, acc.AsY(), yy)
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

func genAxpyKVQ4(zmm bool) {
	name := floatName("axpyKVQ4", zmm, false)
	TEXT(name, NOSPLIT, "func(y *float32, alpha float32, src *uint8, groups int)")
	Pragma("noescape")
	Doc(name + " adds alpha times the values of the 4-bit row src of groups groups of 32 to the 32*groups values y (kernel.AxpyKVQ4), groups > 0.")
	y := Load(Param("y"), GP64())
	codes := Load(Param("src"), GP64())
	n := Load(Param("groups"), GP64())
	vec, lanes := YMM, 8
	if zmm {
		vec, lanes = ZMM, 16
	}
	al := vec()
	VBROADCASTSS(Load(Param("alpha"), XMM()), al)
	meta := GP64()
	MOVQ(n, meta)
	SHLQ(Imm(4), meta)
	ADDQ(codes, meta)
	mask := kvq4Mask(zmm)
	Label(name + "_loop")
	c := kvq4Codes(zmm, Mem{Base: codes}, mask)
	d, m := vec(), vec()
	kvq4Meta(Mem{Base: meta}, d, m)
	VMULPS(al, d, d)
	VMULPS(al, m, m)
	for i := range c {
		yv := vec()
		at := Mem{Base: y, Disp: 4 * lanes * i}
		VMOVUPS(at, yv)
		VADDPS(m, yv, yv)
		VFMADD231PS(c[i], d, yv)
		VMOVUPS(yv, at)
	}
	ADDQ(Imm(128), y)
	ADDQ(Imm(16), codes)
	ADDQ(Imm(4), meta)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	VZEROUPPER()
	RET()
}
