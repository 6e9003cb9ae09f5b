//go:build !purego

package kernel

// The amd64 6-bit row kernels (q6Kernel, q6_amd64.s): AVX-512 VNNI
// (VPDPBUSD, GF2P8AFFINEQB for the high bit pairs) and AVX2
// (VPMADDUBSW, VPMADDWD). Both take the unsigned codes and start each
// group's sum at nbias.

//go:noescape
func q6RowsVnni(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)

//go:noescape
func q6RowsVnniPf(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)

//go:noescape
func q6RowsAvx2Pf(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)

//go:noescape
func q6RowsAvx2(nib, hi *byte, sub *int8, d *float32, x *int8, nbias *int32, dx *float32, ns, n int, dst *float32)

func q6MatMulVnni(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int) {
	if x.T == 1 && prefetchWalk(decodeWalk.Load()) {
		q6MatMulKernel(q6RowsVnniPf, dst, ldd, w, x, n0, n1)
		return
	}
	q6MatMulKernel(q6RowsVnni, dst, ldd, w, x, n0, n1)
}

func q6MatMulAvx2(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int) {
	if x.T == 1 && prefetchWalk(decodeWalk.Load()) {
		q6MatMulKernel(q6RowsAvx2Pf, dst, ldd, w, x, n0, n1)
		return
	}
	q6MatMulKernel(q6RowsAvx2, dst, ldd, w, x, n0, n1)
}
