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

// The int32x4 partial sums in Vacc of the signed 4-bit weights (wl:
// codes 0..15 of the block, wh: 16..31, both already minus 8) times the
// activations (xl, xh).
#define DOT_SDOT(acc, tmp, wl, wh, xl, xh) \
	ZERO(acc)         \
	SDOT(acc, wl, xl) \
	SDOT(acc, wh, xh)

// The same with widening multiplies: |w*x| <= 8*127, so four products
// per int16 lane cannot overflow.
#define DOT_NEON(acc, tmp, wl, wh, xl, xh) \
	SMULL(tmp, wl, xl)                      \
	SMLAL2(tmp, wl, xl)                     \
	SMLAL(tmp, wh, xh)                      \
	SMLAL2(tmp, wh, xh)                     \
	SADDLP(acc, tmp)

// Arguments of every q4 row kernel (see q4Rows in q4_arm64.go):
// dst+0 ldd+8 nib+16 nrows+24 nb+32 codes+40 scales+48 xq+56 K+64 xd+72.
//
// Registers: R0 dst of the row, R1 ldd*4, R2 nib, R3 rows left, R4 nb,
// R5 codes (advancing), R6 scales (advancing), R7 xq, R8 K, R9 xd,
// R10 nb*4, R11-R14 activations of tokens 0-3, R15-R17,R19 their block
// scales, R20 blocks left, R21 and R23 scratch, R22 codes argument.
// V0 0x0f, V1 8, V2 packed block, V3/V4 low/high codes minus 8,
// V5-V12 activations (two per token), V13-V16 block dots, V17-V20 row
// sums, V21 block scale, V22-V25 block scale times activation scale,
// V26-V29 int16 scratch.

#define Q4_PROLOGUE \
	MOVD dst+0(FP), R0    \
	MOVD ldd+8(FP), R1    \
	LSL  $2, R1           \
	MOVD nib+16(FP), R2   \
	MOVD nrows+24(FP), R3 \
	MOVD nb+32(FP), R4    \
	MOVD codes+40(FP), R5 \
	MOVD R5, R22          \
	MOVD scales+48(FP), R6 \
	MOVD xq+56(FP), R7    \
	MOVD K+64(FP), R8     \
	MOVD xd+72(FP), R9    \
	LSL  $2, R4, R10      \
	VMOVI $15, V0.B16     \
	VMOVI $8, V1.B16

// Unpacks the block at R2 into V3 (codes 0..15) and V4 (16..31) minus 8
// and loads its scale into F21.
#define Q4_BLOCK \
	VLD1.P 16(R2), [V2.B16]         \
	VAND   V0.B16, V2.B16, V3.B16   \
	VUSHR  $4, V2.B16, V4.B16       \
	VSUB   V1.B16, V3.B16, V3.B16   \
	VSUB   V1.B16, V4.B16, V4.B16   \
	CBZ    R22, 4(PC)               \
	MOVBU.P 1(R5), R21              \
	UCVTFWS R21, F21                \
	B      2(PC)                    \
	FMOVS.P 4(R6), F21

// Multiplies V17's lanes by the row scale when the weight has codes.
#define Q4_ROWSCALE \
	CBZ    R22, 3(PC)     \
	FMOVS.P 4(R6), F21    \
	FMULE(17, 17, 21)

// ROWS4_STEP is one block of four rows: their weights and row scales
// times the block's D, the four dot products with the block's
// activations (DOT, SDOT or NEON), converted and added into V17-V20.
#define ROWS4_STEP(DOT) \
	VLD1.P 32(R11), [V5.B16, V6.B16]  \
	VLD1.P 32(R12), [V7.B16, V8.B16]  \
	VLD1.P 32(R13), [V9.B16, V10.B16] \
	VLD1.P 32(R14), [V11.B16, V12.B16] \
	FMOVS.P 4(R15), F22               \
	FMOVS.P 4(R16), F23               \
	FMOVS.P 4(R17), F24               \
	FMOVS.P 4(R19), F25               \
	FMULS F21, F22, F22               \
	FMULS F21, F23, F23               \
	FMULS F21, F24, F24               \
	FMULS F21, F25, F25               \
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
	FMLAE(20, 16, 25)

// q4Rows4 body: rows against four tokens.
#define Q4_ROWS4(DOT) \
	Q4_PROLOGUE \
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
	Q4_BLOCK                          \
	ROWS4_STEP(DOT)                   \
	SUBS $1, R20                      \
	BNE  block4                       \
	FADDP4S(17, 17, 18)               \
	FADDP4S(19, 19, 20)               \
	FADDP4S(17, 17, 19)               \
	Q4_ROWSCALE                       \
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

// q4Rows1 body: rows against one token.
#define Q4_ROWS1(DOT) \
	Q4_PROLOGUE \
row1:                                 \
	MOVD R7, R11                      \
	MOVD R9, R15                      \
	ZERO(17)                          \
	MOVD R4, R20                      \
block1:                               \
	Q4_BLOCK                          \
	VLD1.P 32(R11), [V5.B16, V6.B16]  \
	FMOVS.P 4(R15), F22               \
	FMULS F21, F22, F22               \
	DOT(13, 26, 3, 4, 5, 6)           \
	SCVTF4S(13, 13)                   \
	FMLAE(17, 13, 22)                 \
	SUBS $1, R20                      \
	BNE  block1                       \
	FADDP4S(17, 17, 17)               \
	FADDP2S(17, 17)                   \
	Q4_ROWSCALE                       \
	FMOVS F17, (R0)                   \
	ADD  $4, R0                       \
	SUBS $1, R3                       \
	BNE  row1                         \
	RET

// The K4 form (Q4_K super-blocks, see q4K4Rows in q4_arm64.go).
// Arguments: dst+0 ldd+8 nib+16 nrows+24 nb+32 rec+40 xq+48 K+56 xd+64
// sumd+72. The codes are taken as they are (0..15, no zero point 8: the
// minimums' terms come from sumd, D*Sum per block, times dmin*m).
//
// Registers as in the other q4 row kernels (R0 dst, R1 ldd*4, R2 nib,
// R3 rows left, R4 nb, R7 xq, R8 K, R9 xd, R10 nb*4, R11-R14 activations,
// R15-R17,R19 block scales of tokens 0-3, R20 blocks left, R21 sc, R23 m),
// and R22 the row's current 48-byte record (it walks on from row to
// row), R24 the half of the record (0 or 8), R25 the scales of the half
// (post-incremented; the minimums lie 16 bytes on), R26 the half's d and
// dmin, R6 blocks left in the super-block, R5 sumd. V1 dmin*m, V2 the
// packed block then d and dmin, V21 d*sc, V30 the minimums' terms (one
// lane per token), V31 sumd of the block.

// FSUB Vd.4S, Vn.4S, Vm.4S
#define FSUB4S(d, n, m) WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d))

#define K4_PROLOGUE \
	MOVD dst+0(FP), R0    \
	MOVD ldd+8(FP), R1    \
	LSL  $2, R1           \
	MOVD nib+16(FP), R2   \
	MOVD nrows+24(FP), R3 \
	MOVD nb+32(FP), R4    \
	MOVD rec+40(FP), R22  \
	MOVD xq+48(FP), R7    \
	MOVD K+56(FP), R8     \
	MOVD xd+64(FP), R9    \
	LSL  $2, R4, R10      \
	VMOVI $15, V0.B16

// Unpacks the block at R2 into V3 (codes 0..15) and V4 (16..31), and
// sets F21 = d*sc and F1 = dmin*m (each product exact in float32).
#define K4_BLOCK \
	MOVBU.P 1(R25), R21             \
	MOVBU   15(R25), R23            \
	VLD1.P  16(R2), [V2.B16]        \
	VAND    V0.B16, V2.B16, V3.B16  \
	VUSHR   $4, V2.B16, V4.B16      \
	FMOVS   (R26), F2               \
	UCVTFWS R21, F21                \
	FMULS   F2, F21, F21            \
	FMOVS   4(R26), F2              \
	UCVTFWS R23, F1                 \
	FMULS   F2, F1, F1

// Starts a super-block: its scales at R22+R24, d and dmin 32 bytes on.
#define K4_SUPER \
	ADD  R22, R24, R25 \
	ADD  $32, R25, R26 \
	MOVD $8, R6

// Ends a super-block: the next half of the record, or the next record.
#define K4_NEXT \
	EOR  $8, R24       \
	CBNZ R24, 2(PC)    \
	ADD  $48, R22

// Ends a row: a row that ends on a first half skips its record's rest.
#define K4_ROWEND \
	CBZ R24, 2(PC) \
	ADD $48, R22

#define K4_ROWS4(DOT) \
	K4_PROLOGUE \
k4row4:                               \
	MOVD R7, R11                      \
	ADD  R8, R11, R12                 \
	ADD  R8, R12, R13                 \
	ADD  R8, R13, R14                 \
	MOVD R9, R15                      \
	ADD  R10, R15, R16                \
	ADD  R10, R16, R17                \
	ADD  R10, R17, R19                \
	MOVD sumd+72(FP), R5              \
	ZERO(17)                          \
	ZERO(18)                          \
	ZERO(19)                          \
	ZERO(20)                          \
	ZERO(30)                          \
	MOVD R4, R20                      \
	MOVD $0, R24                      \
k4super4:                             \
	K4_SUPER                          \
k4block4:                             \
	K4_BLOCK                          \
	ROWS4_STEP(DOT)                   \
	VLD1.P 16(R5), [V31.S4]           \
	FMLAE(30, 31, 1)                  \
	SUBS $1, R6                       \
	BNE  k4block4                     \
	K4_NEXT                           \
	SUBS $8, R20                      \
	BNE  k4super4                     \
	K4_ROWEND                         \
	FADDP4S(17, 17, 18)               \
	FADDP4S(19, 19, 20)               \
	FADDP4S(17, 17, 19)               \
	FSUB4S(17, 17, 30)                \
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
	BNE  k4row4                       \
	RET

#define K4_ROWS1(DOT) \
	K4_PROLOGUE \
k4row1:                               \
	MOVD R7, R11                      \
	MOVD R9, R15                      \
	MOVD sumd+72(FP), R5              \
	ZERO(17)                          \
	ZERO(30)                          \
	MOVD R4, R20                      \
	MOVD $0, R24                      \
k4super1:                             \
	K4_SUPER                          \
k4block1:                             \
	K4_BLOCK                          \
	VLD1.P 32(R11), [V5.B16, V6.B16]  \
	FMOVS.P 4(R15), F22               \
	FMULS F21, F22, F22               \
	DOT(13, 26, 3, 4, 5, 6)           \
	SCVTF4S(13, 13)                   \
	FMLAE(17, 13, 22)                 \
	FMOVS.P 4(R5), F31                \
	FMLAE(30, 31, 1)                  \
	SUBS $1, R6                       \
	BNE  k4block1                     \
	K4_NEXT                           \
	SUBS $8, R20                      \
	BNE  k4super1                     \
	K4_ROWEND                         \
	FADDP4S(17, 17, 17)               \
	FADDP2S(17, 17)                   \
	FSUBS F30, F17, F17               \
	FMOVS F17, (R0)                   \
	ADD  $4, R0                       \
	SUBS $1, R3                       \
	BNE  k4row1                       \
	RET


// func q4Rows1SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)
TEXT ·q4Rows1SDOT(SB), NOSPLIT, $0-80
	Q4_ROWS1(DOT_SDOT)

// func q4Rows4SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)
TEXT ·q4Rows4SDOT(SB), NOSPLIT, $0-80
	Q4_ROWS4(DOT_SDOT)

// func q4Rows1NEON(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)
TEXT ·q4Rows1NEON(SB), NOSPLIT, $0-80
	Q4_ROWS1(DOT_NEON)

// func q4Rows4NEON(dst *float32, ldd int, nib *byte, nrows, nb int, codes *uint8, scales *float32, xq *int8, K int, xd *float32)
TEXT ·q4Rows4NEON(SB), NOSPLIT, $0-80
	Q4_ROWS4(DOT_NEON)

// func q4K4Rows1SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)
TEXT ·q4K4Rows1SDOT(SB), NOSPLIT, $0-80
	K4_ROWS1(DOT_SDOT)

// func q4K4Rows4SDOT(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)
TEXT ·q4K4Rows4SDOT(SB), NOSPLIT, $0-80
	K4_ROWS4(DOT_SDOT)

// func q4K4Rows1NEON(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)
TEXT ·q4K4Rows1NEON(SB), NOSPLIT, $0-80
	K4_ROWS1(DOT_NEON)

// func q4K4Rows4NEON(dst *float32, ldd int, nib *byte, nrows, nb int, rec *byte, xq *int8, K int, xd *float32, sumd *float32)
TEXT ·q4K4Rows4NEON(SB), NOSPLIT, $0-80
	K4_ROWS4(DOT_NEON)
