//go:build !purego

#include "textflag.h"

// Both kernels: AX nib, BX hi, CX sub, DX d, R8 super-blocks a row, R9
// rows left, R10 dst; per row SI the token's codes, DI nbias, R12 dx,
// R13 super-blocks left. Y0 (the low half of Z0) holds the row's sums.
#define Q6ARGS \
	MOVQ nib+0(FP), AX  \
	MOVQ hi+8(FP), BX   \
	MOVQ sub+16(FP), CX \
	MOVQ d+24(FP), DX   \
	MOVQ ns+56(FP), R8  \
	MOVQ n+64(FP), R9   \
	MOVQ dst+72(FP), R10

#define Q6ROWARGS \
	MOVQ x+32(FP), SI     \
	MOVQ nbias+40(FP), DI \
	MOVQ dx+48(FP), R12   \
	MOVQ R8, R13

// Q6NEXT steps to the next super-block and counts it.
#define Q6NEXT \
	ADDQ $128, AX \
	ADDQ $64, BX  \
	ADDQ $16, CX  \
	ADDQ $4, DX   \
	ADDQ $256, SI \
	ADDQ $64, DI  \
	ADDQ $64, R12 \
	DECQ R13

// Q6STORE stores the sum of Y0's 8 lanes at R10, steps to the next row
// and counts it.
#define Q6STORE \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0       \
	VMOVHLPS X0, X0, X1     \
	VADDPS X1, X0, X0       \
	VPSHUFD $1, X0, X1      \
	VADDSS X1, X0, X0       \
	VMOVSS X0, (R10)        \
	ADDQ $4, R10            \
	DECQ R9

// Q6PREFETCH asks for each plane of the super-block twice, as the
// generated row loops do (_gen/prefetch.go): into the second-level cache
// 128 super-blocks ahead (16 KiB of the low nibbles), and into the first
// 32 ahead (4 KiB).
#define Q6PREFETCH \
	PREFETCHT1 16384(AX) \
	PREFETCHT1 16448(AX) \
	PREFETCHT1 8192(BX)  \
	PREFETCHT1 2048(CX)  \
	PREFETCHT1 512(DX)   \
	PREFETCHT0 4096(AX)  \
	PREFETCHT0 4160(AX)  \
	PREFETCHT0 2048(BX)  \
	PREFETCHT0 512(CX)   \
	PREFETCHT0 128(DX)

// Q6VNNISETUP loads the arguments and the constants: the nibble mask
// (Z31), 0x30 in every byte (Z30), and the bit matrices that move the
// high bits 0-1, 2-3 and 6-7 of each byte to bits 4-5 (Z27, Z26, Z25).
#define Q6VNNISETUP \
	Q6ARGS                        \
	MOVL $0x0f0f0f0f, R11         \
	VPBROADCASTD R11, Z31         \
	MOVL $0x30303030, R11         \
	VPBROADCASTD R11, Z30         \
	MOVQ $0x01020000, R11         \
	VPBROADCASTQ R11, Z27         \
	MOVQ $0x04080000, R11         \
	VPBROADCASTQ R11, Z26         \
	MOVQ $0x40800000, R11         \
	VPBROADCASTQ R11, Z25

// Q6VNNISUPER adds the super-block at AX, BX, CX, DX into Z0. Chunk 0
// is nib0 & 15 with the high bits 0-1 moved to bits 4-5, chunk 1
// nib0 >> 4 with bits 2-3, chunk 2 nib1 & 15 with hi & 0x30, chunk 3
// nib1 >> 4 with bits 6-7 (Z27, Z26 and Z25 are those bit matrices).
#define Q6VNNISUPER \
	VMOVDQU64 (AX), Z1                \
	VMOVDQU64 64(AX), Z2              \
	VMOVDQU64 (BX), Z3                \
	VGF2P8AFFINEQB $0, Z27, Z3, Z4    \
	VPTERNLOGD $0xF8, Z31, Z1, Z4     \
	VPSRLW $4, Z1, Z5                 \
	VGF2P8AFFINEQB $0, Z26, Z3, Z6    \
	VPTERNLOGD $0xF8, Z31, Z5, Z6     \
	VPANDD Z30, Z3, Z7                \
	VPTERNLOGD $0xF8, Z31, Z2, Z7     \
	VPSRLW $4, Z2, Z8                 \
	VGF2P8AFFINEQB $0, Z25, Z3, Z9    \
	VPTERNLOGD $0xF8, Z31, Z8, Z9     \
	VMOVDQU32 (DI), Z10               \
	VPXORD Z11, Z11, Z11              \
	VPDPBUSD (SI), Z4, Z10            \
	VPDPBUSD 64(SI), Z6, Z11          \
	VPDPBUSD 128(SI), Z7, Z10         \
	VPDPBUSD 192(SI), Z9, Z11         \
	VPADDD Z11, Z10, Z10              \
	VPMOVSXBD (CX), Z17               \
	VPMULLD Z17, Z10, Z10             \
	VCVTDQ2PS Z10, Z10                \
	VMULPS (R12), Z10, Z10            \
	VBROADCASTSS (DX), Z17            \
	VFMADD231PS Z17, Z10, Z0

// Q6VNNIROWEND sums Z0 into the row's result and steps to the next row.
#define Q6VNNIROWEND \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS Y1, Y0, Y0        \
	Q6STORE

// func q6RowsVnni(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)
//
// Per super-block: its 256 codes unpacked into four chunks of 64 bytes
// (low nibble | high 2 bits at bits 4-5; GF2P8AFFINEQB moves the bit
// pairs), four VPDPBUSD against the token's codes in the same slot order
// into one accumulator that starts at -32*sum(x) per group (PackQ6 puts
// group g in 32-bit lane g of every chunk), times the groups' sub-scales,
// to float32, times the activation block scales, then accumulated with
// d in 16 float32 lanes, summed at the end of the row.
TEXT ·q6RowsVnni(SB), NOSPLIT, $0-80
	Q6VNNISETUP

row:
	Q6ROWARGS
	VPXORD Z0, Z0, Z0

super:
	Q6VNNISUPER
	Q6NEXT
	JNZ  super

	Q6VNNIROWEND
	JNZ  row
	VZEROUPPER
	RET

// func q6RowsVnniPf(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)
//
// q6RowsVnni asking for each plane ahead (Q6PREFETCH).
TEXT ·q6RowsVnniPf(SB), NOSPLIT, $0-80
	Q6VNNISETUP

row:
	Q6ROWARGS
	VPXORD Z0, Z0, Z0

super:
	Q6PREFETCH
	Q6VNNISUPER
	Q6NEXT
	JNZ  super

	Q6VNNIROWEND
	JNZ  row
	VZEROUPPER
	RET

// HALF6 adds half h (groups 8h..8h+7, byte offset o = 32h in a chunk)
// of a super-block into Y0, with AVX2: codes unpacked as q6RowsVnni
// does, VPMADDUBSW by chunk, two chunks added in int16 (|sum| <= 2*2*63*128),
// VPMADDWD by ones to int32 group lanes, then the scale steps.
#define HALF6(o, so) \
	VMOVDQU o(AX), Y1             \
	VMOVDQU 64+o(AX), Y2          \
	VMOVDQU o(BX), Y3             \
	VPAND   Y15, Y1, Y4           \
	VPSLLW  $4, Y3, Y5            \
	VPAND   Y14, Y5, Y5           \
	VPOR    Y5, Y4, Y4            \
	VPSRLW  $4, Y1, Y6            \
	VPAND   Y15, Y6, Y6           \
	VPSLLW  $2, Y3, Y5            \
	VPAND   Y14, Y5, Y5           \
	VPOR    Y5, Y6, Y6            \
	VPMADDUBSW o(SI), Y4, Y4      \
	VPMADDUBSW 64+o(SI), Y6, Y6   \
	VPADDW  Y6, Y4, Y4            \
	VPMADDWD Y13, Y4, Y4          \
	VPAND   Y15, Y2, Y7           \
	VPAND   Y14, Y3, Y5           \
	VPOR    Y5, Y7, Y7            \
	VPSRLW  $4, Y2, Y8            \
	VPAND   Y15, Y8, Y8           \
	VPSRLW  $2, Y3, Y5            \
	VPAND   Y14, Y5, Y5           \
	VPOR    Y5, Y8, Y8            \
	VPMADDUBSW 128+o(SI), Y7, Y7  \
	VPMADDUBSW 192+o(SI), Y8, Y8  \
	VPADDW  Y8, Y7, Y7            \
	VPMADDWD Y13, Y7, Y7          \
	VPADDD  Y7, Y4, Y4            \
	VPADDD  o(DI), Y4, Y4         \
	VPMOVSXBD so(CX), Y5          \
	VPMULLD Y5, Y4, Y4            \
	VCVTDQ2PS Y4, Y4              \
	VMULPS  o(R12), Y4, Y4        \
	VFMADD231PS Y12, Y4, Y0

// func q6RowsAvx2(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)
// Q6AVX2SUPER adds the super-block at AX, BX, CX, DX into Y0 and steps
// to the next.
#define Q6AVX2SUPER \
	VBROADCASTSS (DX), Y12 \
	HALF6(0, 0)            \
	HALF6(32, 8)           \
	Q6NEXT

// Q6AVX2SETUP loads the arguments and the constants: the nibble mask
// (Y15), 0x30 in every byte (Y14) and int16 ones (Y13).
#define Q6AVX2SETUP \
	Q6ARGS                \
	MOVL $0x0f0f0f0f, R11 \
	VMOVD R11, X15        \
	VPBROADCASTD X15, Y15 \
	MOVL $0x30303030, R11 \
	VMOVD R11, X14        \
	VPBROADCASTD X14, Y14 \
	MOVL $0x00010001, R11 \
	VMOVD R11, X13        \
	VPBROADCASTD X13, Y13

TEXT ·q6RowsAvx2(SB), NOSPLIT, $0-80
	Q6AVX2SETUP

avx2row:
	Q6ROWARGS
	VXORPS Y0, Y0, Y0

avx2super:
	Q6AVX2SUPER
	JNZ  avx2super

	Q6STORE
	JNZ  avx2row
	VZEROUPPER
	RET

// func q6RowsAvx2Pf(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)
//
// q6RowsAvx2 asking for each plane ahead, as q6RowsVnniPf does.
TEXT ·q6RowsAvx2Pf(SB), NOSPLIT, $0-80
	Q6AVX2SETUP

avx2row:
	Q6ROWARGS
	VXORPS Y0, Y0, Y0

avx2super:
	Q6PREFETCH
	Q6AVX2SUPER
	JNZ  avx2super

	Q6STORE
	JNZ  avx2row
	VZEROUPPER
	RET
