//go:build !purego

package kernel

// The arm64 6-bit row kernels (q6Kernel, q6_arm64.s): SDOT (dotprod)
// and widening multiplies (every arm64 CPU). They make the codes signed
// (u - 32) before the products, so they do not read nbias.

//go:noescape
func q6RowsSDOT(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)

//go:noescape
func q6RowsNEON(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)

func q6MatMulSDOT(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int) {
	q6MatMulKernel(q6RowsSDOT, dst, ldd, w, x, n0, n1)
}

func q6MatMulNEON(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int) {
	q6MatMulKernel(q6RowsNEON, dst, ldd, w, x, n0, n1)
}
