package kernel

// The row kernels composed of one vector kernel call per row: what an ISA
// without dedicated row kernels uses, so the rows still run on its Axpy
// and Dot. Arguments are those of AxpyRows, DotRows and their binary16
// forms; like the other overlays they check them themselves (rowsSpan),
// so they are safe to call directly.

func axpyRowsByRow(dst, alpha, x []float32, stride int) {
	if rowsSpan("AxpyRows", len(alpha), len(dst), stride, len(x)) == 0 {
		return
	}
	for r, a := range alpha {
		axpyImpl(dst, a, x[r*stride:r*stride+len(dst)])
	}
}

func dotRowsByRow(dst, w, y []float32, stride int) {
	if rowsSpan("DotRows", len(dst), len(w), stride, len(y)) == 0 {
		clear(dst)
		return
	}
	for r := range dst {
		dst[r] = dotImpl(w, y[r*stride:r*stride+len(w)])
	}
}

func axpyRowsF16ByRow(dst, alpha []float32, x []uint16, stride int) {
	if rowsSpan("AxpyRowsF16", len(alpha), len(dst), stride, len(x)) == 0 {
		return
	}
	for r, a := range alpha {
		axpyF16Impl(dst, a, x[r*stride:r*stride+len(dst)])
	}
}

func dotRowsF16ByRow(dst, w []float32, y []uint16, stride int) {
	if rowsSpan("DotRowsF16", len(dst), len(w), stride, len(y)) == 0 {
		clear(dst)
		return
	}
	for r := range dst {
		dst[r] = dotF16Impl(w, y[r*stride:r*stride+len(w)])
	}
}
