package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The elementwise kernels of act.go on n elements, n a multiple of the
// vector's lanes (the Go side runs the last elements through a padded
// buffer): siluAvx2 siluMulAvx2 expSubAvx2 geluTanhAvx2 scaleAvx2
// mulAvx2 addAvx2, and the Vnni ones on zmm.
//
// exp(v) is range reduced: v is clamped to [-87, 89] (NaN passes the
// clamps), n = round(v*log2(e)), r = v - n*ln2 with ln2 split in a float32
// head and tail (Cody-Waite; with FMA the head product is exact), so
// |r| <= ln2/2; e^r is its degree-7 Taylor polynomial (truncation below
// 1e-8 relative) by Horner, and 2^n multiplies in two halves 2^(n>>1) *
// 2^(n-(n>>1)), each built in the exponent bits, so that past 2^128
// results become +Inf. Below -87 the result is 0: e^-87 is 1.65e-38,
// just above the least normal float32 (2^-126), so no product is ever
// subnormal. Intel cores finish a multiply with a subnormal result (or
// one that underflows to 0) by a microcode assist, over a hundred cycles
// a vector: a row of softmax scores 88 or more below its largest took
// 3-8 times as long as one within 87 (Xeon, Emerald Rapids), and so did
// the lanes that pad a row's last vector. A softmax loses nothing that
// way (its sum is at least 1), silu and gelu add the exponential to 1.

// Offsets of the constants in actconst, each repeated over 16 lanes.
const (
	cLog2e = iota
	cLn2Hi
	cLn2Lo
	cP7 // 1/7! ... 1/2!
	cP6
	cP5
	cP4
	cP3
	cP2
	cOne
	cLo
	cHi
	cBias // int32 127
	cSign // int32 1<<31
	cGeluK
	cGeluM2C // -2*sqrt(2/pi)
	nConsts
)

var actConst Mem

func genActConsts() {
	actConst = GLOBL("actconst", RODATA|NOPTR)
	ln2hi := float32(math.Ln2)
	v := make([]uint32, nConsts)
	f := func(i int, x float64) { v[i] = math.Float32bits(float32(x)) }
	f(cLog2e, 1/math.Ln2)
	v[cLn2Hi] = math.Float32bits(ln2hi)
	f(cLn2Lo, math.Ln2-float64(ln2hi))
	fact := 1.0
	for k := 2; k <= 7; k++ {
		fact *= float64(k)
		f(cP2+2-k, 1/fact)
	}
	f(cOne, 1)
	f(cLo, -87)
	f(cHi, 89)
	v[cBias] = 127
	v[cSign] = 1 << 31
	f(cGeluK, 0.044715)
	f(cGeluM2C, -2*math.Sqrt(2/math.Pi))
	for i, x := range v {
		for l := 0; l < 16; l++ {
			DATA(64*i+4*l, U32(x))
		}
	}
}

// actCtx is one kernel's vector registers and constants: on zmm every
// constant used sits in a register, on ymm only those that must be a
// register operand; the others are memory operands.
type actCtx struct {
	zmm   bool
	lanes int
	va    *vecAlloc
	regs  map[int]V
}

func newActCtx(zmm bool, inReg ...int) *actCtx {
	c := &actCtx{zmm: zmm, lanes: 8, va: newVecAlloc(zmm), regs: map[int]V{}}
	if zmm {
		c.lanes = 16
	}
	c.load(inReg...)
	return c
}

// load loads the constants inReg into registers.
func (c *actCtx) load(inReg ...int) {
	for _, i := range inReg {
		r := c.va.get()
		VMOVUPS(actConst.Offset(64*i), r)
		c.regs[i] = r
	}
}

// c returns constant i as a register or a memory operand.
func (c *actCtx) c(i int) Op {
	if r, ok := c.regs[i]; ok {
		return r
	}
	return actConst.Offset(64 * i)
}

// expConsts are the constants exp keeps in registers (all it uses on
// zmm, with its 32 registers) and more, the caller's own.
func expConsts(zmm bool, more ...int) []int {
	if !zmm {
		return append([]int{cLo, cHi}, more...)
	}
	return append([]int{cLog2e, cLn2Hi, cLn2Lo, cP7, cP6, cP5, cP4, cP3, cP2, cOne, cLo, cHi, cBias}, more...)
}

// exp sets v = exp(v) as the file comment describes.
func (c *actCtx) exp(v V) {
	t, n, n1 := c.va.get(), c.va.get(), c.va.get()
	// keep: the lanes not below -87 (NaN among them), whose result is
	// not flushed to 0.
	const notLess = 5 // NLT_US: not v < lo, true for NaN
	var keepK Register
	var keepV V
	if c.zmm {
		keepK = K()
		VCMPPS(U8(notLess), c.c(cLo), v, keepK)
	} else {
		keepV = c.va.get()
		VCMPPS(U8(notLess), c.c(cLo), v, keepV)
	}
	VMINPS(v, c.c(cHi), v) // v is the operand returned on NaN
	VMAXPS(v, c.c(cLo), v)
	VMULPS(c.c(cLog2e), v, t)
	VCVTPS2DQ(t, n)
	VCVTDQ2PS(n, t)
	VFNMADD231PS(c.c(cLn2Hi), t, v)
	VFNMADD231PS(c.c(cLn2Lo), t, v)
	VMOVUPS(c.c(cP7), t)
	for _, k := range []int{cP6, cP5, cP4, cP3, cP2, cOne, cOne} {
		VFMADD213PS(c.c(k), v, t)
	}
	VPSRAD(U8(1), n, n1)
	VPSUBD(n1, n, n)
	VPADDD(c.c(cBias), n1, n1)
	VPADDD(c.c(cBias), n, n)
	VPSLLD(U8(23), n1, n1)
	VPSLLD(U8(23), n, n)
	VMULPS(n1, t, t)
	if c.zmm {
		VMULPS_Z(n, t, keepK, v)
	} else {
		VMULPS(n, t, v)
		VANDPS(keepV, v, v)
		c.va.put(keepV)
	}
	c.va.put(t, n, n1)
}

// sigmoidTimes sets v = x / (1 + exp(v)).
func (c *actCtx) sigmoidTimes(x, v V) {
	c.exp(v)
	VADDPS(c.c(cOne), v, v)
	VDIVPS(v, x, v)
}

// neg sets v = -x.
func (c *actCtx) neg(x, v V) {
	if c.zmm {
		VPXORD(c.c(cSign), x, v)
	} else {
		VXORPS(c.c(cSign), x, v)
	}
}

// mapLoop emits the loop over n elements (register n) in steps of unroll
// vectors then one; body emits one vector at byte offset off and ptrs
// advance by 4 bytes per element.
func (c *actCtx) mapLoop(n Register, ptrs []Register, unroll int, body func(off int)) {
	Label("loopU")
	CMPQ(n, U32(unroll*c.lanes))
	JB(LabelRef("loop1"))
	for i := 0; i < unroll; i++ {
		body(4 * c.lanes * i)
	}
	for _, p := range ptrs {
		ADDQ(U32(4*unroll*c.lanes), p)
	}
	SUBQ(U32(unroll*c.lanes), n)
	JMP(LabelRef("loopU"))
	Label("loop1")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	body(0)
	for _, p := range ptrs {
		ADDQ(U32(4*c.lanes), p)
	}
	SUBQ(U32(c.lanes), n)
	JMP(LabelRef("loop1"))
	Label("done")
}

func genAct() {
	genActConsts()
	for _, zmm := range []bool{false, true} {
		genUnaryExp("silu", zmm)
		genUnaryExp("geluTanh", zmm)
		genSiLUMul(zmm)
		genExpSub(zmm)
		genMax(zmm)
		genScale(zmm)
		genBinary("mul", zmm)
		genBinary("add", zmm)
		genButterfly(zmm)
		genRotate(zmm)
	}
}

// genRotate writes the plane rotation of RoPE: (a[i], b[i]) =
// (a[i]*cos[i] - b[i]*sin[i], a[i]*sin[i] + b[i]*cos[i]) for n elements,
// each product rounded before the sum (no FMA), as the Go reference
// rounds them.
func genRotate(zmm bool) {
	name := floatName("rotate", zmm, false)
	TEXT(name, NOSPLIT, "func(a *float32, b *float32, cos *float32, sin *float32, n int)")
	Pragma("noescape")
	Doc(name + " sets (a[i], b[i]) = (a[i]*cos[i]-b[i]*sin[i], a[i]*sin[i]+b[i]*cos[i]) for n elements, n a multiple of " + lanesStr(zmm) + ".")
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	cp := Load(Param("cos"), GP64())
	sp := Load(Param("sin"), GP64())
	n := Load(Param("n"), GP64())
	c := newActCtx(zmm)
	c.mapLoop(n, []Register{a, b, cp, sp}, 2, func(off int) {
		x, y, co, si, t := c.va.get(), c.va.get(), c.va.get(), c.va.get(), c.va.get()
		VMOVUPS(Mem{Base: a, Disp: off}, x)
		VMOVUPS(Mem{Base: b, Disp: off}, y)
		VMOVUPS(Mem{Base: cp, Disp: off}, co)
		VMOVUPS(Mem{Base: sp, Disp: off}, si)
		VMULPS(co, x, t)  // a*cos
		VMULPS(si, x, x)  // a*sin
		VMULPS(si, y, si) // b*sin
		VMULPS(co, y, y)  // b*cos
		VSUBPS(si, t, t)
		VADDPS(y, x, x)
		VMOVUPS(t, Mem{Base: a, Disp: off})
		VMOVUPS(x, Mem{Base: b, Disp: off})
		c.va.put(t, si, co, y, x)
	})
	VZEROUPPER()
	RET()
}

// genButterfly writes the Walsh-Hadamard butterfly: (a[i], b[i]) =
// (a[i]+b[i], a[i]-b[i]) for n elements.
func genButterfly(zmm bool) {
	name := floatName("butterfly", zmm, false)
	TEXT(name, NOSPLIT, "func(a *float32, b *float32, n int)")
	Pragma("noescape")
	Doc(name + " sets (a[i], b[i]) = (a[i]+b[i], a[i]-b[i]) for n elements, n a multiple of " + lanesStr(zmm) + ".")
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	c := newActCtx(zmm)
	c.mapLoop(n, []Register{a, b}, 2, func(off int) {
		x, y, s := c.va.get(), c.va.get(), c.va.get()
		VMOVUPS(Mem{Base: a, Disp: off}, x)
		VMOVUPS(Mem{Base: b, Disp: off}, y)
		VADDPS(y, x, s)
		VSUBPS(y, x, x)
		VMOVUPS(s, Mem{Base: a, Disp: off})
		VMOVUPS(x, Mem{Base: b, Disp: off})
		c.va.put(s)
		c.va.put(y)
		c.va.put(x)
	})
	VZEROUPPER()
	RET()
}

// genUnaryExp writes silu (dst = x/(1+exp(-x))) or geluTanh (dst =
// x/(1+exp(-2u)), u = sqrt(2/pi)*x*(1+0.044715*x^2), which is
// 0.5*x*(1+tanh(u))).
func genUnaryExp(op string, zmm bool) {
	name := floatName(op, zmm, false)
	TEXT(name, NOSPLIT, "func(dst *float32, x *float32, n int)")
	Pragma("noescape")
	if op == "silu" {
		Doc(name + " sets dst[i] = x[i]/(1+exp(-x[i])) for n elements, n a multiple of " + lanesStr(zmm) + ".")
	} else {
		Doc(name + " sets dst[i] = 0.5*x[i]*(1+tanh(sqrt(2/pi)*(x[i]+0.044715*x[i]^3))) for n elements, n a multiple of " + lanesStr(zmm) + ".")
	}
	dst := Load(Param("dst"), GP64())
	xp := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	more := []int{cOne} // among expConsts' own on zmm
	if zmm && op == "silu" {
		more = []int{cSign} // silu negates x
	} else if zmm {
		more = []int{cGeluK, cGeluM2C}
	}
	c := newActCtx(zmm, expConsts(zmm, more...)...)
	c.mapLoop(n, []Register{dst, xp}, 2, func(off int) {
		x, v := c.va.get(), c.va.get()
		VMOVUPS(Mem{Base: xp, Disp: off}, x)
		if op == "silu" {
			c.neg(x, v)
		} else {
			VMULPS(x, x, v)
			VFMADD132PS(c.c(cGeluK), c.c(cOne), v) // x^2*k + 1
			VMULPS(x, v, v)
			VMULPS(c.c(cGeluM2C), v, v)
		}
		c.sigmoidTimes(x, v)
		VMOVUPS(v, Mem{Base: dst, Disp: off})
		c.va.put(x, v)
	})
	VZEROUPPER()
	RET()
}

func genSiLUMul(zmm bool) {
	name := floatName("siluMul", zmm, false)
	TEXT(name, NOSPLIT, "func(dst *float32, gate *float32, up *float32, n int)")
	Pragma("noescape")
	Doc(name + " sets dst[i] = gate[i]/(1+exp(-gate[i]))*up[i] for n elements, n a multiple of " + lanesStr(zmm) + ".")
	dst := Load(Param("dst"), GP64())
	gp := Load(Param("gate"), GP64())
	up := Load(Param("up"), GP64())
	n := Load(Param("n"), GP64())
	var more []int
	if zmm {
		more = []int{cSign}
	}
	c := newActCtx(zmm, expConsts(zmm, more...)...)
	c.mapLoop(n, []Register{dst, gp, up}, 2, func(off int) {
		x, v := c.va.get(), c.va.get()
		VMOVUPS(Mem{Base: gp, Disp: off}, x)
		c.neg(x, v)
		c.sigmoidTimes(x, v)
		VMULPS(Mem{Base: up, Disp: off}, v, v)
		VMOVUPS(v, Mem{Base: dst, Disp: off})
		c.va.put(x, v)
	})
	VZEROUPPER()
	RET()
}

func genExpSub(zmm bool) {
	name := floatName("expSub", zmm, false)
	TEXT(name, NOSPLIT, "func(x *float32, m float32, n int) float32")
	Pragma("noescape")
	Doc(name + " sets x[i] = exp(x[i]-m) for n elements, n a multiple of " + lanesStr(zmm) + ", and returns their sum.")
	xp := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	// m is broadcast from its argument slot. Loading it into an X
	// register first (MOVSS, a legacy SSE instruction) after the
	// constants dirtied the vector registers' upper halves cost about
	// 180 ns a call on an Intel Xeon (Emerald Rapids): more than the
	// exponentials of a 128-element row.
	c := newActCtx(zmm)
	mv := c.va.get()
	VBROADCASTSS(paramMem("m"), mv)
	c.load(expConsts(zmm)...)
	sum := c.va.get()
	if zmm {
		VPXORD(sum, sum, sum)
	} else {
		VXORPS(sum, sum, sum)
	}
	c.mapLoop(n, []Register{xp}, 2, func(off int) {
		v := c.va.get()
		VMOVUPS(Mem{Base: xp, Disp: off}, v)
		VSUBPS(mv, v, v)
		c.exp(v)
		VMOVUPS(v, Mem{Base: xp, Disp: off})
		VADDPS(v, sum, sum)
		c.va.put(v)
	})
	r := hsum(zmm, c.va, sum)
	VZEROUPPER()
	Store(r.AsX(), ReturnIndex(0))
	RET()
}

// genMax writes the largest of n elements (n a multiple of the lanes),
// from floor: two running maxima, then the lanes'.
func genMax(zmm bool) {
	name := floatName("max", zmm, false)
	TEXT(name, NOSPLIT, "func(x *float32, n int, floor float32) float32")
	Pragma("noescape")
	Doc(name + " returns the largest of floor and x[i] for n elements, n a multiple of " + lanesStr(zmm) + ".")
	xp := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	c := newActCtx(zmm)
	a, b := c.va.get(), c.va.get()
	VBROADCASTSS(Load(Param("floor"), XMM()), a)
	if zmm {
		VMOVDQA32(a, b)
	} else {
		VMOVAPS(a, b)
	}
	acc := []V{a, b}
	c.mapLoop(n, []Register{xp}, 2, func(off int) {
		m := acc[off/(4*c.lanes)%2]
		VMAXPS(Mem{Base: xp, Disp: off}, m, m)
	})
	VMAXPS(b, a, a)
	x := hreduce(zmm, c.va, a, true).AsX()
	VZEROUPPER()
	Store(x, ReturnIndex(0))
	RET()
}

func genScale(zmm bool) {
	name := floatName("scale", zmm, false)
	TEXT(name, NOSPLIT, "func(dst *float32, x *float32, s float32, n int)")
	Pragma("noescape")
	Doc(name + " sets dst[i] = x[i]*s for n elements, n a multiple of " + lanesStr(zmm) + ".")
	dst := Load(Param("dst"), GP64())
	xp := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	c := newActCtx(zmm)
	sv := c.va.get()
	VBROADCASTSS(Load(Param("s"), XMM()), sv)
	c.mapLoop(n, []Register{dst, xp}, 4, func(off int) {
		v := c.va.get()
		VMULPS(Mem{Base: xp, Disp: off}, sv, v)
		VMOVUPS(v, Mem{Base: dst, Disp: off})
		c.va.put(v)
	})
	VZEROUPPER()
	RET()
}

// genBinary writes mul (dst = a*b) or add (dst = a+b).
func genBinary(op string, zmm bool) {
	name := floatName(op, zmm, false)
	TEXT(name, NOSPLIT, "func(dst *float32, a *float32, b *float32, n int)")
	Pragma("noescape")
	sym := "*"
	if op == "add" {
		sym = "+"
	}
	Doc(name + " sets dst[i] = a[i]" + sym + "b[i] for n elements, n a multiple of " + lanesStr(zmm) + ".")
	dst := Load(Param("dst"), GP64())
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	c := newActCtx(zmm)
	c.mapLoop(n, []Register{dst, a, b}, 4, func(off int) {
		v := c.va.get()
		VMOVUPS(Mem{Base: a, Disp: off}, v)
		if op == "add" {
			VADDPS(Mem{Base: b, Disp: off}, v, v)
		} else {
			VMULPS(Mem{Base: b, Disp: off}, v, v)
		}
		VMOVUPS(v, Mem{Base: dst, Disp: off})
		c.va.put(v)
	})
	VZEROUPPER()
	RET()
}

// paramMem is the memory operand of the argument name, for an
// instruction that reads it in place (VBROADCASTSS from memory is
// VEX-encoded, where Load into an X register emits a legacy SSE move).
func paramMem(name string) Op {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}
