package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

// permIdx is the lane -> block index of the Q4 kernels' scale vectors:
// lane l of an int32 vector holds a partial sum of block l/4.
var permIdx Mem

// packPerm puts back in order the dwords of VPACKSSDW+VPACKSSWB of four
// ymm vectors (which interleave their 128-bit halves).
var packPerm Mem

func genConsts() {
	permIdx = GLOBL("q4perm", RODATA|NOPTR)
	for l := 0; l < 16; l++ {
		DATA(4*l, U32(l/4))
	}
	packPerm = GLOBL("packperm", RODATA|NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
}
