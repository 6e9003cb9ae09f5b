//go:build !purego

#include "textflag.h"

// Instructions the Go assembler has no mnemonic for, encoded by hand
// (d, n, m are vector register numbers 0..31).

// MOVI Vd.2D, #0
#define ZERO(d) WORD $(0x6F00E400 | (d))
// SDOT Vd.4S, Vn.16B, Vm.16B
#define SDOT(d, n, m) WORD $(0x4E809400 | ((m)<<16) | ((n)<<5) | (d))
// SMULL Vd.8H, Vn.8B, Vm.8B and SMULL2 Vd.8H, Vn.16B, Vm.16B
#define SMULL(d, n, m) WORD $(0x0E20C000 | ((m)<<16) | ((n)<<5) | (d))
#define SMULL2(d, n, m) WORD $(0x4E20C000 | ((m)<<16) | ((n)<<5) | (d))
// SMLAL Vd.8H, Vn.8B, Vm.8B and SMLAL2 Vd.8H, Vn.16B, Vm.16B
#define SMLAL(d, n, m) WORD $(0x0E208000 | ((m)<<16) | ((n)<<5) | (d))
#define SMLAL2(d, n, m) WORD $(0x4E208000 | ((m)<<16) | ((n)<<5) | (d))
// SADDLP Vd.4S, Vn.8H
#define SADDLP(d, n) WORD $(0x4E602800 | ((n)<<5) | (d))
// ADDP Vd.4S, Vn.4S, Vm.4S
#define ADDP4S(d, n, m) WORD $(0x4EA0BC00 | ((m)<<16) | ((n)<<5) | (d))
// MUL Vd.4S, Vn.4S, Vm.4S
#define MUL4S(d, n, m) WORD $(0x4EA09C00 | ((m)<<16) | ((n)<<5) | (d))
// SXTL Vd.8H, Vn.8B / SXTL2 Vd.8H, Vn.16B (SSHLL #0)
#define SXTL8H(d, n) WORD $(0x0F08A400 | ((n)<<5) | (d))
#define SXTL28H(d, n) WORD $(0x4F08A400 | ((n)<<5) | (d))
// SXTL Vd.4S, Vn.4H / SXTL2 Vd.4S, Vn.8H
#define SXTL4S(d, n) WORD $(0x0F10A400 | ((n)<<5) | (d))
#define SXTL24S(d, n) WORD $(0x4F10A400 | ((n)<<5) | (d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF4S(d, n) WORD $(0x4E21D800 | ((n)<<5) | (d))
// FMUL Vd.4S, Vn.4S, Vm.4S and FADD Vd.4S, Vn.4S, Vm.4S
#define FMUL4S(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))
#define FADD4S(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))
// FMLA Vd.4S, Vn.4S, Vm.S[0]
#define FMLAE(d, n, m) WORD $(0x4F801000 | ((m)<<16) | ((n)<<5) | (d))
// FADDP Vd.4S, Vn.4S, Vm.4S and FADDP Sd, Vn.2S
#define FADDP4S(d, n, m) WORD $(0x6E20D400 | ((m)<<16) | ((n)<<5) | (d))
#define FADDP2S(d, n) WORD $(0x7E30D800 | ((n)<<5) | (d))

// Arguments (q6_arm64.go): nib+0 hi+8 sub+16 d+24 x+32 nbias+40 dx+48
// ns+56 n+64 dst+72. nbias is not read: the codes are made signed
// (u - 32) before the products.
//
// Registers: R0 nib, R1 hi, R2 sub, R3 d, R4-R7 the token's codes of
// chunks 0-3 (slot order, q6Records), R8 dx, R9 rows left, R10 dst,
// R11 super-blocks left, R12 ns. V0-V3 nib of chunks 0/1, V4-V7 of
// chunks 2/3, V8-V11 hi, V12 sub bytes, V13 d, V16-V19 sub-scales as
// int32 by group quarter, V20-V23 signed codes of the 4 chunks, V14,
// V15, V31 scratch, V24-V27 float sums by quarter, V28 0x0f, V29 0x30,
// V30 32.

// CODES makes V20-V23, the signed codes of chunks 0-3 at quarter q
// (16 slots: groups 4q..4q+3), from nib vn (chunks 0, 1), vm (2, 3)
// and hi vh.
#define CODES(vn, vm, vh) \
	VAND  V28.B16, vn.B16, V20.B16 \
	VSHL  $4, vh.B16, V14.B16      \
	VAND  V29.B16, V14.B16, V14.B16 \
	VORR  V14.B16, V20.B16, V20.B16 \
	VSUB  V30.B16, V20.B16, V20.B16 \
	VUSHR $4, vn.B16, V21.B16      \
	VSHL  $2, vh.B16, V14.B16      \
	VAND  V29.B16, V14.B16, V14.B16 \
	VORR  V14.B16, V21.B16, V21.B16 \
	VSUB  V30.B16, V21.B16, V21.B16 \
	VAND  V28.B16, vm.B16, V22.B16 \
	VAND  V29.B16, vh.B16, V14.B16 \
	VORR  V14.B16, V22.B16, V22.B16 \
	VSUB  V30.B16, V22.B16, V22.B16 \
	VUSHR $4, vm.B16, V23.B16      \
	VUSHR $2, vh.B16, V14.B16      \
	VAND  V29.B16, V14.B16, V14.B16 \
	VORR  V14.B16, V23.B16, V23.B16 \
	VSUB  V30.B16, V23.B16, V23.B16

// DOT_SDOT leaves in V15 the 4 group dot products of the quarter.
#define DOT_SDOT \
	ZERO(15)                    \
	VLD1.P 16(R4), [V14.B16]    \
	SDOT(15, 20, 14)            \
	VLD1.P 16(R5), [V14.B16]    \
	SDOT(15, 21, 14)            \
	VLD1.P 16(R6), [V14.B16]    \
	SDOT(15, 22, 14)            \
	VLD1.P 16(R7), [V14.B16]    \
	SDOT(15, 23, 14)

// DOT_NEON is DOT_SDOT with widening multiplies: int16 lane i sums the
// 4 chunks' products of slot i (|sum| <= 4*32*128), then pairs of lanes
// and pairs of those make the groups.
#define DOT_NEON \
	VLD1.P 16(R4), [V14.B16]    \
	SMULL(15, 20, 14)           \
	SMULL2(31, 20, 14)          \
	VLD1.P 16(R5), [V14.B16]    \
	SMLAL(15, 21, 14)           \
	SMLAL2(31, 21, 14)          \
	VLD1.P 16(R6), [V14.B16]    \
	SMLAL(15, 22, 14)           \
	SMLAL2(31, 22, 14)          \
	VLD1.P 16(R7), [V14.B16]    \
	SMLAL(15, 23, 14)           \
	SMLAL2(31, 23, 14)          \
	SADDLP(15, 15)              \
	SADDLP(31, 31)              \
	ADDP4S(15, 15, 31)

// QUARTER adds quarter q's groups (codes from vn, vm, vh; sub-scales
// in vs) into the float sums vacc.
#define QUARTER(DOT, vn, vm, vh, vs, vacc) \
	CODES(vn, vm, vh)             \
	DOT                           \
	MUL4S(15, vs, 15)             \
	SCVTF4S(15, 15)               \
	VLD1.P 16(R8), [V14.S4]       \
	FMUL4S(15, 15, 14)            \
	FMLAE(vacc, 15, 13)

#define Q6ROWS(DOT) \
	MOVD nib+0(FP), R0                         \
	MOVD hi+8(FP), R1                          \
	MOVD sub+16(FP), R2                        \
	MOVD d+24(FP), R3                          \
	MOVD ns+56(FP), R12                        \
	MOVD n+64(FP), R9                          \
	MOVD dst+72(FP), R10                       \
	VMOVI $15, V28.B16                         \
	VMOVI $48, V29.B16                         \
	VMOVI $32, V30.B16                         \
row:                                           \
	MOVD x+32(FP), R4                          \
	ADD  $64, R4, R5                           \
	ADD  $128, R4, R6                          \
	ADD  $192, R4, R7                          \
	MOVD dx+48(FP), R8                         \
	MOVD R12, R11                              \
	ZERO(24)                                   \
	ZERO(25)                                   \
	ZERO(26)                                   \
	ZERO(27)                                   \
super:                                         \
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]   \
	VLD1.P 64(R0), [V4.B16, V5.B16, V6.B16, V7.B16]   \
	VLD1.P 64(R1), [V8.B16, V9.B16, V10.B16, V11.B16] \
	VLD1.P 16(R2), [V12.B16]                   \
	FMOVS.P 4(R3), F13                         \
	SXTL8H(14, 12)                             \
	SXTL28H(15, 12)                            \
	SXTL4S(16, 14)                             \
	SXTL24S(17, 14)                            \
	SXTL4S(18, 15)                             \
	SXTL24S(19, 15)                            \
	QUARTER(DOT, V0, V4, V8, 16, 24)           \
	QUARTER(DOT, V1, V5, V9, 17, 25)           \
	QUARTER(DOT, V2, V6, V10, 18, 26)          \
	QUARTER(DOT, V3, V7, V11, 19, 27)          \
	ADD  $192, R4                              \
	ADD  $192, R5                              \
	ADD  $192, R6                              \
	ADD  $192, R7                              \
	SUBS $1, R11                               \
	BNE  super                                 \
	FADD4S(24, 24, 25)                         \
	FADD4S(26, 26, 27)                         \
	FADD4S(24, 24, 26)                         \
	FADDP4S(24, 24, 24)                        \
	FADDP2S(24, 24)                            \
	FMOVS.P F24, 4(R10)                        \
	SUBS $1, R9                                \
	BNE  row                                   \
	RET

// func q6RowsSDOT(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)
TEXT ·q6RowsSDOT(SB), NOSPLIT, $0-80
	Q6ROWS(DOT_SDOT)

// func q6RowsNEON(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)
TEXT ·q6RowsNEON(SB), NOSPLIT, $0-80
	Q6ROWS(DOT_NEON)
