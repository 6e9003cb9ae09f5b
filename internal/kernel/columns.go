package kernel

import "github.com/aotlm/aotlm/internal/tensor"

// ColumnsF16 stores T rows of n float32 values as n columns of binary16
// values: dst[j*stride + t] = f16(src[t*ld + j]) for t < T, j < n,
// rounded to nearest even (tensor.F32ToF16; a NaN stays a NaN, its
// payload may differ). It is the store of a pass's keys or values into a
// transposed binary16 cache. A short src or dst panics before anything
// is written.
func ColumnsF16(dst []uint16, stride int, src []float32, ld, T, n int) {
	if T == 0 || n == 0 {
		return
	}
	rowsSpan("ColumnsF16 (src)", T, n, ld, len(src))
	rowsSpan("ColumnsF16 (dst)", n, T, stride, len(dst))
	columnsF16Impl(dst, stride, src, ld, T, n)
}

// StoreF16 stores src as binary16 values in dst[:len(src)], rounded to
// nearest even: ColumnsF16 of one row into adjacent columns (a row of a
// head-major binary16 KV cache).
func StoreF16(dst []uint16, src []float32) {
	ColumnsF16(dst, 1, src, len(src), 1, len(src))
}

// columnsF16Generic goes storeBlock columns at a time, token by token, so
// that each row's block of values is one cache line.
func columnsF16Generic(dst []uint16, stride int, src []float32, ld, T, n int) {
	columnsF16Tail(dst, stride, src, ld, 0, T, n)
}

// columnsF16Tail stores rows [t0, T) of ColumnsF16.
func columnsF16Tail(dst []uint16, stride int, src []float32, ld, t0, T, n int) {
	columnsF16Rect(dst, stride, src, ld, t0, T, 0, n)
}

// columnsF16Rect stores rows [t0, t1) of columns [j0, j1) of ColumnsF16,
// 16 columns at a time, row by row.
func columnsF16Rect(dst []uint16, stride int, src []float32, ld, t0, t1, j0, j1 int) {
	const block = 16
	for c0 := j0; c0 < j1; c0 += block {
		c1 := min(c0+block, j1)
		for t := t0; t < t1; t++ {
			for j, x := range src[t*ld+c0 : t*ld+c1] {
				dst[(c0+j)*stride+t] = tensor.F32ToF16(x)
			}
		}
	}
}
