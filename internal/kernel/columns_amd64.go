//go:build !purego

package kernel

// columnsF16With runs ColumnsF16 on a generated kernel (columnsF16Avx2 or
// columnsF16Vnni) for the whole blocks of lanes rows, and the remaining
// rows in Go. The kernel's row offsets are int32: wider rows stay in Go.
func columnsF16With(kern func(dst *uint16, src *float32, idx *int32, stride, ld, blocks, n int), lanes int, dst []uint16, stride int, src []float32, ld, T, n int) {
	blocks := T / lanes
	if n == 0 {
		return
	}
	if blocks == 0 || ld > maxGatherLd {
		columnsF16Tail(dst, stride, src, ld, 0, T, n)
		return
	}
	var idx [16]int32
	for i := range idx {
		idx[i] = int32(i * ld)
	}
	kern(&dst[0], &src[0], &idx[0], stride, ld, blocks, n)
	columnsF16Tail(dst, stride, src, ld, blocks*lanes, T, n)
}

// maxGatherLd keeps the gathers' offsets, (lanes-1)*ld*4 bytes, within
// int32.
const maxGatherLd = 1 << 24
