//go:build !purego

#include "textflag.h"

// FABS Vd.4S, Vn.4S
#define FABS4S(d, n) WORD $(0x4EA0F800 | ((n)<<5) | (d))
// FMAX Vd.4S, Vn.4S, Vm.4S
#define FMAX4S(d, n, m) WORD $(0x4E20F400 | ((m)<<16) | ((n)<<5) | (d))
// FMAXV Sd, Vn.4S
#define FMAXV4S(d, n) WORD $(0x6E30F800 | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.S[0]
#define FMULE(d, n, m) WORD $(0x4F809000 | ((m)<<16) | ((n)<<5) | (d))
// FCVTNS Vd.4S, Vn.4S (round to nearest, ties to even)
#define FCVTNS4S(d, n) WORD $(0x4E21A800 | ((n)<<5) | (d))

// func quantizeQ8NEON(q *int8, d *float32, sum *int32, x *float32, nb int)
//
// The generic rule per block of 32: amax = max|x|, d = amax/127, and
// when amax > 0, q = round_half_even(x * (127/amax)), with the same
// float32 divisions and products, so the result is identical.
TEXT ·quantizeQ8NEON(SB), NOSPLIT, $0-40
	MOVD q+0(FP), R0
	MOVD d+8(FP), R1
	MOVD sum+16(FP), R2
	MOVD x+24(FP), R3
	MOVD nb+32(FP), R4
	MOVW $0x42FE0000, R5 // 127.0
	FMOVS R5, F24
	CBZ  R4, done

block:
	VLD1.P 64(R3), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R3), [V4.S4, V5.S4, V6.S4, V7.S4]
	FABS4S(16, 0)
	FABS4S(17, 1)
	FABS4S(18, 2)
	FABS4S(19, 3)
	FABS4S(20, 4)
	FABS4S(21, 5)
	FABS4S(22, 6)
	FABS4S(23, 7)
	FMAX4S(16, 16, 17)
	FMAX4S(18, 18, 19)
	FMAX4S(20, 20, 21)
	FMAX4S(22, 22, 23)
	FMAX4S(16, 16, 18)
	FMAX4S(20, 20, 22)
	FMAX4S(16, 16, 20)
	FMAXV4S(16, 16)
	FDIVS F24, F16, F25  // d = amax / 127
	FMOVS.P F25, 4(R1)
	FCMPS $(0.0), F16
	BEQ   zero
	FDIVS F16, F24, F26  // id = 127 / amax
	FMULE(0, 0, 26)
	FMULE(1, 1, 26)
	FMULE(2, 2, 26)
	FMULE(3, 3, 26)
	FMULE(4, 4, 26)
	FMULE(5, 5, 26)
	FMULE(6, 6, 26)
	FMULE(7, 7, 26)
	FCVTNS4S(0, 0)
	FCVTNS4S(1, 1)
	FCVTNS4S(2, 2)
	FCVTNS4S(3, 3)
	FCVTNS4S(4, 4)
	FCVTNS4S(5, 5)
	FCVTNS4S(6, 6)
	FCVTNS4S(7, 7)
	VADD  V1.S4, V0.S4, V16.S4
	VADD  V3.S4, V2.S4, V17.S4
	VADD  V5.S4, V4.S4, V18.S4
	VADD  V7.S4, V6.S4, V19.S4
	VADD  V17.S4, V16.S4, V16.S4
	VADD  V19.S4, V18.S4, V18.S4
	VADD  V18.S4, V16.S4, V16.S4
	VADDV V16.S4, V16
	FMOVS.P F16, 4(R2)
	// Narrow the int32 lanes (all within ±127) to bytes, in order.
	VUZP1 V1.H8, V0.H8, V16.H8
	VUZP1 V3.H8, V2.H8, V17.H8
	VUZP1 V5.H8, V4.H8, V18.H8
	VUZP1 V7.H8, V6.H8, V19.H8
	VUZP1 V17.B16, V16.B16, V20.B16
	VUZP1 V19.B16, V18.B16, V21.B16
	VST1.P [V20.B16, V21.B16], 32(R0)
	SUBS $1, R4
	BNE  block
	RET

zero:
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VST1.P [V20.B16, V21.B16], 32(R0)
	MOVW.P ZR, 4(R2)
	SUBS $1, R4
	BNE  block

done:
	RET
