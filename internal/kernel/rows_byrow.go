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

// dotRowsF16WByRow runs the binary16 Dot once per row: the product is
// the same with the operands swapped.
func dotRowsF16WByRow(dst []float32, w []uint16, y []float32, stride int) {
	if rowsSpan("DotRowsF16W", len(dst), len(w), stride, len(y)) == 0 {
		clear(dst)
		return
	}
	for r := range dst {
		dst[r] = dotF16Impl(y[r*stride:r*stride+len(w)], w)
	}
}

// axpyRowsU8ByRow and dotRowsU8ByRow check their arguments like the
// other overlays, then run the generic loops: there is no per-row uint8
// vector kernel to compose.
func axpyRowsU8ByRow(dst, alpha []float32, x []uint8, stride int) {
	s := rowsSpan("AxpyRowsU8", len(alpha), len(dst), stride, len(x))
	if s == 0 {
		return
	}
	axpyRowsU8Generic(dst, alpha, x[:s], stride)
}

func dotRowsU8ByRow(dst, w []float32, y []uint8, stride int) {
	s := rowsSpan("DotRowsU8", len(dst), len(w), stride, len(y))
	if s == 0 {
		clear(dst)
		return
	}
	dotRowsU8Generic(dst, w, y[:s], stride)
}
