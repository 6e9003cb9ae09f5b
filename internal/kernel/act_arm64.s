//go:build !purego

#include "textflag.h"

// The elementwise kernels of act.go on n elements, n a multiple of 4:
// pairs of vectors in the loop, then one vector. The numerics are those
// of the amd64 kernels (see _gen/act.go): exp(v) clamps v to [-104, 89]
// (NaN passes FMIN and FMAX), n = round(v*log2(e)) to even, r = v -
// n*ln2 with ln2 split in a float32 head and tail (fused, so the head
// product is exact), e^r by the degree-7 Taylor polynomial in Horner
// form, then 2^n applied in two halves 2^(n>>1) * 2^(n-(n>>1)) built in
// the exponent bits: one rounding down to the subnormals, +Inf past
// 2^128, 0 below -104.

// Instructions the Go assembler has no mnemonic for, encoded by hand
// (d, n, m are vector register numbers 0..31).

// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4S(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))
// FSUB Vd.4S, Vn.4S, Vm.4S
#define FSUB4S(d, n, m) WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4S(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))
// FDIV Vd.4S, Vn.4S, Vm.4S
#define FDIV4S(d, n, m) WORD $(0x6E20FC00 | ((m)<<16) | ((n)<<5) | (d))
// FMAX Vd.4S, Vn.4S, Vm.4S (NaN if either is NaN)
#define FMAX4S(d, n, m) WORD $(0x4E20F400 | ((m)<<16) | ((n)<<5) | (d))
// FMIN Vd.4S, Vn.4S, Vm.4S (NaN if either is NaN)
#define FMIN4S(d, n, m) WORD $(0x4EA0F400 | ((m)<<16) | ((n)<<5) | (d))
// FMLA Vd.4S, Vn.4S, Vm.4S (fused d += n*m)
#define FMLA4S(d, n, m) WORD $(0x4E20CC00 | ((m)<<16) | ((n)<<5) | (d))
// FMLS Vd.4S, Vn.4S, Vm.4S (fused d -= n*m)
#define FMLS4S(d, n, m) WORD $(0x4EA0CC00 | ((m)<<16) | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.S[0]
#define FMULE(d, n, m) WORD $(0x4F809000 | ((m)<<16) | ((n)<<5) | (d))
// FNEG Vd.4S, Vn.4S
#define FNEG4S(d, n) WORD $(0x6EA0F800 | ((n)<<5) | (d))
// FCVTNS Vd.4S, Vn.4S (to int32, nearest with ties to even)
#define FCVTNS4S(d, n) WORD $(0x4E21A800 | ((n)<<5) | (d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF4S(d, n) WORD $(0x4E21D800 | ((n)<<5) | (d))
// SSHR Vd.4S, Vn.4S, #1
#define SSHR1(d, n) WORD $(0x4F3F0400 | ((n)<<5) | (d))
// SHL Vd.4S, Vn.4S, #23
#define SHL23(d, n) WORD $(0x4F375400 | ((n)<<5) | (d))
// ADD Vd.4S, Vn.4S, Vm.4S
#define ADD4S(d, n, m) WORD $(0x4EA08400 | ((m)<<16) | ((n)<<5) | (d))
// SUB Vd.4S, Vn.4S, Vm.4S
#define SUB4S(d, n, m) WORD $(0x6EA08400 | ((m)<<16) | ((n)<<5) | (d))
// MOV Vd.16B, Vn.16B (ORR Vd.16B, Vn.16B, Vn.16B)
#define VCOPY(d, n) WORD $(0x4EA01C00 | ((n)<<16) | ((n)<<5) | (d))

// The constants, each in four lanes, loaded into V16-V29 by LOADCONST:
// V16 log2(e), V17 ln2 head, V18 ln2 tail, V19-V24 1/7! ... 1/2!, V25 1,
// V26 -104, V27 89, V28 0.044715, V29 -2*sqrt(2/pi).
DATA actconstNEON<>+0(SB)/4, $0x3fb8aa3b
DATA actconstNEON<>+4(SB)/4, $0x3fb8aa3b
DATA actconstNEON<>+8(SB)/4, $0x3fb8aa3b
DATA actconstNEON<>+12(SB)/4, $0x3fb8aa3b
DATA actconstNEON<>+16(SB)/4, $0x3f317218
DATA actconstNEON<>+20(SB)/4, $0x3f317218
DATA actconstNEON<>+24(SB)/4, $0x3f317218
DATA actconstNEON<>+28(SB)/4, $0x3f317218
DATA actconstNEON<>+32(SB)/4, $0xb102e308
DATA actconstNEON<>+36(SB)/4, $0xb102e308
DATA actconstNEON<>+40(SB)/4, $0xb102e308
DATA actconstNEON<>+44(SB)/4, $0xb102e308
DATA actconstNEON<>+48(SB)/4, $0x39500d01
DATA actconstNEON<>+52(SB)/4, $0x39500d01
DATA actconstNEON<>+56(SB)/4, $0x39500d01
DATA actconstNEON<>+60(SB)/4, $0x39500d01
DATA actconstNEON<>+64(SB)/4, $0x3ab60b61
DATA actconstNEON<>+68(SB)/4, $0x3ab60b61
DATA actconstNEON<>+72(SB)/4, $0x3ab60b61
DATA actconstNEON<>+76(SB)/4, $0x3ab60b61
DATA actconstNEON<>+80(SB)/4, $0x3c088889
DATA actconstNEON<>+84(SB)/4, $0x3c088889
DATA actconstNEON<>+88(SB)/4, $0x3c088889
DATA actconstNEON<>+92(SB)/4, $0x3c088889
DATA actconstNEON<>+96(SB)/4, $0x3d2aaaab
DATA actconstNEON<>+100(SB)/4, $0x3d2aaaab
DATA actconstNEON<>+104(SB)/4, $0x3d2aaaab
DATA actconstNEON<>+108(SB)/4, $0x3d2aaaab
DATA actconstNEON<>+112(SB)/4, $0x3e2aaaab
DATA actconstNEON<>+116(SB)/4, $0x3e2aaaab
DATA actconstNEON<>+120(SB)/4, $0x3e2aaaab
DATA actconstNEON<>+124(SB)/4, $0x3e2aaaab
DATA actconstNEON<>+128(SB)/4, $0x3f000000
DATA actconstNEON<>+132(SB)/4, $0x3f000000
DATA actconstNEON<>+136(SB)/4, $0x3f000000
DATA actconstNEON<>+140(SB)/4, $0x3f000000
DATA actconstNEON<>+144(SB)/4, $0x3f800000
DATA actconstNEON<>+148(SB)/4, $0x3f800000
DATA actconstNEON<>+152(SB)/4, $0x3f800000
DATA actconstNEON<>+156(SB)/4, $0x3f800000
DATA actconstNEON<>+160(SB)/4, $0xc2d00000
DATA actconstNEON<>+164(SB)/4, $0xc2d00000
DATA actconstNEON<>+168(SB)/4, $0xc2d00000
DATA actconstNEON<>+172(SB)/4, $0xc2d00000
DATA actconstNEON<>+176(SB)/4, $0x42b20000
DATA actconstNEON<>+180(SB)/4, $0x42b20000
DATA actconstNEON<>+184(SB)/4, $0x42b20000
DATA actconstNEON<>+188(SB)/4, $0x42b20000
DATA actconstNEON<>+192(SB)/4, $0x3d372713
DATA actconstNEON<>+196(SB)/4, $0x3d372713
DATA actconstNEON<>+200(SB)/4, $0x3d372713
DATA actconstNEON<>+204(SB)/4, $0x3d372713
DATA actconstNEON<>+208(SB)/4, $0xbfcc422a
DATA actconstNEON<>+212(SB)/4, $0xbfcc422a
DATA actconstNEON<>+216(SB)/4, $0xbfcc422a
DATA actconstNEON<>+220(SB)/4, $0xbfcc422a
GLOBL actconstNEON<>(SB), RODATA|NOPTR, $224

#define LOADCONST \
	MOVD   $actconstNEON<>(SB), R3                        \
	VLD1.P 64(R3), [V16.S4, V17.S4, V18.S4, V19.S4] \
	VLD1.P 64(R3), [V20.S4, V21.S4, V22.S4, V23.S4] \
	VLD1.P 64(R3), [V24.S4, V25.S4, V26.S4, V27.S4] \
	VLD1   (R3), [V28.S4, V29.S4]

// EXP2 sets Vv = exp(Vv) for two vectors at once (a and b, the
// instructions interleaved), with scratch registers t, n, k each.
// Horner alternates between t and k, each step starting from a copy of
// its coefficient; the polynomial ends in t.
#define EXP2(va, ta, na, ka, vb, tb, nb, kb) \
	FMIN4S(va, va, 27)  \
	FMIN4S(vb, vb, 27)  \
	FMAX4S(va, va, 26)  \
	FMAX4S(vb, vb, 26)  \
	FMUL4S(ta, va, 16)  \
	FMUL4S(tb, vb, 16)  \
	FCVTNS4S(na, ta)    \
	FCVTNS4S(nb, tb)    \
	SCVTF4S(ta, na)     \
	SCVTF4S(tb, nb)     \
	FMLS4S(va, ta, 17)  \
	FMLS4S(vb, tb, 17)  \
	FMLS4S(va, ta, 18)  \
	FMLS4S(vb, tb, 18)  \
	VCOPY(ta, 20)       \
	VCOPY(tb, 20)       \
	FMLA4S(ta, 19, va)  \
	FMLA4S(tb, 19, vb)  \
	VCOPY(ka, 21)       \
	VCOPY(kb, 21)       \
	FMLA4S(ka, ta, va)  \
	FMLA4S(kb, tb, vb)  \
	VCOPY(ta, 22)       \
	VCOPY(tb, 22)       \
	FMLA4S(ta, ka, va)  \
	FMLA4S(tb, kb, vb)  \
	VCOPY(ka, 23)       \
	VCOPY(kb, 23)       \
	FMLA4S(ka, ta, va)  \
	FMLA4S(kb, tb, vb)  \
	VCOPY(ta, 24)       \
	VCOPY(tb, 24)       \
	FMLA4S(ta, ka, va)  \
	FMLA4S(tb, kb, vb)  \
	VCOPY(ka, 25)       \
	VCOPY(kb, 25)       \
	FMLA4S(ka, ta, va)  \
	FMLA4S(kb, tb, vb)  \
	VCOPY(ta, 25)       \
	VCOPY(tb, 25)       \
	FMLA4S(ta, ka, va)  \
	FMLA4S(tb, kb, vb)  \
	SSHR1(ka, na)       \
	SSHR1(kb, nb)       \
	SUB4S(na, na, ka)   \
	SUB4S(nb, nb, kb)   \
	SHL23(ka, ka)       \
	SHL23(kb, kb)       \
	SHL23(na, na)       \
	SHL23(nb, nb)       \
	ADD4S(ka, ka, 25)   \
	ADD4S(kb, kb, 25)   \
	ADD4S(na, na, 25)   \
	ADD4S(nb, nb, 25)   \
	FMUL4S(ta, ta, ka)  \
	FMUL4S(tb, tb, kb)  \
	FMUL4S(va, ta, na)  \
	FMUL4S(vb, tb, nb)

// SIGMOID2 sets Vv = Vx/(1+exp(Vv)) for the vector pair: x in V0/V1,
// v in V2/V3, scratch V4-V9.
#define SIGMOID2 \
	EXP2(2, 4, 6, 8, 3, 5, 7, 9) \
	FADD4S(2, 2, 25)             \
	FADD4S(3, 3, 25)             \
	FDIV4S(2, 0, 2)              \
	FDIV4S(3, 1, 3)

// SILU2 sets V2/V3 = silu(V0/V1).
#define SILU2 \
	FNEG4S(2, 0) \
	FNEG4S(3, 1) \
	SIGMOID2

// GELU2 sets V2/V3 = V0/V1 / (1+exp(-2u)), u = sqrt(2/pi)*x*(1+k*x^2),
// which is 0.5*x*(1+tanh(u)).
#define GELU2 \
	FMUL4S(4, 0, 0)  \
	FMUL4S(5, 1, 1)  \
	VCOPY(2, 25)     \
	VCOPY(3, 25)     \
	FMLA4S(2, 4, 28) \
	FMLA4S(3, 5, 28) \
	FMUL4S(2, 0, 2)  \
	FMUL4S(3, 1, 3)  \
	FMUL4S(2, 2, 29) \
	FMUL4S(3, 3, 29) \
	SIGMOID2

// func siluNEON(dst, x *float32, n int)
TEXT ·siluNEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	LOADCONST
	LSR  $3, R2, R4
	CBZ  R4, one

loop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	SILU2
	VST1.P [V2.S4, V3.S4], 32(R0)
	SUBS   $1, R4
	BNE    loop

one:
	TBZ  $2, R2, done
	VLD1 (R1), [V0.S4]
	VORR V0.B16, V0.B16, V1.B16
	SILU2
	VST1 [V2.S4], (R0)

done:
	RET

// func geluTanhNEON(dst, x *float32, n int)
TEXT ·geluTanhNEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	LOADCONST
	LSR  $3, R2, R4
	CBZ  R4, one

loop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	GELU2
	VST1.P [V2.S4, V3.S4], 32(R0)
	SUBS   $1, R4
	BNE    loop

one:
	TBZ  $2, R2, done
	VLD1 (R1), [V0.S4]
	VORR V0.B16, V0.B16, V1.B16
	GELU2
	VST1 [V2.S4], (R0)

done:
	RET

// func siluMulNEON(dst, gate, up *float32, n int)
TEXT ·siluMulNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD gate+8(FP), R1
	MOVD up+16(FP), R5
	MOVD n+24(FP), R2
	LOADCONST
	LSR  $3, R2, R4
	CBZ  R4, one

loop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	VLD1.P 32(R5), [V10.S4, V11.S4]
	SILU2
	FMUL4S(2, 2, 10)
	FMUL4S(3, 3, 11)
	VST1.P [V2.S4, V3.S4], 32(R0)
	SUBS   $1, R4
	BNE    loop

one:
	TBZ  $2, R2, done
	VLD1 (R1), [V0.S4]
	VLD1 (R5), [V10.S4]
	VORR V0.B16, V0.B16, V1.B16
	SILU2
	FMUL4S(2, 2, 10)
	VST1 [V2.S4], (R0)

done:
	RET

// func expSubNEON(x *float32, m float32, n int) float32
// Sums in two vectors of four lanes.
TEXT ·expSubNEON(SB), NOSPLIT, $0-28
	MOVD  x+0(FP), R0
	FMOVS m+8(FP), F30
	MOVD  n+16(FP), R2
	LOADCONST
	VDUP  V30.S[0], V30.S4
	VEOR  V12.B16, V12.B16, V12.B16
	VEOR  V13.B16, V13.B16, V13.B16
	LSR   $3, R2, R4
	CBZ   R4, one

loop:
	VLD1 (R0), [V2.S4, V3.S4]
	FSUB4S(2, 2, 30)
	FSUB4S(3, 3, 30)
	EXP2(2, 4, 6, 8, 3, 5, 7, 9)
	VST1.P [V2.S4, V3.S4], 32(R0)
	FADD4S(12, 12, 2)
	FADD4S(13, 13, 3)
	SUBS   $1, R4
	BNE    loop

one:
	TBZ  $2, R2, done
	VLD1 (R0), [V2.S4]
	FSUB4S(2, 2, 30)
	VORR V2.B16, V2.B16, V3.B16
	EXP2(2, 4, 6, 8, 3, 5, 7, 9)
	VST1 [V2.S4], (R0)
	FADD4S(12, 12, 2)

done:
	FADD4S(12, 12, 13)
	VEXT  $8, V12.B16, V12.B16, V13.B16
	FADD4S(12, 12, 13)
	VDUP  V12.S[1], V13.S4
	FADD4S(12, 12, 13)
	FMOVS F12, ret+24(FP)
	RET

// func scaleNEON(dst, x *float32, s float32, n int)
TEXT ·scaleNEON(SB), NOSPLIT, $0-32
	MOVD  dst+0(FP), R0
	MOVD  x+8(FP), R1
	FMOVS s+16(FP), F31
	MOVD  n+24(FP), R2
	LSR   $4, R2, R4
	CBZ   R4, one

loop:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	FMULE(0, 0, 31)
	FMULE(1, 1, 31)
	FMULE(2, 2, 31)
	FMULE(3, 3, 31)
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUBS   $1, R4
	BNE    loop

one:
	ANDS $15, R2, R4
	BEQ  done

loop1:
	VLD1.P 16(R1), [V0.S4]
	FMULE(0, 0, 31)
	VST1.P [V0.S4], 16(R0)
	SUBS   $4, R4
	BNE    loop1

done:
	RET

// BINARY is the body of mulNEON and addNEON after their arguments are in
// R0 (dst), R1 (a), R5 (b) and R2 (n): dst = op(a, b), op an instruction
// macro on 4S vectors.
#define BINARY(op) \
	LSR  $4, R2, R4                                 \
	CBZ  R4, one                                    \
loop:                                               \
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]     \
	VLD1.P 64(R5), [V4.S4, V5.S4, V6.S4, V7.S4]     \
	op(0, 0, 4)                                     \
	op(1, 1, 5)                                     \
	op(2, 2, 6)                                     \
	op(3, 3, 7)                                     \
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)     \
	SUBS   $1, R4                                   \
	BNE    loop                                     \
one:                                                \
	ANDS $15, R2, R4                                \
	BEQ  done                                       \
loop1:                                              \
	VLD1.P 16(R1), [V0.S4]                          \
	VLD1.P 16(R5), [V4.S4]                          \
	op(0, 0, 4)                                     \
	VST1.P [V0.S4], 16(R0)                          \
	SUBS   $4, R4                                   \
	BNE    loop1                                    \
done:                                               \
	RET

// func mulNEON(dst, a, b *float32, n int)
TEXT ·mulNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD a+8(FP), R1
	MOVD b+16(FP), R5
	MOVD n+24(FP), R2
	BINARY(FMUL4S)

// func addNEON(dst, a, b *float32, n int)
TEXT ·addNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD a+8(FP), R1
	MOVD b+16(FP), R5
	MOVD n+24(FP), R2
	BINARY(FADD4S)
