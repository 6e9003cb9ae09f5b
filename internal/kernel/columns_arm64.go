//go:build !purego

package kernel

import "unsafe"

//go:noescape
func columnsF16NEON(dst *uint16, src *float32, stride, ld, blocks, quads int)

// columnsF16Arm64 runs ColumnsF16 on NEON for whole blocks of 4 rows by 4
// columns, and the rest in Go.
func columnsF16Arm64(dst []uint16, stride int, src []float32, ld, T, n int) {
	blocks, quads := T/4, n/4
	if blocks == 0 || quads == 0 {
		columnsF16Tail(dst, stride, src, ld, 0, T, n)
		return
	}
	columnsF16NEON(unsafe.SliceData(dst), unsafe.SliceData(src), stride, ld, blocks, quads)
	columnsF16Rect(dst, stride, src, ld, 0, 4*blocks, 4*quads, n)
	columnsF16Tail(dst, stride, src, ld, 4*blocks, T, n)
}
