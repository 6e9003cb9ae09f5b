//go:build !purego

#include "textflag.h"

// Instructions the Go assembler has no mnemonic for, encoded by hand
// (d, n, m are vector register numbers 0..31).

// MOVI Vd.2D, #0
#define ZERO(d) WORD $(0x6F00E400 | (d))
// SDOT Vd.4S, Vn.16B, Vm.16B
#define SDOT(d, n, m) WORD $(0x4E809400 | ((m)<<16) | ((n)<<5) | (d))
// SMULL Vd.8H, Vn.8B, Vm.8B
#define SMULL(d, n, m) WORD $(0x0E20C000 | ((m)<<16) | ((n)<<5) | (d))
// SMLAL Vd.8H, Vn.8B, Vm.8B
#define SMLAL(d, n, m) WORD $(0x0E208000 | ((m)<<16) | ((n)<<5) | (d))
// SMLAL2 Vd.8H, Vn.16B, Vm.16B
#define SMLAL2(d, n, m) WORD $(0x4E208000 | ((m)<<16) | ((n)<<5) | (d))
// SADALP Vd.4S, Vn.8H
#define SADALP(d, n) WORD $(0x4E606800 | ((n)<<5) | (d))
// SADDLP Vd.4S, Vn.8H
#define SADDLP(d, n) WORD $(0x4E602800 | ((n)<<5) | (d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF4S(d, n) WORD $(0x4E21D800 | ((n)<<5) | (d))
// FMLA Vd.4S, Vn.4S, Vm.S[0]
#define FMLAE(d, n, m) WORD $(0x4F801000 | ((m)<<16) | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.S[0]
#define FMULE(d, n, m) WORD $(0x4F809000 | ((m)<<16) | ((n)<<5) | (d))
// FADDP Vd.4S, Vn.4S, Vm.4S
#define FADDP4S(d, n, m) WORD $(0x6E20D400 | ((m)<<16) | ((n)<<5) | (d))
// FADDP Sd, Vn.2S
#define FADDP2S(d, n) WORD $(0x7E30D800 | ((n)<<5) | (d))

// The int32x4 partial sums in Vacc of the signed weights (wl, wh) times
// the activations (xl, xh) of a block of 32.
#define DOT_SDOT(acc, tmp, wl, wh, xl, xh) \
	ZERO(acc)         \
	SDOT(acc, wl, xl) \
	SDOT(acc, wh, xh)

// The same with widening multiplies: |w*x| <= 128*127, so only two
// products per int16 lane before widening to int32.
#define DOT_NEON(acc, tmp, wl, wh, xl, xh) \
	SMULL(tmp, wl, xl)  \
	SMLAL2(tmp, wl, xl) \
	SADDLP(acc, tmp)    \
	SMULL(tmp, wh, xh)  \
	SMLAL2(tmp, wh, xh) \
	SADALP(acc, tmp)

// Arguments of every w8 row kernel (see w8_arm64.go):
// dst+0 ldd+8 u+16 nrows+24 nb+32 scales+40 xq+48 K+56 xd+64.
//
// Registers: R0 dst of the row, R1 ldd*4, R2 u, R3 rows left, R4 nb,
// R6 row scales, R7 xq, R8 K, R9 xd, R10 nb*4, R11-R14 activations of
// tokens 0-3, R15-R17,R19 their block scales, R20 blocks left, R21 and
// R23 scratch. V1 0x80, V3/V4 signed weights, V5-V12 activations, V13-V16
// block dots, V17-V20 row sums, V21 row scale, V22-V25 activation scales,
// V26-V29 int16 scratch.

#define W8_PROLOGUE \
	MOVD dst+0(FP), R0     \
	MOVD ldd+8(FP), R1     \
	LSL  $2, R1            \
	MOVD u+16(FP), R2      \
	MOVD nrows+24(FP), R3  \
	MOVD nb+32(FP), R4     \
	MOVD scales+40(FP), R6 \
	MOVD xq+48(FP), R7     \
	MOVD K+56(FP), R8      \
	MOVD xd+64(FP), R9     \
	LSL  $2, R4, R10       \
	VMOVI $128, V1.B16

// Loads the block at R2 into V3, V4 as signed q = U - 128.
#define W8_BLOCK \
	VLD1.P 32(R2), [V3.B16, V4.B16] \
	VEOR   V1.B16, V3.B16, V3.B16   \
	VEOR   V1.B16, V4.B16, V4.B16

#define W8_ROWS4(DOT) \
	W8_PROLOGUE \
row4:                                 \
	MOVD R7, R11                      \
	ADD  R8, R11, R12                 \
	ADD  R8, R12, R13                 \
	ADD  R8, R13, R14                 \
	MOVD R9, R15                      \
	ADD  R10, R15, R16                \
	ADD  R10, R16, R17                \
	ADD  R10, R17, R19                \
	ZERO(17)                          \
	ZERO(18)                          \
	ZERO(19)                          \
	ZERO(20)                          \
	MOVD R4, R20                      \
block4:                               \
	W8_BLOCK                          \
	VLD1.P 32(R11), [V5.B16, V6.B16]  \
	VLD1.P 32(R12), [V7.B16, V8.B16]  \
	VLD1.P 32(R13), [V9.B16, V10.B16] \
	VLD1.P 32(R14), [V11.B16, V12.B16] \
	FMOVS.P 4(R15), F22               \
	FMOVS.P 4(R16), F23               \
	FMOVS.P 4(R17), F24               \
	FMOVS.P 4(R19), F25               \
	DOT(13, 26, 3, 4, 5, 6)           \
	DOT(14, 27, 3, 4, 7, 8)           \
	DOT(15, 28, 3, 4, 9, 10)          \
	DOT(16, 29, 3, 4, 11, 12)         \
	SCVTF4S(13, 13)                   \
	SCVTF4S(14, 14)                   \
	SCVTF4S(15, 15)                   \
	SCVTF4S(16, 16)                   \
	FMLAE(17, 13, 22)                 \
	FMLAE(18, 14, 23)                 \
	FMLAE(19, 15, 24)                 \
	FMLAE(20, 16, 25)                 \
	SUBS $1, R20                      \
	BNE  block4                       \
	FADDP4S(17, 17, 18)               \
	FADDP4S(19, 19, 20)               \
	FADDP4S(17, 17, 19)               \
	FMOVS.P 4(R6), F21                \
	FMULE(17, 17, 21)                 \
	MOVD R0, R21                      \
	FMOVS F17, (R21)                  \
	ADD  R1, R21                      \
	VMOV V17.S[1], R23                \
	MOVW R23, (R21)                   \
	ADD  R1, R21                      \
	VMOV V17.S[2], R23                \
	MOVW R23, (R21)                   \
	ADD  R1, R21                      \
	VMOV V17.S[3], R23                \
	MOVW R23, (R21)                   \
	ADD  $4, R0                       \
	SUBS $1, R3                       \
	BNE  row4                         \
	RET

#define W8_ROWS1(DOT) \
	W8_PROLOGUE \
row1:                                 \
	MOVD R7, R11                      \
	MOVD R9, R15                      \
	ZERO(17)                          \
	MOVD R4, R20                      \
block1:                               \
	W8_BLOCK                          \
	VLD1.P 32(R11), [V5.B16, V6.B16]  \
	FMOVS.P 4(R15), F22               \
	DOT(13, 26, 3, 4, 5, 6)           \
	SCVTF4S(13, 13)                   \
	FMLAE(17, 13, 22)                 \
	SUBS $1, R20                      \
	BNE  block1                       \
	FADDP4S(17, 17, 17)               \
	FADDP2S(17, 17)                   \
	FMOVS.P 4(R6), F21                \
	FMULS F21, F17, F17               \
	FMOVS F17, (R0)                   \
	ADD  $4, R0                       \
	SUBS $1, R3                       \
	BNE  row1                         \
	RET

// func w8Rows1SDOT(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)
TEXT ·w8Rows1SDOT(SB), NOSPLIT, $0-72
	W8_ROWS1(DOT_SDOT)

// func w8Rows4SDOT(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)
TEXT ·w8Rows4SDOT(SB), NOSPLIT, $0-72
	W8_ROWS4(DOT_SDOT)

// func w8Rows1NEON(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)
TEXT ·w8Rows1NEON(SB), NOSPLIT, $0-72
	W8_ROWS1(DOT_NEON)

// func w8Rows4NEON(dst *float32, ldd int, u *uint8, nrows, nb int, scales *float32, xq *int8, K int, xd *float32)
TEXT ·w8Rows4NEON(SB), NOSPLIT, $0-72
	W8_ROWS4(DOT_NEON)
