//go:build !purego

#include "textflag.h"

// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4S(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))
// FADDP Vd.4S, Vn.4S, Vm.4S
#define FADDP4S(d, n, m) WORD $(0x6E20D400 | ((m)<<16) | ((n)<<5) | (d))
// FADDP Sd, Vn.2S
#define FADDP2S(d, n) WORD $(0x7E30D800 | ((n)<<5) | (d))
// FMLA Vd.4S, Vn.4S, Vm.S[0]
#define FMLAE(d, n, m) WORD $(0x4F801000 | ((m)<<16) | ((n)<<5) | (d))
// FCVTL Vd.4S, Vn.4H (binary16 lanes 0-3 to float32)
#define FCVTL(d, n) WORD $(0x0E217800 | ((n)<<5) | (d))
// FCVTL2 Vd.4S, Vn.8H (binary16 lanes 4-7 to float32)
#define FCVTL2(d, n) WORD $(0x4E217800 | ((n)<<5) | (d))

// Sums the four accumulators V16-V19 into F16.
#define REDUCE4 \
	FADD4S(16, 16, 17) \
	FADD4S(18, 18, 19) \
	FADD4S(16, 16, 18) \
	FADDP4S(16, 16, 16) \
	FADDP2S(16, 16)

// func dotNEON(a, b *float32, n int) float32
// Σ a[i]*b[i] over n, a multiple of 16, in four lanes of four.
TEXT ·dotNEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	LSR  $4, R2
	CBZ  R2, done

loop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFMLA  V4.S4, V0.S4, V16.S4
	VFMLA  V5.S4, V1.S4, V17.S4
	VFMLA  V6.S4, V2.S4, V18.S4
	VFMLA  V7.S4, V3.S4, V19.S4
	SUBS   $1, R2
	BNE    loop

done:
	REDUCE4
	FMOVS F16, ret+24(FP)
	RET

// func dotF16NEON(a *float32, b *uint16, n int) float32
// Σ a[i]*f16(b[i]) over n, a multiple of 16.
TEXT ·dotF16NEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	LSR  $4, R2
	CBZ  R2, done

loop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 32(R1), [V8.H8, V9.H8]
	FCVTL(4, 8)
	FCVTL2(5, 8)
	FCVTL(6, 9)
	FCVTL2(7, 9)
	VFMLA  V4.S4, V0.S4, V16.S4
	VFMLA  V5.S4, V1.S4, V17.S4
	VFMLA  V6.S4, V2.S4, V18.S4
	VFMLA  V7.S4, V3.S4, V19.S4
	SUBS   $1, R2
	BNE    loop

done:
	REDUCE4
	FMOVS F16, ret+24(FP)
	RET

// func axpyNEON(y, x *float32, alpha float32, n int)
// y[i] += alpha*x[i] over n, a multiple of 16 (fused multiply-add).
TEXT ·axpyNEON(SB), NOSPLIT, $0-32
	MOVD  y+0(FP), R0
	MOVD  x+8(FP), R1
	FMOVS alpha+16(FP), F31
	MOVD  n+24(FP), R2
	LSR   $4, R2
	CBZ   R2, done

loop:
	VLD1   (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMLAE(0, 4, 31)
	FMLAE(1, 5, 31)
	FMLAE(2, 6, 31)
	FMLAE(3, 7, 31)
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUBS   $1, R2
	BNE    loop

done:
	RET

// func axpyF16NEON(y *float32, x *uint16, alpha float32, n int)
// y[i] += alpha*f16(x[i]) over n, a multiple of 16.
TEXT ·axpyF16NEON(SB), NOSPLIT, $0-32
	MOVD  y+0(FP), R0
	MOVD  x+8(FP), R1
	FMOVS alpha+16(FP), F31
	MOVD  n+24(FP), R2
	LSR   $4, R2
	CBZ   R2, done

loop:
	VLD1   (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 32(R1), [V8.H8, V9.H8]
	FCVTL(4, 8)
	FCVTL2(5, 8)
	FCVTL(6, 9)
	FCVTL2(7, 9)
	FMLAE(0, 4, 31)
	FMLAE(1, 5, 31)
	FMLAE(2, 6, 31)
	FMLAE(3, 7, 31)
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUBS   $1, R2
	BNE    loop

done:
	RET
