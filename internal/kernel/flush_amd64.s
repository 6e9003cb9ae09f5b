//go:build !purego

#include "textflag.h"

// func flushLines(p unsafe.Pointer, n int)
TEXT ·flushLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX     // the end
	ANDQ $-64, AX   // the first line
	JMP  test

line:
	CLFLUSH (AX)
	ADDQ    $64, AX

test:
	CMPQ AX, CX
	JB   line
	MFENCE
	RET

// func flushLinesOpt(p unsafe.Pointer, n int)
TEXT ·flushLinesOpt(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX
	ANDQ $-64, AX
	JMP  test

line:
	CLFLUSHOPT (AX)
	ADDQ       $64, AX

test:
	CMPQ AX, CX
	JB   line
	MFENCE
	RET

// func cpuid7ebx() uint32
TEXT ·cpuid7ebx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	XORL CX, CX
	CPUID
	MOVL BX, ret+0(FP)
	RET
