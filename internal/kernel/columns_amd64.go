//go:build !purego

package kernel

// columnsF16With runs ColumnsF16 on a generated kernel (columnsF16Avx2 or
// columnsF16Vnni) for the whole blocks of lanes rows, and the remaining
// rows on columnsF16Row. The kernel's row offsets are int32: wider rows stay in Go.
func columnsF16With(kern func(dst *uint16, src *float32, idx *int32, stride, ld, blocks, n int), lanes int, dst []uint16, stride int, src []float32, ld, T, n int) {
	blocks := T / lanes
	if n == 0 {
		return
	}
	if ld > maxGatherLd {
		columnsF16Tail(dst, stride, src, ld, 0, T, n)
		return
	}
	if blocks > 0 {
		var idx [16]int32
		for i := range idx {
			idx[i] = int32(i * ld)
		}
		kern(&dst[0], &src[0], &idx[0], stride, ld, blocks, n)
	}
	// The rows left (decode stores one) row by row: 8 columns at a
	// time in the kernel, the last n%8 in Go. Adjacent columns (stride
	// 1: a row of a head-major cache) take one store per 8.
	n8 := n &^ 7
	for t := blocks * lanes; t < T; t++ {
		switch {
		case n8 > 0 && stride == 1:
			rowF16(&dst[t], &src[t*ld], n8)
		case n8 > 0:
			columnsF16Row(&dst[t], &src[t*ld], stride, n8)
		}
		columnsF16Rect(dst, stride, src, ld, t, t+1, n8, n)
	}
}

// maxGatherLd keeps the gathers' offsets, (lanes-1)*ld*4 bytes, within
// int32.
const maxGatherLd = 1 << 24
