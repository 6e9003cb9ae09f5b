//go:build !purego

#include "textflag.h"

// FCVTN Vd.4H, Vn.4S (float32 to binary16, FPCR rounding: nearest even)
#define FCVTN(d, n) WORD $(0x0E216800 | ((n)<<5) | (d))

// func columnsF16NEON(dst *uint16, src *float32, stride, ld, blocks, quads int)
// Rows [0, 4*blocks) and columns [0, 4*quads) of ColumnsF16: per 4 rows
// by 4 columns, four 16-byte loads, a 4x4 transposition (TRN1/TRN2 of
// words, then of double words), four FCVTN and four 8-byte stores, one
// per column.
TEXT ·columnsF16NEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD stride+16(FP), R2
	MOVD ld+24(FP), R3
	MOVD blocks+32(FP), R4
	MOVD quads+40(FP), R5
	LSL  $1, R2          // bytes from one column to the next
	LSL  $2, R3          // bytes from one row to the next
	LSL  $2, R2, R15     // bytes from one quad of columns to the next

block:
	MOVD R1, R6
	MOVD R0, R7
	MOVD R5, R8

quad:
	ADD  R3, R6, R9
	ADD  R3, R9, R10
	ADD  R3, R10, R11
	VLD1 (R6), [V0.S4]
	VLD1 (R9), [V1.S4]
	VLD1 (R10), [V2.S4]
	VLD1 (R11), [V3.S4]
	VTRN1 V1.S4, V0.S4, V4.S4 // [a0 b0 a2 b2]
	VTRN2 V1.S4, V0.S4, V5.S4 // [a1 b1 a3 b3]
	VTRN1 V3.S4, V2.S4, V6.S4 // [c0 d0 c2 d2]
	VTRN2 V3.S4, V2.S4, V7.S4 // [c1 d1 c3 d3]
	VTRN1 V6.D2, V4.D2, V0.D2 // column 0: [a0 b0 c0 d0]
	VTRN1 V7.D2, V5.D2, V1.D2 // column 1
	VTRN2 V6.D2, V4.D2, V2.D2 // column 2
	VTRN2 V7.D2, V5.D2, V3.D2 // column 3
	FCVTN(16, 0)
	FCVTN(17, 1)
	FCVTN(18, 2)
	FCVTN(19, 3)
	ADD   R2, R7, R12
	ADD   R2, R12, R13
	ADD   R2, R13, R14
	FMOVD F16, (R7)
	FMOVD F17, (R12)
	FMOVD F18, (R13)
	FMOVD F19, (R14)
	ADD   $16, R6
	ADD   R15, R7
	SUBS  $1, R8
	BNE   quad

	ADD  R3<<2, R1        // the next 4 rows
	ADD  $8, R0           // their 4 binary16 slots in every column
	SUBS $1, R4
	BNE  block
	RET
