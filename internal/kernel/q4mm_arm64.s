//go:build !purego

#include "textflag.h"

// Instructions the Go assembler has no mnemonic for (d, n, m are vector
// register numbers 0..31).

// MOVI Vd.2D, #0
#define ZERO(d) WORD $(0x6F00E400 | (d))
// SMMLA Vd.4S, Vn.16B, Vm.16B: Vd += the 2x2 products of Vn's two rows of
// 8 signed bytes with Vm's two rows (lanes [n0.m0, n0.m1, n1.m0, n1.m1]).
#define SMMLA(d, n, m) WORD $(0x4E80A400 | ((m)<<16) | ((n)<<5) | (d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF4S(d, n) WORD $(0x4E21D800 | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMULV(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))
// FMLA Vd.4S, Vn.4S, Vm.4S
#define FMLAV(d, n, m) WORD $(0x4E20CC00 | ((m)<<16) | ((n)<<5) | (d))

// Stores the 2x4 tile of a pair of rows: V27 = [r0.t0, r0.t1, r1.t0,
// r1.t1], V28 the same for tokens 2 and 3, to dst at R0 (row stride R1
// bytes per token); R15, R16 scratch.
#define STORE_2X4 \
	MOVD R0, R15             \
	FMOVS F27, (R15)         \
	VMOV  V27.S[2], R16      \
	MOVW  R16, 4(R15)        \
	ADD   R1, R15            \
	VMOV  V27.S[1], R16      \
	MOVW  R16, (R15)         \
	VMOV  V27.S[3], R16      \
	MOVW  R16, 4(R15)        \
	ADD   R1, R15            \
	FMOVS F28, (R15)         \
	VMOV  V28.S[2], R16      \
	MOVW  R16, 4(R15)        \
	ADD   R1, R15            \
	VMOV  V28.S[1], R16      \
	MOVW  R16, (R15)         \
	VMOV  V28.S[3], R16      \
	MOVW  R16, 4(R15)

// func q4Rows2x4MMLA(dst *float32, ldd int, nib *byte, npairs, nb int, codes *uint8, scales *float32, rec *byte)
//
// npairs pairs of rows against four tokens (see q4MatMulI8MM). Per block
// of 32: the two rows' codes minus 8 are interleaved by 8 bytes ([r0
// k0..7 | r1 k0..7], ...) to the SMMLA row layout the token records
// already have, four SMMLA per pair of tokens give the 2x2 integer dots
// [r0.t0, r0.t1, r1.t0, r1.t1], and those are scaled by the lanes
// [s0, s0, s1, s1] times the record's [d0, d1, d0, d1].
//
// Registers: R0 dst of the pair, R1 ldd*4, R2 nib of the pair, R3 pairs
// left, R4 nb, R5 codes (0: per-block scales), R6 scales, R7 rec, R8
// nb*16, R9/R10 the rows' codes, R11 rec (advancing), R12/R13 the rows'
// block codes or scales, R14 blocks left, R15/R16 scratch. V0 0x0f, V1
// 8, V2 packed block, V3-V6 codes minus 8, V7-V10 interleaved weights,
// V11-V18 token records, V19/V20 their scales, V21/V22 block dots,
// V23/V24 block scales, V25/V26 scale products, V27/V28 sums.
TEXT ·q4Rows2x4MMLA(SB), NOSPLIT, $0-64
	MOVD dst+0(FP), R0
	MOVD ldd+8(FP), R1
	LSL  $2, R1
	MOVD nib+16(FP), R2
	MOVD npairs+24(FP), R3
	MOVD nb+32(FP), R4
	MOVD codes+40(FP), R5
	MOVD scales+48(FP), R6
	MOVD rec+56(FP), R7
	LSL  $4, R4, R8
	VMOVI $15, V0.B16
	VMOVI $8, V1.B16

pair:
	MOVD R2, R9
	ADD  R8, R2, R10
	MOVD R7, R11
	CBZ  R5, scalesform
	MOVD R5, R12
	ADD  R4, R5, R13
	B    setup

scalesform:
	MOVD R6, R12
	ADD  R4<<2, R6, R13

setup:
	ZERO(27)
	ZERO(28)
	MOVD R4, R14

block:
	VLD1.P 16(R9), [V2.B16]
	VAND   V0.B16, V2.B16, V3.B16
	VUSHR  $4, V2.B16, V4.B16
	VSUB   V1.B16, V3.B16, V3.B16
	VSUB   V1.B16, V4.B16, V4.B16
	VLD1.P 16(R10), [V2.B16]
	VAND   V0.B16, V2.B16, V5.B16
	VUSHR  $4, V2.B16, V6.B16
	VSUB   V1.B16, V5.B16, V5.B16
	VSUB   V1.B16, V6.B16, V6.B16
	VZIP1  V5.D2, V3.D2, V7.D2
	VZIP2  V5.D2, V3.D2, V8.D2
	VZIP1  V6.D2, V4.D2, V9.D2
	VZIP2  V6.D2, V4.D2, V10.D2
	VLD1.P 64(R11), [V11.B16, V12.B16, V13.B16, V14.B16]
	VLD1.P 64(R11), [V15.B16, V16.B16, V17.B16, V18.B16]
	VLD1.P 32(R11), [V19.S4, V20.S4]
	ZERO(21)
	ZERO(22)
	SMMLA(21, 7, 11)
	SMMLA(21, 8, 12)
	SMMLA(21, 9, 13)
	SMMLA(21, 10, 14)
	SMMLA(22, 7, 15)
	SMMLA(22, 8, 16)
	SMMLA(22, 9, 17)
	SMMLA(22, 10, 18)
	CBZ  R5, blockscales
	MOVBU.P 1(R12), R15
	MOVBU.P 1(R13), R16
	UCVTFWS R15, F23
	UCVTFWS R16, F24
	B    scaled

blockscales:
	FMOVS.P 4(R12), F23
	FMOVS.P 4(R13), F24

scaled:
	VDUP  V23.S[0], V23.S4
	VDUP  V24.S[0], V24.S4
	VZIP1 V24.D2, V23.D2, V23.D2
	FMULV(25, 23, 19)
	FMULV(26, 23, 20)
	SCVTF4S(21, 21)
	SCVTF4S(22, 22)
	FMLAV(27, 21, 25)
	FMLAV(28, 22, 26)
	SUBS $1, R14
	BNE  block

	// LPBQ: the rows' scales
	CBZ  R5, store
	FMOVS (R6), F23
	FMOVS 4(R6), F24
	VDUP  V23.S[0], V23.S4
	VDUP  V24.S[0], V24.S4
	VZIP1 V24.D2, V23.D2, V23.D2
	FMULV(27, 27, 23)
	FMULV(28, 28, 23)

store:
	STORE_2X4

	ADD  $8, R0
	ADD  R8<<1, R2, R2
	CBZ  R5, nextscales
	ADD  R4<<1, R5, R5
	ADD  $8, R6
	B    next

nextscales:
	ADD  R4<<3, R6, R6

next:
	SUBS $1, R3
	BNE  pair
	RET

// func w8Rows2x4MMLA(dst *float32, ldd int, u *uint8, npairs, nb int, scales *float32, rec *byte)
//
// npairs pairs of rows of a packed 8-bit weight against four tokens: the
// rows' bytes get their top bit flipped (q = u - 128 as a signed byte),
// are interleaved by 8 bytes like the records (q4MMLAPrep), and four
// SMMLA per pair of tokens give the 2x2 block dots, scaled by the
// record's [d0, d1, d0, d1]; the row scales multiply the sums at the end.
//
// Registers: R0 dst of the pair, R1 ldd*4, R2 u of the pair, R3 pairs
// left, R4 nb, R6 scales, R7 rec, R8 K (the row stride), R9/R10 the rows,
// R11 rec (advancing), R14 blocks left, R15/R16 scratch. V0 0x80, V3-V6
// the rows' bytes, V7-V10 interleaved, V11-V20 records, V21/V22 block
// dots, V23 row scales, V27/V28 sums.
TEXT ·w8Rows2x4MMLA(SB), NOSPLIT, $0-56
	MOVD dst+0(FP), R0
	MOVD ldd+8(FP), R1
	LSL  $2, R1
	MOVD u+16(FP), R2
	MOVD npairs+24(FP), R3
	MOVD nb+32(FP), R4
	MOVD scales+40(FP), R6
	MOVD rec+48(FP), R7
	LSL  $5, R4, R8
	VMOVI $128, V0.B16

w8pair:
	MOVD R2, R9
	ADD  R8, R2, R10
	MOVD R7, R11
	ZERO(27)
	ZERO(28)
	MOVD R4, R14

w8block:
	VLD1.P 32(R9), [V3.B16, V4.B16]
	VLD1.P 32(R10), [V5.B16, V6.B16]
	VEOR   V0.B16, V3.B16, V3.B16
	VEOR   V0.B16, V4.B16, V4.B16
	VEOR   V0.B16, V5.B16, V5.B16
	VEOR   V0.B16, V6.B16, V6.B16
	VZIP1  V5.D2, V3.D2, V7.D2
	VZIP2  V5.D2, V3.D2, V8.D2
	VZIP1  V6.D2, V4.D2, V9.D2
	VZIP2  V6.D2, V4.D2, V10.D2
	VLD1.P 64(R11), [V11.B16, V12.B16, V13.B16, V14.B16]
	VLD1.P 64(R11), [V15.B16, V16.B16, V17.B16, V18.B16]
	VLD1.P 32(R11), [V19.S4, V20.S4]
	ZERO(21)
	ZERO(22)
	SMMLA(21, 7, 11)
	SMMLA(21, 8, 12)
	SMMLA(21, 9, 13)
	SMMLA(21, 10, 14)
	SMMLA(22, 7, 15)
	SMMLA(22, 8, 16)
	SMMLA(22, 9, 17)
	SMMLA(22, 10, 18)
	SCVTF4S(21, 21)
	SCVTF4S(22, 22)
	FMLAV(27, 21, 19)
	FMLAV(28, 22, 20)
	SUBS $1, R14
	BNE  w8block

	FMOVS (R6), F23
	FMOVS 4(R6), F24
	VDUP  V23.S[0], V23.S4
	VDUP  V24.S[0], V24.S4
	VZIP1 V24.D2, V23.D2, V23.D2
	FMULV(27, 27, 23)
	FMULV(28, 28, 23)

	STORE_2X4

	ADD  $8, R0
	ADD  R8<<1, R2, R2
	ADD  $8, R6
	SUBS $1, R3
	BNE  w8pair
	RET
