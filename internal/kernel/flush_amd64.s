//go:build !purego

#include "textflag.h"

// func flushLines(p unsafe.Pointer, n int, opt bool)
TEXT ·flushLines(SB), NOSPLIT, $0-17
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	MOVB opt+16(FP), DX
	ADDQ AX, CX     // the end
	ANDQ $-64, AX   // the first line
	TESTB DX, DX
	JNZ  optTest
	JMP  test

line:
	CLFLUSH (AX)
	ADDQ    $64, AX

test:
	CMPQ AX, CX
	JB   line
	JMP  done

optLine:
	CLFLUSHOPT (AX)
	ADDQ       $64, AX

optTest:
	CMPQ AX, CX
	JB   optLine

done:
	MFENCE
	RET

// func cpuid7ebx() uint32
TEXT ·cpuid7ebx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	XORL CX, CX
	CPUID
	MOVL BX, ret+0(FP)
	RET
