package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// permIdx is the lane -> block index of the Q4 kernels' scale vectors:
// lane l of an int32 vector holds a partial sum of block l/4.
var permIdx Mem

// nibMask and onesW are 32 bytes of 0x0f and 16 int16 ones: the AVX2
// products' nibble mask and VPMADDWD multiplier (memory operands in the
// 4-bit chunks, which leaves the ymm registers to the tiles).
var nibMask, onesW Mem

// halfPerm[h] picks, from 8 block scales (float32) of a chunk, those of
// half h of the AVX2 chunk sums' lane order: applied to scales 0-7 and
// 8-15 and blended (lanes 2, 3, 6, 7 from the second), half 0 is blocks
// 0 4 8 12 1 5 9 13 and half 1 blocks 2 6 10 14 3 7 11 15.
var halfPerm [2]Mem

// packPerm puts back in order the dwords of VPACKSSDW+VPACKSSWB of four
// ymm vectors (which interleave their 128-bit halves).
var packPerm Mem

func genConsts() {
	permIdx = GLOBL("q4perm", RODATA|NOPTR)
	for l := 0; l < 16; l++ {
		DATA(4*l, U32(l/4))
	}
	nibMask = GLOBL("q4nibmask", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0x0f0f0f0f))
	}
	onesW = GLOBL("q4onesw", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0x00010001))
	}
	for h := range halfPerm {
		halfPerm[h] = GLOBL(fmt.Sprintf("q4halfperm%d", h), RODATA|NOPTR)
		for i, v := range []uint32{0, 4, 0, 4, 1, 5, 1, 5} {
			DATA(4*i, U32(v+uint32(2*h)))
		}
	}
	packPerm = GLOBL("packperm", RODATA|NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
}

// broadcastD sets every int32 lane of dst to the general register r.
// VPBROADCASTD from a general register exists only EVEX-encoded
// (AVX-512), so the AVX2 kernels (zmm false) go through the low lane of
// dst (VMOVD, then the AVX2 VPBROADCASTD from an xmm register): on a CPU
// without AVX-512 the one-instruction form is an illegal instruction.
func broadcastD(zmm bool, r Register, dst interface {
	Op
	Vec
}) {
	if zmm {
		VPBROADCASTD(r, dst)
		return
	}
	VMOVD(r, dst.AsX())
	VPBROADCASTD(dst.AsX(), dst)
}
