package main

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/operand"
)

// vpdpbusd emits VPDPBUSD s, u, acc (Go operand order): acc[i] +=
// Σ_j u8(u[4i+j]) * s8(s[4i+j]). avo's instruction table predates
// AVX-512 VNNI, so the instruction is added by hand; the Go assembler
// knows it (EVEX form, zmm or ymm with AVX-512 VL).
func vpdpbusd(s, u, acc operand.Op) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Operands: []operand.Op{s, u, acc},
		Inputs:   []operand.Op{s, u, acc},
		Outputs:  []operand.Op{acc},
		ISA:      []string{"AVX512_VNNI"},
	})
}

// vpdpbusdBcst emits VPDPBUSD with its signed operand s a 4-byte memory
// operand broadcast to every lane (VPDPBUSD.BCST).
func vpdpbusdBcst(s, u, acc operand.Op) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Suffixes: []string{"BCST"},
		Operands: []operand.Op{s, u, acc},
		Inputs:   []operand.Op{s, u, acc},
		Outputs:  []operand.Op{acc},
		ISA:      []string{"AVX512_VNNI"},
	})
}
